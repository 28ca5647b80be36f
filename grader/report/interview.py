"""The interviewer's report, in Markdown or as one HTML page (doc.py renders both from the same blocks): scores,
a summary by concept, checks, recognised mistakes, the interview's clock, the attempt log, the candidate's code and
how to reproduce the grading."""
from __future__ import annotations

import platform
import shlex
import subprocess
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from .. import ROOT
from ..run.inbox import clean, one_line
from ..run.sandbox import isolation
from .attempts import Clock, clock_section, timeline
from .concepts import summary
from .doc import Bullets, Code, Fence, Heading, Para, Strong, Table, code, fenced, markdown as render_md, page

__all__ = ["Extras", "code", "fenced", "markdown", "html", "sources", "write"]
TITLE = "attnkit grading report"
MAX_FILE = 20_000  # characters of each of the candidate's files shown
MAX_CODE = 100_000  # in all


@dataclass
class Extras:
    """What the report shows beyond the grading, read from the submission before its folder goes: the attempt log
    ((log, public check id -> problem id), report/attempts.py), the candidate's files (`sources`), the clock."""

    attempts: tuple | None = None
    code: list | None = None
    clock: Clock | None = None
    scope: str | None = None  # where the graded problems came from (fronts/scoped.py), for a bundle's submission


def _kit_version() -> str:
    try:
        rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        rev = ""
    from importlib.metadata import PackageNotFoundError, version

    try:
        v = version("attnkit")
    except PackageNotFoundError:
        v = "source"
    return f"{v}" + (f" (commit {rev})" if rev else "")


def sources(impl: Path, problem_ids: list[str]) -> list[tuple[str, str | None, str]]:
    """(problem id, the text of a file or None, a note) for each problem's file and then each other file of the
    submission that importing it runs (a helper module: graded as well, so shown as well; a problem's own file is shown
    under its problem), each once: read as hostile data (no link followed, control characters dropped, at most MAX_FILE
    characters each and MAX_CODE in all)."""
    from ..judge.scan.files import helpers

    out, left, shown = [], MAX_CODE, set()
    for pid in problem_ids:
        more = [f for f in helpers(impl, pid) if f not in shown]
        shown.update(more)
        for name in [f"{pid}.py", *more]:
            text, note = _read(Path(impl) / name, name, left)
            left -= min(len(text), MAX_FILE) if text is not None else 0
            if name != f"{pid}.py":  # a helper: named, and said whose it is
                note = (note if text is not None else f"{one_line(name, 200)}: {note}") + f", imported by {pid}.py"
            out.append((pid, text, note))
    return out


def _read(path: Path, name: str, left: int) -> tuple[str | None, str]:
    """(the file's text, cleaned and cut, or None; the note shown with it)."""
    if left <= 0:
        return None, f"not shown: the report holds at most {MAX_CODE:,} characters of code"
    if path.is_symlink() or (path.exists() and not path.is_file()):
        return None, "not a plain file: not shown"
    try:
        with open(path, "rb") as f:
            data = f.read(min(MAX_FILE, left) * 4 + 1)
    except OSError:
        return None, "no file"
    text = data.decode("utf-8", "replace")
    shown = clean(text, min(MAX_FILE, left))
    return shown, one_line(name, 200) + (" (cut)" if len(shown) < len(text) else "")


