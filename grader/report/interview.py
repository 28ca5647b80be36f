"""The interviewer's report (markdown): scores, checks, recognised mistakes, how to reproduce."""
from __future__ import annotations

import platform
import shlex
import subprocess
from datetime import datetime, timezone
from pathlib import Path

from .. import ROOT
from ..run.inbox import clean, one_line
from ..run.sandbox import isolation


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


def markdown(report, submission: str, argv: list[str], attempts: list[str] | None = None) -> str:
    """The report; `attempts`: the attempt log's section (report/attempts.py), for a candidate's bundle."""
    import torch

    lines = [
        "# attnkit grading report", "",
        f"- Submission: {code(submission)}",
        f"- Score: **{report.score:g} / {report.max_score:g}**",
        f"- Graded: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')} with attnkit {_kit_version()}, "
        f"Python {platform.python_version()}, torch {torch.__version__}, "
        f"{'CUDA' if report.devices.get('cuda') else 'CPU only (CUDA checks skipped, not counted)'}",
        f"- Isolation: {isolation(report.sandbox)}; hidden inputs seed {report.seed}"
        + (f" (variant {code(report.variant)})" if report.variant else ""), "",
        "| problem | status | score |", "|---|---|---|",
    ]
    lines += [f"| `{p.id}` | {p.status.replace('_', ' ')} | {p.score:g} / {p.max_score:g} |" for p in report.problems]
    mistakes = [(p.id, c.id, c.mistake) for p in report.problems for c in p.checks if c.mistake]
    lines += ["", "## Recognised mistakes", ""]
    if mistakes:
        seen = {}
        for pid, cid, mid in mistakes:
            seen.setdefault((pid, mid), []).append(cid)
        lines += [f"- `{pid}`: **{mid}** (checks: {', '.join(cids)})" for (pid, mid), cids in seen.items()]
    else:
        lines.append("None recognised." if any(p.status == "failed" for p in report.problems) else "None: nothing failed.")
    for p in report.problems:
        lines += ["", f"## `{p.id}`: {p.score:g} / {p.max_score:g}", "", "| check | result | points |", "|---|---|---|"]
        lines += [f"| {c.id} | {c.status} | {'-' if c.status == 'skipped' else f'{c.score:g} / {c.max_score:g}'} |"
                  for c in p.checks]
        if p.uses:  # read from the source, for the interviewer to judge (judge/scan/)
            lines += ["", "What the code uses that the grader watches for (read from its source):", ""]
            lines += [f"- {code(u.file)} line {u.line}: {u.what}{' (refused by this contract)' if u.refused else ''}"
                      for u in p.uses]
        failed = [c for c in p.checks if c.status in ("failed", "error")]
        if p.status == "not_started" and failed:
            lines += ["", "Not started:", "", *fenced(failed[0].message.removeprefix("not started: "))]
        else:
            lines += _feedback(p)
    lines += ["", *attempts] if attempts else []
    argv = argv if "--seed" in argv or "--variant" in argv else [*argv, "--seed", str(report.seed)]
    command = clean(" ".join(shlex.quote(a) for a in ["attnkit", *argv]), 2000)  # the path may be the candidate's name
    lines += ["", "## Reproduce", "", "The hidden inputs are seeded, so this gives the same result:", "",
              *fenced(command), ""]
    return "\n".join(lines)


def _feedback(problem) -> list[str]:
    """The failing checks, grouped under the mistake that explains them: each mistake's block once (feedback.py)."""
    from .feedback import block, groups

    lines = []
    for mistake, checks in groups(problem):
        if mistake is not None:
            lines += ["", f"**{mistake}** explains {', '.join(c.id for c in checks)}:", "",
                      *fenced(block(problem.id, mistake))]
        for c in checks:
            lines += ["", f"**{c.id}**", "", *fenced(c.message)]
    return lines


def code(text: str, limit: int = 200) -> str:
    """Text that may be the candidate's (a submission's file name, a variant's name) as an inline code span no text
    can close or leave: on one line (a line break could start a heading, a list or a table row), without control
    characters, between backtick runs longer than any inside (CommonMark), padded with a space where it starts or
    ends with a backtick. Markdown and HTML inside a code span stay literal."""
    text = one_line(text, limit) or "(none)"
    ticks = "`" * (max((len(run) for run in _runs(text)), default=0) + 1)
    pad = " " if text[0] == "`" or text[-1] == "`" else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def fenced(text: str) -> list[str]:
    """Text that may hold the learner's words, as a code block no text can close: the fence is longer than any
    run of backticks inside (CommonMark), so markdown, HTML, images and comments in it stay literal. (Learner text
    reaches the report cleaned of control characters: run/inbox.py.)"""
    longest = max((len(run) for run in _runs(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence, text, fence]


def _runs(text: str) -> list[str]:
    import re

    return re.findall(r"`+", text)


def write(report, path: Path, submission: str, argv: list[str], attempts: list[str] | None = None) -> None:
    from ..files import atomic_write

    atomic_write(path, markdown(report, submission, argv, attempts))
