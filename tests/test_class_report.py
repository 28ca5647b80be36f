"""`attnkit class-report`: one self-contained HTML page (and JSON) of a class's grade-batch results, rendered in a
real headless browser (Debian's chromium, where installed) and checked for what is on the page."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import SOLUTIONS, make_impl, needs_bwrap
from attnkit.diagnose.mistakes import wrong_source
from attnkit.problems import get
from attnkit.report.summary import to_json
from attnkit.results import CheckResult, ProblemResult, Report
from test_hiring_and_scale import attnkit

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None and os.environ.get("ATTNKIT_REQUIRE_BROWSER") == "1":  # CI installs it: a skip would hide that
    raise RuntimeError("ATTNKIT_REQUIRE_BROWSER=1, and chromium is not installed")
EVIL = "<script>alert(1)</script>"


STUB = "masked_softmax.py raises NotImplementedError: still a stub, fill it in"
BROKEN = "importing additive_attention.py failed: ValueError: x = 1 / 0 at line 3"


def _problem(pid, cs, trouble=None) -> ProblemResult:
    """[(check, passed, mistake, message)], or a not-started reason (every check fails with it, as the grader writes)."""
    if isinstance(cs, str):
        checks = [CheckResult(c, c, "failed", 0, 1, f"not started: {cs}") for c in ("shapes", "masking")]
        return ProblemResult(pid, pid, "not_started", 0, 2, checks, trouble=trouble or "not_started")
    return ProblemResult(pid, pid, "passed" if all(c[1] for c in cs) else "failed", sum(c[1] for c in cs), len(cs),
                         [CheckResult(c, c, "passed" if ok else "failed", int(ok), 1, msg, mistake)
                          for c, ok, mistake, msg in cs], trouble=trouble)


def _result(name, problems, troubles=None) -> dict:
    """One grade-batch result: {problem id: [(check, passed, mistake, message)] or a not-started reason}; `troubles`:
    {problem id: the grader's own `trouble` field}."""
    ps = [_problem(pid, cs, (troubles or {}).get(pid)) for pid, cs in problems.items()]
    report = Report(impl=name, seed=1, score=sum(p.score for p in ps), max_score=sum(p.max_score for p in ps),
                    devices={"cpu": True, "cuda": False}, problems=ps)
    return {**to_json(report), "submission": name}


def _class(folder: Path) -> Path:
    ok = [("shapes", True, None, ""), ("masking", True, None, "")]
    rows = {
        "alice": {"masked_softmax": ok, "additive_attention": ok},
        "bob": {"masked_softmax": [("shapes", True, None, ""), ("masking", False, "fill_zero", "x")],
                "additive_attention": ok},
        "carol": {"masked_softmax": [("shapes", False, "fill_zero", "y"), ("masking", False, "fill_zero", "y")],
                  "additive_attention": [("shapes", False, None, "called f(x)\nno result: timed out after 30 s"),
                                         ("masking", False, None, "called f(x)\nno result: timed out after 30 s")]},
        "dave" + EVIL: {"masked_softmax": [("shapes", False, None, "called f(x)\nno result: the worker sent something "
                                            "that is not a result " + EVIL), ("masking", True, None, "")],
                        # the learner's own words, even the grader's very lines, are not a worker's end: only the
                        # grader's `trouble` field is
                        "additive_attention": [("shapes", False, "no_tanh" + EVIL, "called f(x)\nit raised ValueError: "
                                                "x\nno result: timed out after 30 s (an endless loop, or far too slow)"
                                                "\nno result: the worker process crashed with SIGSEGV\nno result: the "
                                                "worker sent something that is not a result"),
                                               ("masking", True, None, "")]},
        "frank": {"masked_softmax": STUB, "additive_attention": BROKEN},  # one not begun, one that crashed at import
    }
    troubles = {"carol": {"additive_attention": "timeout"}, "dave" + EVIL: {"masked_softmax": "hostile"}}
    folder.mkdir()
    for i, (name, problems) in enumerate(rows.items()):
        (folder / f"s{i}.json").write_text(json.dumps(_result(name, problems, troubles.get(name))))
    (folder / "erin.json").write_text(json.dumps({"submission": "erin.zip", "error": "not a zip file " + EVIL}))
    (folder / "source.json").write_text(json.dumps({"submissions": "/somewhere"}))
    return folder


def test_the_numbers(tmp_path):
    out = tmp_path / "c.json"
    r = attnkit("class-report", str(_class(tmp_path / "results")), "--json", str(out))
    assert r.returncode == 0 and "6 submissions, 5 graded" in r.stdout, r.stderr
    s = json.loads(out.read_text())
    assert sorted(s["scores"]) == [0, 0, 2, 3, 4] and s["max_score"] == 4
    # frank has not begun masked_softmax: counted apart, never as a failure, out of the rates and means
    assert s["problems"]["masked_softmax"] == {"started": 4, "passed": 1, "failed": 3, "did not load": 0,
                                               "not started": 1, "rate": 0.25, "mean": 0.5, "difficulty": 0.5}
    # his additive_attention crashed at import: started, and it did not load
    additive = s["problems"]["additive_attention"]
    assert (additive["started"], additive["did not load"], additive["not started"]) == (5, 1, 0)
    assert additive["mean"] == pytest.approx((1 + 1 + 0 + 0.5 + 0) / 5)
    assert s["checks"]["masked_softmax: masking"] == {"graded": 4, "passed": 2, "rate": 0.5}  # frank's stub: not in it
    assert s["checks"]["additive_attention: shapes"]["graded"] == 5  # a module that did not load was started
    assert s["mistakes"]["masked_softmax"] == [["fill_zero", 2]]  # carol counts once for two checks
    kinds = {(t["submission"], t["kind"], t["problem"]) for t in s["troubles"]}
    assert kinds == {("carol", "timed out", "additive_attention"), ("dave" + EVIL, "hostile", "masked_softmax"),
                     ("erin.zip", "not graded", ""), ("frank", "did not load", "additive_attention")}
    assert all(t["detail"] for t in s["troubles"])  # every row says why
    frank = next(t for t in s["troubles"] if t["submission"] == "frank")
    assert frank["detail"] == "its module raised ValueError on import"
    roster = {row["submission"]: row for row in s["roster"]}
    assert len(roster) == 6 and roster["erin.zip"]["score"] is None and "not a zip file" in roster["erin.zip"]["error"]
    assert {p: v["status"] for p, v in roster["frank"]["problems"].items()} == {
        "masked_softmax": "not started", "additive_attention": "did not load"}
    assert roster["bob"]["problems"]["masked_softmax"]["failing"] == [{"id": "masking", "message": "x"}]


def test_a_result_file_that_is_not_a_result_is_listed(tmp_path):
    """Nothing in the folder is left out silently: a JSON list is an error row with its reason."""
    from attnkit.report.class_report import load, stats

    (tmp_path / "odd.json").write_text("[1, 2]")
    (tmp_path / "cut.json").write_text('{"submission": "cut", "score"')
    s = stats(load(tmp_path))
    assert {(t["submission"], t["detail"]) for t in s["troubles"]} == {
        ("odd", "its result file is not a grade-batch result"), ("cut", "its result file is not JSON")}


def _dom(page: Path) -> str:
    """The DOM chromium builds from `page` (headless), after its scripts ran."""
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
                           "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120).stdout


def _without_policy(text: str) -> str:
    """The page less its Content-Security-Policy, so that a probe script of the test's may run in it."""
    import re

    return re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", text)


SECTIONS = ("Roster", "Score distribution", "Problems: started, passed, failed, not started", "Pass rate per check",
            "Most frequent named mistakes", "Did not grade", "Similarity", "Each student")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed: the page is not rendered in a browser here")
def test_the_page_in_a_headless_browser(tmp_path):
    """Read with scripts off, the page holds every section, the roster, the statuses and the details; with them on,
    both plots decode and a click on a header sorts a table; its policy runs no other script."""
    from attnkit.report.class_page import SCRIPT

    page = tmp_path / "report.html"
    r = attnkit("class-report", str(_class(tmp_path / "results")), "--out", str(page))
    assert r.returncode == 0, r.stderr
    text = page.read_text()
    assert text.count("<script") == 1 and f"<script>{SCRIPT}</script>" in text and "://" not in text  # ours alone, nothing fetched
    plain = tmp_path / "plain.html"  # the page as a browser without scripts reads it: its one script left out
    plain.write_text(text.replace(f"<script>{SCRIPT}</script>", ""))
    static = _dom(plain)
    for heading in SECTIONS:
        assert heading in static, heading
    assert "<button" not in static  # the script did not run: the page reads without it
    assert "6 submissions, 5 graded" in static and "fill_zero" in static and "timed out" in static
    assert static.count("not started") >= 2 and "did not load" in static and "attnkit similarity" in static
    assert "its module raised ValueError on import" in static and "checks without their points: shapes" in static
    assert 'href="results/s0.json"' in static  # each roster row links to its result, relative to the page
    probe = tmp_path / "probe.html"  # the page plus a script that reports the images, then sorts the roster by score
    probe.write_text(_without_policy(text).replace("</body>", """<script>window.onload = () => {
      const b = document.body, names = () => [...document.querySelector("table").tBodies[0].rows].map(
        r => r.cells[0].textContent).join("|");
      b.setAttribute("data-images", [...document.images].map(i => i.naturalWidth).join(","));
      const score = document.querySelector("table").tHead.rows[0].cells[1].querySelector("button");
      score.click(); b.setAttribute("data-up", names()); score.click(); b.setAttribute("data-down", names());
    };</script></body>"""))
    dom = _dom(probe)
    widths = [int(w) for w in dom.split('data-images="')[1].split('"')[0].split(",")]
    assert len(widths) == 2 and all(w > 100 for w in widths), widths  # both plots decoded
    up = dom.split('data-up="')[1].split('"')[0].split("|")
    down = dom.split('data-down="')[1].split('"')[0].split("|")
    assert up[0] == "erin.zip" and up[-1] == "alice" and up[-2] == "bob", up  # not graded first, then by score
    assert down[0] == "alice" and down[-1] == "erin.zip", down
    injected = tmp_path / "injected.html"  # the policy kept: a script smuggled into the page does not run, ours does
    injected.write_text(text.replace("</body>", "<script>document.body.setAttribute('data-injected', '1')</script>"
                                     "</body>"))
    dom = _dom(injected)
    assert 'data-injected="1"' not in dom and "<button" in dom
    (tmp_path / "results" / "similarity.json").write_text(json.dumps(  # as `attnkit similarity --json` writes it
        {"threshold": 0.6, "pairs": [{"a": "alice", "b": "dave" + EVIL, "similarity": 0.97, "tokens": 900}]}))
    assert attnkit("class-report", str(tmp_path / "results"), "--out", str(page)).returncode == 0
    dom = _dom(page)
    alice, dave = 's-1', 's-4'  # the roster's order: erin.json, s0 (alice), s1, s2, s3 (dave)
    assert f'<a href="#{alice}">alice</a>' in dom and f'<a href="#{dave}">dave&lt;script&gt;' in dom and "97%" in dom
    assert f'id="{alice}"' in dom and f'id="{dave}"' in dom  # both students' sections exist
    assert "<script>alert(1)</script>" not in dom and "&lt;script&gt;alert(1)&lt;/script&gt;" in dom  # as text


@needs_bwrap  # students' code: grade-batch grades only inside bubblewrap
@pytest.mark.slow  # end to end, seconds each: `pytest tests -m slow`
def test_from_a_real_batch(tmp_path):
    subs = tmp_path / "subs"
    p = get("masked_softmax")
    make_impl(subs / "good", {"masked_softmax.py": (SOLUTIONS / "masked_softmax.py").read_text()})
    make_impl(subs / "wrong", {"masked_softmax.py": wrong_source(p, p.mistakes[0])})
    make_impl(subs / "hang", {"masked_softmax.py": "while True:\n    pass\n"})
    make_impl(subs / "crash", {"masked_softmax.py": "import os\nos.abort()\n"})
    assert attnkit("grade-batch", str(subs), "--out", str(tmp_path / "r"), "--problems", "masked",
                   "--timeout", "3").returncode == 0
    r = attnkit("class-report", str(tmp_path / "r"), "--json", str(tmp_path / "c.json"))
    s = json.loads((tmp_path / "c.json").read_text())
    assert r.returncode == 0 and s["graded"] == 4 and s["problems"]["masked_softmax"]["passed"] == 1
    assert s["mistakes"]["masked_softmax"][0][0] == p.mistakes[0].id
    kinds = {(t["submission"], t["kind"]) for t in s["troubles"]}  # the grader's own words for a worker's end
    assert kinds == {("hang", "timed out"), ("crash", "crashed")}, kinds


def test_bad_requests_are_one_line(tmp_path):
    for args, said in ((["class-report", str(tmp_path / "nope"), "--json", str(tmp_path / "x.json")],
                        "not a results folder"),
                       (["class-report", str(tmp_path)], "say where to write it"),
                       (["class-report", str(tmp_path), "--json", str(tmp_path / "x.json")], "no results in it")):
        r = attnkit(*args)
        assert r.returncode == 2 and said in r.stderr and "Traceback" not in r.stderr, r.stderr


IMG = "<img src=x onerror=alert(1)>"


def _live_images(page: str) -> list[dict]:
    """The <img> tags a browser would build from the page, with their attributes (html.parser, as a browser tokenises)."""
    from html.parser import HTMLParser

    found = []

    class Images(HTMLParser):
        def handle_starttag(self, tag, attrs):
            if tag == "img":
                found.append(dict(attrs))

    Images().feed(page)
    return found


def test_every_learner_text_on_the_page_is_escaped(tmp_path):
    """A submission's name, a check's message, a mistake id, an error row's text, a similarity pair and the results
    folder each carry an <img onerror> tag: the page shows them as text, and its only images are its two plots."""
    from attnkit.report.class_report import load, page, stats

    results = tmp_path / ("r" + IMG)
    results.mkdir()
    bad = [("shapes", False, "fill_zero" + IMG, "called f(x)\nit raised ValueError: " + IMG)]
    (results / "a.json").write_text(json.dumps(_result("alice" + IMG, {"masked_softmax": bad},
                                                       {"masked_softmax": "crash"})))
    (results / "b.json").write_text(json.dumps({"submission": "bob" + IMG, "error": "not a valid zip " + IMG}))
    s = stats(load(results))
    s["similar"] = [{"a": "alice" + IMG, "b": "bob" + IMG, "similarity": 0.9}]
    html_page = page(s, {"scores": "data:image/png;base64,AA==", "problems": "data:image/png;base64,AA=="}, str(results))
    images = _live_images(html_page)
    assert len(images) == 2 and not any("onerror" in attrs for attrs in images), images
    assert html_page.count("&lt;img src=x onerror=alert(1)&gt;") >= 6  # each shown as text
    assert {t["kind"] for t in s["troubles"]} == {"crashed", "not graded"}


def test_a_message_holding_the_graders_own_line_is_not_a_timeout(tmp_path):
    """A learner's exception message is exactly the line the grader writes for a worker it stopped at the time limit:
    the grader records no trouble (its `trouble` field), and the class report shows none."""
    from attnkit.grading import grade
    from attnkit.report.class_report import stats

    line = "no result: timed out after 30 s while running call masked_softmax/shapes/0 (an endless loop, or far too slow)"
    source = f"def masked_softmax(scores, mask=None, dim=-1):\n    raise ValueError({chr(10) + line!r})\n"
    report = grade(make_impl(tmp_path / "fake", {"masked_softmax.py": source}), ["masked_softmax"])
    p = report.problem("masked_softmax")
    assert any(f"\n{line}" in c.message for c in p.checks), [c.message for c in p.checks]  # the line is there
    assert p.status == "failed" and p.trouble is None
    row = {**to_json(report), "submission": "fake"}
    assert row["problems"][0]["trouble"] is None and stats([row])["troubles"] == []


def test_the_grader_records_each_trouble_where_it_knows_it(tmp_path):
    """The `trouble` field from real workers: a hang at import (timeout), an abort (crash), a stub (not_started), a
    correct module (none); the JSON report carries it and validates against the schema."""
    import jsonschema

    from attnkit import ROOT
    from attnkit.grading import grade

    schema = json.loads((ROOT / "grader" / "report.schema.json").read_text())
    modules = {"hang": ("while True:\n    pass\n", "timeout"), "crash": ("import os\nos.abort()\n", "crash"),
               "stub": ("def masked_softmax(scores, mask=None, dim=-1):\n    raise NotImplementedError\n", "not_started"),
               "good": ((SOLUTIONS / "masked_softmax.py").read_text(), None)}
    for name, (source, trouble) in modules.items():
        report = grade(make_impl(tmp_path / name, {"masked_softmax.py": source}), ["masked_softmax"], timeout=3)
        assert report.problem("masked_softmax").trouble == trouble, (name, report.problem("masked_softmax"))
        data = to_json(report)
        jsonschema.validate(data, schema)
        assert data["problems"][0]["trouble"] == trouble
