"""Learner text, escaped for the format it is shown in: the interviewer's report (markdown), Gradescope's results.json
(what the student sees), the terminal. Names (a submission's, a variant's), exception types and messages, and the
file and line of a traceback are all the learner's choice."""
from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import pytest

from conftest import make_impl
from attnkit.grading import grade
from attnkit.results import CheckResult, ProblemResult, Report

PID = "masked_softmax"
IMG = "<img src=x onerror=alert(1)>"
NAMES = [
    "sub`mission`.zip",
    "a``b```c````.zip",
    "`leading and trailing`",
    "# heading.zip",
    "[link](http://evil.example).zip",
    "| a | b |\n|---|---|\n| c | d |",
    IMG + ".zip",
    "x\n# heading\n[link](http://evil.example) " + IMG + " | t |\n```\n<script>alert(1)</script>",
    "\x1b[2J\x1b]0;title\x07ansi.zip",
]


class Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def rendered_tags(markdown_text: str) -> list[tuple[str, dict]]:
    """The HTML elements a CommonMark renderer that lets raw HTML through (as GitHub's and GitLab's do, before their
    sanitisers) makes of the report, with GFM tables on."""
    markdown_it = pytest.importorskip("markdown_it")
    md = markdown_it.MarkdownIt("commonmark", {"html": True}).enable("table")
    parser = Tags()
    parser.feed(md.render(markdown_text))
    return parser.tags


def _report(variant: str | None) -> Report:
    checks = [CheckResult("shapes", "shapes", "failed", 0, 1, "called f(x)\nit raised ValueError: " + IMG)]
    return Report(impl="/x", seed=3, score=0, max_score=1, devices={"cpu": True, "cuda": False},
                  problems=[ProblemResult(PID, PID, "failed", 0, 1, checks)], variant=variant)


@pytest.mark.parametrize("name", NAMES)
def test_a_hostile_name_stays_text_in_the_interviewers_report(name):
    """The submission's name and the variant's: one inline code span each (never closed early, never a line of its
    own), the reproduce command in a fence longer than any backtick run; the rendered page has the report's own
    elements only: one h1, no link, no image, no script."""
    from attnkit.report.interview import code, markdown

    text = markdown(_report(name), name, ["grade", "--impl", name, "--report", "r.md"])
    assert "\x1b" not in text
    tags = rendered_tags(text)
    names = [t for t, _ in tags]
    assert names.count("h1") == 1 and not {"a", "img", "script"} & set(names), names
    assert sum(1 for t, _ in tags if t == "table") == 3  # the report's own: problems, concepts, one problem's checks
    span = code(name)
    assert f"- Submission: {span}" in text and f"(variant {span})" in text
    assert "\n" not in span


def test_a_code_span_holds_exactly_the_name():
    """What the span shows is the name itself (on one line): the backticks inside it are content, not delimiters."""
    markdown_it = pytest.importorskip("markdown_it")
    from attnkit.report.interview import code

    md = markdown_it.MarkdownIt("commonmark")
    for name in ("sub`mission`.zip", "a``b```c````.zip", "`leading and trailing`", IMG):
        html_text = md.render(f"x {code(name)} y")
        inner = re.search(r"<code>(.*)</code>", html_text).group(1)
        assert inner == name.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _hidden_leak_module() -> str:
    """At import, the module finds the hidden inputs the worker already holds and raises an exception whose class
    name, message and a forged line spell them."""
    return (
        "import sys\n_f = sys._getframe()\n"
        "while _f is not None and 'calls' not in _f.f_locals:\n    _f = _f.f_back\n"
        "_args = next(c['args'] for c in _f.f_locals['calls'] if c.get('args'))\n"
        "_digits = ''.join(c for c in repr(_args[0].flatten()[:4].tolist()) if c.isdigit())[:24]\n"
        "Leak = type('H' + _digits, (Exception,), {})\n"
        "raise Leak('SECRET ' + _digits + ' (masked_softmax.py:' + _digits[:4] + ', in x)')\n"
    )


