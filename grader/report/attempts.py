"""The candidate's attempt log (submission/attempts.jsonl, appended by the bundle's public checks at every run):
read as untrusted data, shown in the interviewer's report as a timeline.

The log is self-reported by the candidate's machine: they can edit or delete it. Only lines of the exact form the
bundle writes are kept: a UTC time and the ids of known public checks; anything else is counted and left out.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

NAME = "attempts.jsonl"
MAX_BYTES = 1 << 20  # read at most this much of the log
MAX_RUNS = 5000
SHOWN = 40  # runs listed one by one in the report
TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def read(impl: Path, known: dict[str, str]) -> dict | None:
    """{"runs": [(time, passed ids, failed ids)], "ignored": n} from `impl`/attempts.jsonl, or None where there is
    no log. `known`: public check id -> problem id; other ids are dropped."""
    path = Path(impl) / NAME
    if path.is_symlink() or not path.is_file():
        return None
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError:
        return None
    lines = data[:MAX_BYTES].decode("utf-8", "replace").splitlines()
    runs, ignored = [], int(len(data) > MAX_BYTES)
    for line in lines[:MAX_RUNS]:
        entry = _entry(line, known)
        if entry is None:
            ignored += 1
        else:
            runs.append(entry)
    ignored += max(0, len(lines) - MAX_RUNS)
    return {"runs": runs, "ignored": ignored}


def _entry(line: str, known: dict) -> tuple | None:
    try:
        item = json.loads(line)
    except ValueError:
        return None
    if not isinstance(item, dict) or not isinstance(item.get("time"), str) or not TIME.fullmatch(item["time"]):
        return None
    ids = [item.get(k) for k in ("passed", "failed")]
    if not all(isinstance(v, list) and all(isinstance(x, str) for x in v) for v in ids):
        return None
    passed, failed = ({x for x in v if x in known} for v in ids)
    return item["time"], sorted(passed), sorted(failed - passed)


def timeline(log: dict | None, known: dict[str, str]) -> list[str]:
    """Markdown lines: the caveat, first and last run, when each problem first passed, then the runs."""
    lines = ["## Attempt log (self-reported)", ""]
    if log is None:
        return lines + ["No attempt log came with the submission (submission/attempts.jsonl): the public checks were "
                        "never run in the bundle's folder, or the log was removed.", ""]
    runs = log["runs"]
    lines += ["Written by the bundle's public checks on the candidate's machine at each run and sent back with the "
              "submission: the candidate could edit or delete it, so read it as their account, not as proof.", ""]
    if log["ignored"]:
        lines += [f"{log['ignored']} line(s) of the log were not in the form the bundle writes and are left out.", ""]
    if not runs:
        return lines + ["No run recorded.", ""]
    lines += [f"- Runs: {len(runs)}, the first at {runs[0][0]}, the last at {runs[-1][0]} (UTC)."]
    problems = list(dict.fromkeys(known.values()))
    for pid in problems:
        cases = {c for c, p in known.items() if p == pid}
        first = next((t for t, passed, _ in runs if cases <= set(passed)), None)
        lines.append(f"- `{pid}`: " + (f"its public checks first all passed at {first}" if first else
                                        "its public checks never all passed"))
    lines += ["", "| run | time (UTC) | public checks passed |", "|---|---|---|"]
    shown = runs if len(runs) <= SHOWN else runs[:SHOWN // 2] + [None] + runs[-SHOWN // 2:]
    for i, run in enumerate(shown):
        if run is None:
            lines.append(f"| ... | {len(runs) - SHOWN} more | |")
            continue
        n = i + 1 if i < SHOWN // 2 or len(runs) <= SHOWN else len(runs) - (len(shown) - 1 - i)
        lines.append(f"| {n} | {run[0]} | {len(run[1])} of {len(run[1]) + len(run[2])} |")
    return lines + [""]