def blocks(report, submission: str, argv: list[str], extras: Extras | None = None) -> list:
    """The report as doc.py's blocks."""
    import torch

    extras = extras or Extras()
    now = datetime.now(timezone.utc)
    seed = [f"Isolation: {isolation(report.sandbox)}; hidden inputs seed {report.seed}"]
    if report.variant:
        seed += [" (variant ", Code(report.variant), ")"]
    out = [Bullets([
        ["Submission: ", Code(submission)],
        *([["Scope: ", extras.scope]] if extras.scope else []),
        ["Score: ", Strong(f"{report.score:g} / {report.max_score:g}")],
        f"Graded: {now.strftime('%Y-%m-%d %H:%M UTC')} with attnkit {_kit_version()}, Python "
        f"{platform.python_version()}, torch {torch.__version__}, "
        f"{'CUDA' if report.devices.get('cuda') else 'CPU only (CUDA checks skipped, not counted)'}",
        seed]),
        Table(["problem", "status", "score"], [[Code(p.id), p.status.replace("_", " "), f"{p.score:g} / {p.max_score:g}"]
                                              for p in report.problems]),
        *summary(report), Heading("Recognised mistakes", "mistakes")]
    seen = {}
    for p in report.problems:
        for c in p.checks:
            if c.mistake:
                seen.setdefault((p.id, c.mistake), []).append(c.id)
    if seen:
        out.append(Bullets([[Code(pid), ": ", Strong(mid), f" (checks: {', '.join(cids)})"]
                            for (pid, mid), cids in seen.items()]))
    else:
        out.append(Para("None recognised." if any(p.status == "failed" for p in report.problems) else
                        "None: nothing failed."))
    for p in report.problems:
        out += _problem(p)
    out += clock_section(extras.clock, extras.attempts[0] if extras.attempts else None,
                         extras.attempts[1] if extras.attempts else {}, now)
    if extras.attempts:
        out += timeline(*extras.attempts, extras.clock)
    if extras.code is not None:
        out += [Heading("The candidate's code", "code"),
                Para("Each problem's file as it came back (the candidate's text, shown as it is, never run here):")]
        count: dict = {}
        for pid, text, note in extras.code:  # a problem's file, then the helpers it imports: anchors kept apart
            count[pid] = count.get(pid, 0) + 1
            anchor = f"code-{pid}" + (f"-{count[pid]}" if count[pid] > 1 else "")
            out += [Heading([Code(pid), f": {note}"], anchor, 3)] + ([Fence(text, "python")] if text else [])
    argv = argv if "--seed" in argv or "--variant" in argv else [*argv, "--seed", str(report.seed)]
    command = clean(" ".join(shlex.quote(a) for a in ["attnkit", *argv]), 2000)  # the path may be the candidate's name
    return out + [Heading("Reproduce", "reproduce"), Para("The hidden inputs are seeded, so this gives the same result:"),
                  Fence(command)]


def _problem(p) -> list:
    out = [Heading([Code(p.id), f": {p.score:g} / {p.max_score:g}"], f"problem-{p.id}"),
           Table(["check", "result", "points"],
                 [[c.id, c.status, "-" if c.status == "skipped" else f"{c.score:g} / {c.max_score:g}"]
                  for c in p.checks])]
    if p.uses:  # read from the source, for the interviewer to judge (judge/scan/)
        out += [Para("What the code uses that the grader watches for (read from its source):"),
                Bullets([[Code(u.file), f" line {u.line}: {u.what}{' (refused by this contract)' if u.refused else ''}"]
                         for u in p.uses])]
    failed = [c for c in p.checks if c.status in ("failed", "error")]
    if p.status == "not_started" and failed:
        return out + [Para("Not started:"), Fence(failed[0].message.removeprefix("not started: "))]
    if p.departure:
        out += [Para("Where the computation departs (traced):"), Fence("\n".join(p.departure))]
    from .feedback import block, groups

    for mistake, checks in groups(p):
        if mistake is not None:
            out += [Para([Strong(mistake), f" explains {', '.join(c.id for c in checks)}:"]), Fence(block(p.id, mistake))]
        elif p.unexplained:
            out += [Para(f"No catalogued mistake explains {', '.join(c.id for c in checks)}:"),
                    Fence("\n".join(p.unexplained))]
        for c in checks:
            out += [Para(Strong(c.id)), Fence(c.message)]
    return out


def markdown(report, submission: str, argv: list[str], extras: Extras | None = None) -> str:
    return render_md(TITLE, blocks(report, submission, argv, extras))


def html(report, submission: str, argv: list[str], extras: Extras | None = None) -> str:
    return page(TITLE, blocks(report, submission, argv, extras))


def write(report, path: Path, submission: str, argv: list[str], extras: Extras | None = None) -> None:
    """The report at `path`: an HTML page where it ends in .html or .htm, else Markdown."""
    from ..files import atomic_write

    render = html if Path(path).suffix.lower() in (".html", ".htm") else markdown
    atomic_write(path, render(report, submission, argv, extras))
