"""Full grading time as a ratio to the floor of `python -c "import torch"` plus `python -m pytest --version`.

The floor and the grading are measured in the same run, interleaved, and the medians are
compared, so the ratio holds on any machine. Where bubblewrap works, grading inside it is
measured too, and reported against grading without it ($ATTNKIT_SANDBOX=off). The grading commands read the
expected values from the store a first, untimed run fills (judge/stored.py; a temporary one, where the workers cannot
reach it: as root or in bwrap); "grade, no store" computes them every run. Targets: at most 1.5x with the first four problems
(issue 2), at most 2x with all eight (issue 6), and still at most 2x with all thirteen (issue 14).

    python benchmarks/grade_speed.py [--repeat 7] [--impl solutions] [--against REV] [--no-bwrap] [--env this|learner]

--env learner measures in a learner's environment: a virtual environment that holds attnkit's own requirements only
(torch, NumPy, pytest and what they need, hard-linked from this one), as the README's learner command installs, so
that the development extras' pytest plugins (Hypothesis, anyio) are not counted; the floor is measured there too.

--against REV also grades with the kit as it was at git revision REV (checked out into a temporary worktree and
imported from there), interleaved with the rest, and reports each grading command's ratio to REV's: a change
must not make grading slower.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GRADING = ("attnkit grade", "pytest --impl", "grade in bwrap", "pytest in bwrap", "grade, no store")  # also REV's


def learner_os_environ() -> dict:
    """This environment as a learner's machine has it: Python writes its bytecode cache. A container's
    PYTHONDONTWRITEBYTECODE (the kit's development machine sets it) would make every run compile the kit's modules
    again, in the grader and in the workers' server, while torch's, compiled by pip at install, are read from their
    cache: the floor and the grading are measured alike, with the cache."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(cmd: list[str], cwd: Path, sandbox: str | None, path: str | None = None, extra: dict | None = None) -> float:
    env = {**learner_os_environ(), **({"ATTNKIT_SANDBOX": sandbox} if sandbox else {}), **({"PYTHONPATH": path} if path else {}),
           "ATTNKIT_SKIP_STAGES": "kernels", **(extra or {})}  # the kernels stage: Triton's interpreter, 10 s of its own
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - start


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--impl", default="solutions")
    ap.add_argument("--against", metavar="REV", help="also time the kit at this git revision, and compare")
    ap.add_argument("--no-bwrap", action="store_true", help="leave out the runs inside bubblewrap (half the time)")
    ap.add_argument("--env", choices=("this", "learner"), default="this",
                    help="this environment, or one with attnkit's requirements only (the README's learner install)")
    args = ap.parse_args(argv)
    py = sys.executable
    sys.path.insert(0, str(ROOT))
    from attnkit.run.jail import unusable

    bwrap = unusable() is None and not args.no_bwrap
    with tempfile.TemporaryDirectory() as tmp:
        if args.env == "learner":
            from learner_env import make

            os.chmod(tmp, 0o711)  # a worker runs as a uid of its own (as root): the interpreter must be reachable
            py = make(Path(tmp) / "learner")
        empty = Path(tmp) / "empty"  # a folder of its own: --against checks REV out into tmp/rev, whose tests
        empty.mkdir()  # pytest would otherwise collect (and run) as "one test"
        (empty / "test_empty.py").write_text("def test_nothing():\n    pass\n")
        impl = str((ROOT / args.impl).resolve())
        grade = [py, "-m", "attnkit.fronts.cli", "grade", "--impl", impl]
        commands = {
            "import torch": ([py, "-c", "import torch"], None),
            "pytest --version": ([py, "-m", "pytest", "--version"], None),
            "pytest, one test": ([py, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(empty)], None),  # plugins load
            "attnkit grade": (grade, "off"),
            "pytest --impl": ([py, "-m", "pytest", "-q", "--attnkit-impl", args.impl], "off"),
            "grade, no store": (grade, "off", {"ATTNKIT_CACHE": "off"}),  # the expected values computed every run
        }
        if bwrap:
            commands["grade in bwrap"] = (grade, "bwrap")
            commands["pytest in bwrap"] = ([py, "-m", "pytest", "-q", "--attnkit-impl", args.impl], "bwrap")
        os.environ["ATTNKIT_CACHE"] = str(Path(tmp) / "store")  # the store of expected values: filled by a first run
        subprocess.run(grade, cwd=ROOT, check=False, capture_output=True,  # (and the kit's bytecode cache written)
                       env={**learner_os_environ(), "ATTNKIT_SANDBOX": "bwrap" if bwrap else "off", "ATTNKIT_SKIP_STAGES": "kernels"})
        old = _checkout(args.against, Path(tmp)) if args.against else None
        if old:  # the same commands with the kit imported from REV's checkout, and a store of REV's own (a store
            rev_store = {"ATTNKIT_CACHE": str(Path(tmp) / "store-rev")}  # keeps one kit's values: two would evict)
            for name in [n for n in commands if n in GRADING]:
                cmd, sandbox, *extra = commands[name]
                commands[f"{name} @{args.against}"] = (cmd, sandbox, {**rev_store, **(extra[0] if extra else {})})
            subprocess.run(grade, cwd=ROOT, check=False, capture_output=True,  # REV's store filled, untimed
                           env={**learner_os_environ(), "ATTNKIT_SANDBOX": "bwrap" if bwrap else "off", "PYTHONPATH": old,
                                "ATTNKIT_SKIP_STAGES": "kernels", **rev_store})
        times = {name: [] for name in commands}
        try:
            for _ in range(args.repeat):
                for name, (cmd, sandbox, *extra) in commands.items():
                    times[name].append(timed(cmd, ROOT, sandbox, old if "@" in name else None, *extra))
        finally:
            if old:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(Path(tmp) / "rev")],
                               check=False, capture_output=True)
    med = {name: statistics.median(t) for name, t in times.items()}
    floor = med["import torch"] + med["pytest --version"]
    for name, t in med.items():
        print(f"{name:<18} median {t:6.2f} s")
    print(f"{'floor':<18} median {floor:6.2f} s  (import torch + pytest --version; {args.env} environment)")
    for name in GRADING:
        if name in med:
            print(f"ratio {name:<15} {med[name] / floor:5.2f}x the floor (target <= 2x)")
    for name in [n for n in med if "@" in n]:
        now = name.split(" @")[0]
        print(f"{now:<18} {med[now] / med[name]:5.2f}x its time at {args.against} (at most 1.00x: no slower)")
    if bwrap:
        print(f"bubblewrap costs {med['grade in bwrap'] / med['attnkit grade']:5.2f}x the grading without it")
    else:
        print(f"bubblewrap not measured: {'--no-bwrap' if args.no_bwrap else unusable()}")
    return 0


def _checkout(rev: str, tmp: Path) -> str:
    """REV checked out into tmp/rev, importable as `attnkit` from tmp/path: the PYTHONPATH to grade with it."""
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tmp / "rev"), rev], check=True,
                   capture_output=True)
    (tmp / "path").mkdir()
    (tmp / "path" / "attnkit").symlink_to(tmp / "rev" / "grader")
    return str(tmp / "path")


if __name__ == "__main__":
    sys.exit(main())