def test_gradescope_shows_no_learner_chosen_type_name_or_line(tmp_path):
    """An exception class named after the hidden inputs: the student's results.json names no such class, no file
    and line, no message; the grader's own sentence instead. A builtin type is named (SyntaxError), still without its
    file and line."""
    from attnkit.integrations.gradescope import results

    report = grade(make_impl(tmp_path / "leak", {f"{PID}.py": _hidden_leak_module()}), [PID])
    digits = re.search(r"H(\d+)", report.problem(PID).checks[0].message).group(1)
    assert len(digits) >= 6  # the grader's own view holds the class name
    data = results(report)
    text = json.dumps(data)
    assert digits not in text and "SECRET" not in text and f"{PID}.py:" not in text and "H" + digits not in text
    assert f"your module {PID}.py raised an exception on import" in text
    report = grade(make_impl(tmp_path / "syntax", {f"{PID}.py": "def masked_softmax(:\n"}), [PID])
    text = json.dumps(results(report))
    assert f"your module {PID}.py raised SyntaxError on import" in text and f"{PID}.py:" not in text


def test_gradescope_ignores_grader_lines_a_learner_writes(tmp_path):
    """A message that forges the grader's lines ("Recognised mistake", "not started") around the hidden inputs: the
    student sees the grader's own catalogue text only (from the check's mistake id), never the message's lines."""
    from attnkit.integrations.gradescope import results

    code = (
        "def masked_softmax(scores, mask=None, dim=-1):\n"
        "    raise ValueError('\\nRecognised mistake [fill_zero]: SECRET ' + repr(scores.flatten()[:3].tolist()) +\n"
        "                     '\\n  why: SECRET\\n  fix: SECRET\\nnot started: SECRET')\n"
    )
    report = grade(make_impl(tmp_path / "forge", {f"{PID}.py": code}), [PID])
    assert any("Recognised mistake [fill_zero]: SECRET" in c.message for c in report.problem(PID).checks)
    data = results(report)
    text = json.dumps(data)
    assert "SECRET" not in text
    for test in data["tests"]:
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", test["output"]) and len(test["output"]) <= 2100


def test_gradescope_names_a_recognised_mistake_from_its_id(tmp_path):
    from attnkit.diagnose.mistakes import wrong_source
    from attnkit.integrations.gradescope import results
    from attnkit.problems import get

    p = get(PID)
    report = grade(make_impl(tmp_path / "wrong", {f"{PID}.py": wrong_source(p, p.mistakes[0])}), [PID])
    named = [c for c in report.problem(PID).checks if c.mistake]
    assert named
    outputs = [t["output"] for t in results(report)["tests"] if t["name"] == f"{PID}: {named[0].id}"]
    assert f"Recognised mistake [{named[0].mistake}]" in outputs[0] and "called " not in outputs[0]


def test_terminal_lines_carry_no_escape_sequences(tmp_path):
    """The score table's header names the graded path (a learner's folder name in a batch's folder); the batch's
    error lines quote a submission's name: both on one line, without escape sequences."""
    from attnkit.integrations.batch import cell
    from attnkit.report.summary import table

    report = _report(None)
    report.impl = "/subs/evil\n\x1b[2J\x1b[31mPASS 100/100\x1b]0;x\x07"
    head = table(report).splitlines()[0]
    assert "\x1b" not in head and "\x07" not in head and "PASS 100/100" in head
    assert cell("=HYPERLINK(\"http://evil.example\")") == "'=HYPERLINK(\"http://evil.example\")" and cell("alice") == "alice"


def test_invisible_characters_are_dropped_from_learner_text():
    """Bidirectional overrides and marks, zero-width spaces and joiners, the byte order mark and Unicode's tag
    characters reorder or hide what a reader sees (a name that looks like another's, a comment that hides code):
    none survives the cleaning every learner text goes through, in one line or many."""
    from attnkit.run.inbox import clean, one_line

    hidden = ["\u202e", "\u2067", "\u200e", "\u200f", "\u061c", "\u200b", "\u200d", "\u2060", "\ufeff", "\U000e0041"]
    text = "alice" + "".join(hidden) + "\nbob"
    assert clean(text) == "alice\nbob" and one_line(text) == "alice bob"
