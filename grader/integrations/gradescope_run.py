"""What `gradescope run` grades with, and what it answers whatever happens.

Every submission gets a results.json: Gradescope shows "The autograder failed to execute correctly" to a student
whose run wrote none. Where bubblewrap works, the submission is graded inside it. Where it cannot (a container that
refuses its namespaces), the autograder built with `--sandbox auto` (the default) grades in the kit's process
sandbox and records that: in the results' `extra_data`, in a hidden test (instructors only), and in the run's
stdout (which Gradescope shows the instructor alone); one built with `--sandbox bwrap` grades nothing and answers
with an autograder error instead. A failure of the grader itself is an autograder error too, never a missing file.
"""
from __future__ import annotations

import contextlib
import json
import traceback
from pathlib import Path

from ..errors import BadInput
from ..problems import ORDER

ISOLATION = "grading isolation (instructors only)"
WHERE = "docs/security.md in attnkit's repository"


def grade_submission(folder: Path, mode: str, visibility: str | None) -> tuple[dict, list[str]]:
    """(results.json's data, lines for the instructor) for the submission in `folder`; `mode`: auto or bwrap."""
    from ..run.jail import remedy, unusable
    from ..run.sandbox import isolation

    why = unusable()
    record = {"sandbox": "bubblewrap" if why is None else "process", "bubblewrap_unusable": why}
    record["isolation"] = isolation(record["sandbox"])
    log = ["attnkit: graded inside bubblewrap" if why is None else
           f"attnkit: bubblewrap cannot sandbox here ({why}): {remedy(why)}"]
    if why is not None and mode == "bwrap":
        record["sandbox"] = record["isolation"] = None
        log.append("attnkit: this autograder was built with --sandbox bwrap, so nothing was graded; every "
                   "submission gets this autograder error until bubblewrap works here (or build it with "
                   "--sandbox auto)")
        return _error("The autograder could not grade your submission: its sandbox cannot run on this machine. "
                      "This is not about your code; your instructor can see why.", record, visibility), log
    if why is not None:
        log.append(f"attnkit: graded in the {record['isolation']} instead: what that does and does not hold is in "
                   f"{WHERE}")
    try:
        with _references_kept_from_view(why is not None, log):
            data = _grade(folder, why is None, visibility)
    except Exception:  # noqa: BLE001 - the grader's own failure: an autograder error, never a missing results.json
        log.append("attnkit: the grader failed (please report it, with this):\n" + traceback.format_exc().strip())
        return _error("The autograder failed on your submission: the grader itself, not your code. Your instructor "
                      "can see why.", record, visibility), log
    data["extra_data"] = {**data.get("extra_data", {}), "attnkit": record}
    if why is not None:
        data["tests"].append({"name": ISOLATION, "score": 0, "max_score": 0, "status": "passed",
                              "output": log[0] + "\n" + log[1], "visibility": "hidden"})
    return data, log


@contextlib.contextmanager
def _references_kept_from_view(fallback: bool, log: list[str]):
    """In the process sandbox as root without private mounts, the kit's files are in the submission's view: its
    reference solutions are made unreadable to every uid but root's (mode 0700: the workers run under another uid,
    the grader reads them as root) while the grading runs, and given their mode back after."""
    import os
    import stat

    from .. import REFERENCE_DIR
    from ..extensions import solution_dirs
    from ..run.sandbox import mounts_allowed

    if not fallback or os.geteuid() != 0 or mounts_allowed():
        yield
        return
    kept = []
    try:
        for folder in {Path(REFERENCE_DIR), *map(Path, solution_dirs())}:
            if folder.is_dir():
                kept.append((folder, stat.S_IMODE(folder.stat().st_mode)))
                folder.chmod(0o700)
        log.append("attnkit: the reference solutions were made unreadable to the submission's uid while it was graded")
        yield
    finally:
        for folder, mode in kept:
            folder.chmod(mode)


def _grade(folder: Path, jailed: bool, visibility: str | None) -> dict:
    from ..grading import grade
    from ..run.inbox import one_line
    from ..run.submission import open_submission
    from .gradescope import bounded, results

    try:
        impl, unpacked = open_submission(folder, label="your submission")
    except BadInput as exc:
        files = ", ".join(f"{pid}.py" for pid in ORDER)
        return {"score": 0, "output": bounded(f"{one_line(exc, 600)}. Upload the problem files ({files})."),
                "tests": [], **({"visibility": visibility} if visibility else {})}
    try:
        return results(grade(impl, sandbox=jailed), visibility)
    finally:
        if unpacked:
            unpacked.cleanup()


def _error(text: str, record: dict, visibility: str | None) -> dict:
    """An autograder error as results.json: no points, one sentence for the student, the record for the instructor."""
    return {"score": 0, "output": text, "tests": [], "stdout_visibility": "hidden", "extra_data": {"attnkit": record},
            **({"visibility": visibility} if visibility else {})}


def run(root) -> int:
    """Grade root/submission and write root/results/results.json, whatever happens: a broken submission still gets
    results, and so does a machine where bubblewrap cannot run (gradescope_run.py)."""
    from .gradescope import settings

    root = Path(root)
    out = root / "results" / "results.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    chosen = settings()
    data, log = grade_submission(root / "submission", chosen.get("sandbox", "auto"), chosen.get("visibility"))
    out.write_text(json.dumps(data, indent=2) + "\n")
    print("\n".join(log))  # run_autograder's stdout: Gradescope shows it to the instructor only
    print(data["output"])
    return 0
