"""attnkit watch: re-grade the problem you are editing every time you save, with torch kept loaded.

The implementation directory is polled (a stat of a handful of files every `poll` seconds:
no extra dependency, and the latency stays far below the grading time). The first save of
a problem's file re-grades that problem; saving another module re-grades the last one.

Each grading redraws one screen (on a terminal: cleared, then drawn from the top): the track's table, one line
per problem; below it, the problem being edited: a syntax error as such (read by the grader's own compile, never
run), a stub as not started, else its checks and what to fix, each mistake said once; then the next step (after a
pass, the next problem to solve). Piped, the screens follow one another, separated by a rule.
"""
from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

from . import state
from ..grading import grade
from ..judge.expected import References
from ..model.stubs import is_untouched_stub
from ..problems import ORDER, get
from ..report.feedback import problem_text
from ..report.summary import check_lines, progress, table
from ..report.term import fancy
from ..results import Report
from ..run.inbox import one_line

CLEAR = "\033[2J\033[H"  # erase the screen, cursor to the top left


def _settled(impl: Path, now: dict, poll: float) -> dict:
    """The files' stats once two polls in a row agree: a save is graded as written, not as seen mid-write (a file
    truncated, then filled), which the screen's label, read later, would contradict."""
    while True:
        time.sleep(poll)
        again = _files(impl)
        if again == now:
            return now
        now = again


def _files(impl: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for p in impl.glob("*.py"):
        try:
            st = p.stat()
        except OSError:
            continue
        out[p.name] = (st.st_mtime_ns, st.st_size)
    return out


def syntax_error(path: Path) -> str | None:
    """The file's syntax error in the grader's words (compiled here, never run), or None."""
    try:
        source = path.read_text(errors="replace")
    except OSError:
        return None
    try:
        compile(source, path.name, "exec", dont_inherit=True)
    except SyntaxError as exc:
        line = (exc.text or "").rstrip("\n")
        lead = len(line) - len(line.lstrip())  # one_line strips it: the caret moves with the text
        caret = " " * max((exc.offset or 1) - 1 - lead, 0)
        shown = [f"    {one_line(line, 200)}", f"    {caret}^"] if line.strip() else []
        return "\n".join([f"syntax error in {path.name}, line {exc.lineno}: {one_line(exc.msg, 200)}", *shown])
    except ValueError as exc:  # a null byte
        return f"{path.name} cannot be compiled: {one_line(exc, 200)}"
    return None


def next_problem(results: dict, after: str) -> str | None:
    """The next problem to solve: the first not passed after `after` in track order, else the first not passed."""
    order = [pid for pid in ORDER if pid in results]
    rest = order[order.index(after) + 1:] + order if after in order else order
    return next((pid for pid in rest if results[pid].status != "passed"), None)


def _next_line(pid: str, results: dict) -> str:
    if results[pid].status == "passed":
        upcoming = next_problem(results, pid)
        if upcoming is None:
            return f"{pid} passes, and so does every problem: `attnkit list` shows the track."
        return (f"{pid} passes. Next: {upcoming} (open {upcoming}.py and save; `attnkit solution {pid}` shows "
                f"the reference)")
    level, total = state.peek()["hints"].get(pid, 0), len(get(pid).hints)
    if level >= total:
        return f"all {total} hints of {pid} shown (`attnkit hint {pid} --level N` shows one again)"
    return f"next hint: `attnkit hint {pid}` ({level + 1}/{total})"


def _current(impl: Path, result, colour: bool) -> list[str]:
    """The problem being edited: its state, then what to fix."""
    pid = result.id
    broken = syntax_error(impl / f"{pid}.py")
    if broken:
        return [f"{pid}: syntax error (not graded until it compiles)", broken]
    if result.status == "not_started":
        path = impl / f"{pid}.py"
        stub = path.is_file() and is_untouched_stub(path.read_text(errors="replace"))
        why = result.checks[0].message.removeprefix("not started: ") if result.checks else ""
        return [f"{pid}: {'not started: still the stub, fill it in' if stub else 'not started'}",
                *([] if stub else [f"    {why}"])]
    lines = [f"{pid}: {result.status} ({result.score:g}/{result.max_score:g} points)", *check_lines(result, colour=colour)]
    details = problem_text(result)
    return lines + (["What to fix:", details] if details else [])


def screen(whole: Report, current: str, impl: Path, colour: bool, rows: int, footer: list[str]) -> str:
    """One screen: the table at the top, the problem being edited below, cut to `rows` lines."""
    results = {p.id: p for p in whole.problems}
    labels = {current: "syntax error"} if syntax_error(impl / f"{current}.py") else None
    top = "\n".join([table(whole, colour=colour, checks=False, labels=labels),
                     progress(whole, colour=colour)]).splitlines() + [""]
    below = "\n".join(_current(impl, results[current], colour)).splitlines()
    room = max(rows - len(top) - len(footer) - 1, 2)  # the last row is kept for what to do next
    if len(below) > room:
        below = below[: room - 1] + [f"... ({len(below) - room + 1} more lines: `pytest -k {current}` shows them all)"]
    return "\n".join(top + below + [_next_line(current, results)] + footer)


def cmd_watch(args) -> int:
    impl, colour, out = Path(args.impl), fancy(), sys.stdout
    clear = out.isatty()  # a terminal redraws one screen; a pipe gets the screens one after another
    references = References()  # the reference's values, computed once for every re-grade
    first = grade(impl, references=references)
    results = {p.id: p for p in first.problems}
    seen = _files(impl)
    current = next((p.id for p in first.problems if p.status != "passed"), ORDER[0])

    def draw(footer: list[str]) -> None:
        whole = Report(first.impl, first.seed, sum(p.score for p in results.values()),
                       sum(p.max_score for p in results.values()), first.devices, list(results.values()))
        rows = shutil.get_terminal_size((88, 40)).lines if clear else 10_000
        text = screen(whole, current, impl, colour, rows, footer)
        out.write((CLEAR if clear else ("-" * 88 + "\n" if drawn else "")) + text + "\n")
        out.flush()

    drawn = False
    draw([f"watching {impl} for saves (Ctrl-C stops); working on {current}"])
    drawn = True
    regrades = 0
    while args.max_regrades is None or regrades < args.max_regrades:
        time.sleep(args.poll)
        now = _files(impl)
        if now == seen:
            continue
        now = _settled(impl, now, args.poll)  # an editor's save seen half-written would be graded as it was then
        changed = sorted((n for n in now if now[n] != seen.get(n)), key=lambda n: now[n][0])
        seen = now
        if not changed:
            continue
        stem = Path(changed[-1]).stem
        current = stem if stem in ORDER else current
        saved_at = now[changed[-1]][0] / 1e9
        results[current] = grade(impl, [current], references=references).problems[0]
        draw([f"re-graded {current} {time.time() - saved_at:.2f} s after the save",
              f"watching {impl} for saves (Ctrl-C stops)"])
        regrades += 1
    return 0
