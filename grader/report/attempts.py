"""The candidate's attempt log (submission/attempts.jsonl, appended by the bundle's public checks at every run):
read as untrusted data, shown in the interviewer's report as a timeline.

The log is self-reported by the candidate's machine: they can edit or delete it. Only lines of the exact form the
bundle writes are kept: a UTC time and the ids of known public checks; anything else is counted and left out.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from .doc import Bullets, Code, Heading, Para, Table

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


@dataclass(frozen=True)
class Clock:
    """A timed interview's clock, from the interviewer's record: the start (the interviewer's machine) and the limit."""

    started: datetime
    minutes: int | None = None

    @property
    def deadline(self) -> datetime | None:
        return self.started + timedelta(minutes=self.minutes) if self.minutes else None

    def at(self, time: str) -> str:
        """'+12 min' (after the start), and ', after time ran out' where it is past the limit."""
        try:
            t = datetime.strptime(time, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
        except ValueError:  # the log's form, but no real time (month 13): the candidate's data
            return "not a real time"
        late = self.deadline is not None and t > self.deadline
        return f"{(t - self.started).total_seconds() / 60:+.0f} min" + (", after time ran out" if late else "")


def clock_section(clock: Clock | None, log: dict | None, known: dict[str, str], now: datetime) -> list:
    """The report's Time section: the interviewer's clock (start, limit, grading), then what the candidate's machine
    claims happened after time ran out."""
    if clock is None:
        return []
    fmt = "%Y-%m-%d %H:%M UTC"
    items = [f"Started: {clock.started.strftime(fmt)} (the interviewer's machine, when the bundle was made; the "
             "candidate cannot change it)"]
    if clock.deadline:
        items.append(f"Time limit: {clock.minutes} min, ran out at {clock.deadline.strftime(fmt)}")
    items.append(f"Graded: {now.strftime(fmt)}, {(now - clock.started).total_seconds() / 60:.0f} min after the start "
                 "(this machine's clock: an upper bound on the time the candidate had)")
    runs = (log or {}).get("runs") or []
    if runs:
        items.append(f"Last run of the public checks: {runs[-1][0]} ({clock.at(runs[-1][0])}; as the candidate's "
                     "machine claims)")
    blocks = [Heading("Time", "time"), Bullets(items)]
    if clock.deadline:
        late = [r for r in runs if "after time" in clock.at(r[0])]
        firsts = _firsts(runs, known)
        after = [Code(pid) for pid, t in firsts.items() if t and "after time" in clock.at(t)]
        if not runs:
            text = "Nothing is known of what was done after time ran out: no attempt log came back."
        elif not late:
            text = "After time ran out (as the candidate's machine claims): no run of the public checks."
        else:
            text = [f"After time ran out (as the candidate's machine claims): {len(late)} run(s) of the public checks"
                    + ("; first passed then: " if after else "; no problem first passed then."),
                    *[x for i, c in enumerate(after) for x in ([", "] if i else []) + [c]]]
        blocks.append(Para(text))
    return blocks


def _firsts(runs: list, known: dict[str, str]) -> dict[str, str | None]:
    """Problem id -> the time its public checks first all passed (None: never)."""
    out = {}
    for pid in dict.fromkeys(known.values()):
        cases = {c for c, p in known.items() if p == pid}
        out[pid] = next((t for t, passed, _ in runs if cases <= set(passed)), None)
    return out


def timeline(log: dict | None, known: dict[str, str], clock: Clock | None = None) -> list:
    """The report's blocks (doc.py): the caveat, first and last run, when each problem first passed (minutes after
    the interview's start, where a clock is known), then the runs."""
    blocks = [Heading("Attempt log (self-reported)", "attempts")]
    if log is None:
        return blocks + [Para("No attempt log came with the submission (submission/attempts.jsonl): the public checks "
                              "were never run in the bundle's folder, or the log was removed.")]
    runs = log["runs"]
    blocks.append(Para("Written by the bundle's public checks on the candidate's machine at each run and sent back "
                       "with the submission: the candidate could edit or delete it, so read it as their account, not "
                       "as proof."))
    if log["ignored"]:
        blocks.append(Para(f"{log['ignored']} line(s) of the log were not in the form the bundle writes and are left "
                           "out."))
    if not runs:
        return blocks + [Para("No run recorded.")]
    items = [f"Runs: {len(runs)}, the first at {runs[0][0]}, the last at {runs[-1][0]} (UTC)."]
    for pid, first in _firsts(runs, known).items():
        when = f" ({clock.at(first)})" if clock and first else ""
        items.append([Code(pid), f": its public checks first all passed at {first}{when}" if first else
                      ": its public checks never all passed"])
    rows = []
    shown = runs if len(runs) <= SHOWN else runs[:SHOWN // 2] + [None] + runs[-SHOWN // 2:]
    for i, run in enumerate(shown):
        if run is None:
            rows.append(["...", f"{len(runs) - SHOWN} more", ""])
            continue
        n = i + 1 if i < SHOWN // 2 or len(runs) <= SHOWN else len(runs) - (len(shown) - 1 - i)
        rows.append([str(n), run[0], f"{len(run[1])} of {len(run[1]) + len(run[2])}"])
    return blocks + [Bullets(items), Table(["run", "time (UTC)", "public checks passed"], rows)]
