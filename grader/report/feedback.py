"""Feedback said once: a problem's failing checks grouped under the mistake that explains them.

The diagnosis names, for each failing check, the catalogued mistake that reproduces it (CheckResult.mistake);
one mistake often explains several checks. Every front end (the text after the table, pytest's failure sections,
watch, the interviewer's report, notebook and nbgrader feedback) shows a mistake's block (name, why, fix) once per
problem, and under it the checks it explains, each with its own message. A check no mistake explains keeps its own
text ("what the results show"). The grader's own words only: a check's message is quoted as the grader wrote it.
A finding about the whole problem (the diagnosis's first departing stage) has its place before the groups, once:
in `problem_text` above them, in `for_check` under the first failing check.
"""
from __future__ import annotations

from ..model.i18n import ambient, word

FAILING = ("failed", "error")


def block(pid: str, mistake: str) -> str:
    """The catalogue's text for mistake `mistake` of problem `pid` (in the ambient language), or its id alone for
    an id this kit does not know (a report from another version)."""
    from ..diagnose.diagnose import describe
    from ..problems import get

    try:
        return describe(get(pid), mistake)
    except Exception:  # noqa: BLE001 - an unknown id: its name alone
        return f"Recognised mistake [{mistake}]"


def groups(problem, shown=None) -> list[tuple[str | None, list]]:
    """[(mistake id or None, [failing checks])]: each named mistake once, in the order of the first check it
    explains; the checks no mistake explains in one group (None), whose note is the problem's `unexplained`. `shown`:
    the ids of the checks the reader sees (pytest's selection), None for all."""
    out: list[tuple[str | None, list]] = []
    named: dict[str | None, list] = {}
    for c in problem.checks:
        if c.status not in FAILING or (shown is not None and c.id not in shown):
            continue
        if c.mistake in named:
            named[c.mistake].append(c)
        else:
            named[c.mistake] = [c]
            out.append((c.mistake, named[c.mistake]))
    return out


def _indent(text: str, pad: str, max_lines: int | None) -> list[str]:
    lines = text.splitlines() or [""]
    more = [f"{pad}... ({len(lines) - max_lines} more lines)"] if max_lines and len(lines) > max_lines else []
    return [pad + line for line in lines[:max_lines]] + more


def problem_text(problem, max_lines: int | None = 12) -> str:
    """A failing problem's feedback as plain text: each mistake's block once, then the checks it explains."""
    out = [*_indent("\n".join(problem.departure), "  ", None)] if getattr(problem, "departure", None) else []
    for mistake, checks in groups(problem):
        note = getattr(problem, "unexplained", None) if mistake is None else None
        if mistake is None and not (note and len(checks) > 1):  # a lone check: its message, then the note
            for c in checks:
                out += [f"{problem.id}::{c.id}", *_indent(c.message, "    ", max_lines)]
            out += _indent("\n".join(note or []), "    ", None)
            continue
        if mistake is None:  # several checks that no mistake explains: the note once, then each check's message
            out += [f"{problem.id}: {word('unexplained', ambient(), checks=', '.join(c.id for c in checks))}",
                    *_indent("\n".join(note), "  ", None)]
            out += [line for c in checks for line in (f"  {problem.id}::{c.id}", *_indent(c.message, "      ", max_lines))]
            continue
        names = ", ".join(c.id for c in checks)
        out += [f"{problem.id}: {names}", *_indent(block(problem.id, mistake), "  ", None),
                f"  {word('explains', ambient())}"]
        for c in checks:
            out += [f"  {problem.id}::{c.id}", *_indent(c.message, "      ", max_lines)]
    return "\n".join(out)


def for_check(problem, check, shown=None) -> str:
    """One failing check's feedback where each check is shown apart (a pytest failure section, a notebook cell):
    its own message; the mistake's block under the first check it explains, naming the others; a pointer back
    to that check under the others."""
    text = check.message + _departure(problem, check, shown)
    if check.status not in FAILING:
        return text
    if check.mistake is None:  # the problem's note where no mistake explains it: once, under the first such check
        note = getattr(problem, "unexplained", None)
        first = next((cs[0] for m, cs in groups(problem, shown) if m is None), check)
        if not note:
            return text
        if first.id != check.id:
            return f"{text}\n" + word("same_note", ambient(), where=f"{problem.id}::{first.id}")
        return text + "\n" + "\n".join(note)
    checks = next((cs for m, cs in groups(problem, shown) if m == check.mistake), [check])
    first = checks[0]
    if first.id != check.id:
        return f"{text}\n" + word("same_as", ambient(), mid=check.mistake, where=f"{problem.id}::{first.id}")
    others = ", ".join(f"{problem.id}::{c.id}" for c in checks[1:])
    also = "\n" + word("also", ambient(), checks=others) if others else ""
    return f"{text}\n{block(problem.id, check.mistake)}{also}"


def _departure(problem, check, shown=None) -> str:
    """The problem's stage finding (diagnose/trace.py), under its first failing check shown, once."""
    lines = getattr(problem, "departure", None)
    if not lines or check.status not in FAILING:
        return ""
    first = next((c for c in problem.checks if c.status in FAILING and (shown is None or c.id in shown)), None)
    return "\n" + "\n".join(lines) if first is not None and first.id == check.id else ""
