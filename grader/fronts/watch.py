"""attnkit watch: re-grade the problem you are editing every time you save, with torch kept loaded.

The implementation directory is polled (a stat of a handful of files every `poll` seconds:
no extra dependency, and the latency stays far below the grading time). The first save of
a problem's file re-grades that problem; saving another module re-grades the last one.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

from . import state
from ..grading import grade
from ..judge.expected import References
from ..results import Report
from ..problems import ORDER, get
from ..report.summary import failures, progress, table
from ..report.term import fancy

CLEAR = "\033[2J\033[H"


def _files(impl: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for p in impl.glob("*.py"):
        try:
            st = p.stat()
        except OSError:
            continue
        out[p.name] = (st.st_mtime_ns, st.st_size)
    return out


def _hint_line(pid: str) -> str:
    level, total = state.peek()["hints"].get(pid, 0), len(get(pid).hints)
    if level >= total:
        return f"all {total} hints of {pid} shown; `attnkit solution {pid}` once it passes"
    return f"next hint: `attnkit hint {pid}` ({level + 1}/{total})"


def cmd_watch(args) -> int:
    impl, colour, out = Path(args.impl), fancy(), sys.stdout
    references = References()  # the reference's values, computed once for every re-grade
    first = grade(impl, references=references)
    results = {p.id: p for p in first.problems}
    seen = _files(impl)
    current = next((p.id for p in first.problems if p.status != "passed"), ORDER[0])
    print(table(first, colour=colour, checks=False))
    print(progress(first, colour=colour))
    print(f"watching {impl} for saves (Ctrl-C stops); working on {current}", flush=True)
    regrades = 0
    while args.max_regrades is None or regrades < args.max_regrades:
        time.sleep(args.poll)
        now = _files(impl)
        changed = sorted((n for n in now if now[n] != seen.get(n)), key=lambda n: now[n][0])
        seen = now
        if not changed:
            continue
        stem = Path(changed[-1]).stem
        current = stem if stem in ORDER else current
        saved_at = now[changed[-1]][0] / 1e9
        report = grade(impl, [current], references=references)
        results[current] = report.problems[0]
        whole = Report(report.impl, report.seed, sum(p.score for p in results.values()),
                       sum(p.max_score for p in results.values()), report.devices, list(results.values()))
        text = [table(report, colour=colour)]
        details = failures(report)
        if details:
            text.append("What to fix:\n" + details)
        text += [_hint_line(current), progress(whole, colour=colour),
                 f"re-graded {current} {time.time() - saved_at:.2f} s after the save"]
        out.write((CLEAR if colour else "") + "\n".join(text) + "\n")
        out.flush()
        regrades += 1
    return 0
