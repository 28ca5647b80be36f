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


def _result(name, problems) -> dict:
    """One grade-batch result: {problem id: [(check, passed, mistake, message)]}."""
    ps = [ProblemResult(pid, pid, "passed" if all(c[1] for c in cs) else "failed", sum(c[1] for c in cs), len(cs),
                        [CheckResult(c, c, "passed" if ok else "failed", int(ok), 1, msg, mistake)
                         for c, ok, mistake, msg in cs]) for pid, cs in problems.items()]
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
                        # the learner's own words that sound like a worker's end are not one
                        "additive_attention": [("shapes", False, "no_tanh" + EVIL, "raised ValueError: timed out after "
                                                "1 s; no result: the worker process crashed with SIGSEGV"),
                                               ("masking", True, None, "")]},
    }
    folder.mkdir()
    for i, (name, problems) in enumerate(rows.items()):
        (folder / f"s{i}.json").write_text(json.dumps(_result(name, problems)))
    (folder / "erin.json").write_text(json.dumps({"submission": "erin.zip", "error": "not a zip file " + EVIL}))
    (folder / "source.json").write_text(json.dumps({"submissions": "/somewhere"}))
    return folder


def test_the_numbers(tmp_path):
    out = tmp_path / "c.json"
    r = attnkit("class-report", str(_class(tmp_path / "results")), "--json", str(out))
    assert r.returncode == 0 and "5 submissions, 4 graded" in r.stdout, r.stderr
    s = json.loads(out.read_text())
    assert sorted(s["scores"]) == [0, 2, 3, 4] and s["max_score"] == 4
    assert s["problems"]["masked_softmax"] == {"graded": 4, "passed": 1, "rate": 0.25}
    assert s["checks"]["masked_softmax: masking"]["passed"] == 2
    assert s["mistakes"]["masked_softmax"] == [["fill_zero", 2]]  # carol counts once for two checks
    kinds = {(t["submission"], t["kind"], t["problem"]) for t in s["troubles"]}
    assert kinds == {("carol", "timed out", "additive_attention"), ("dave" + EVIL, "hostile", "masked_softmax"),
                     ("erin.zip", "not graded", "")}


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed: the page is not rendered in a browser here")
def test_the_page_in_a_headless_browser(tmp_path):
    page = tmp_path / "report.html"
    r = attnkit("class-report", str(_class(tmp_path / "results")), "--out", str(page))
    assert r.returncode == 0, r.stderr
    text = page.read_text()
    assert "<script" not in text.replace("&lt;script", "") and "http" not in text  # no script, nothing fetched
    probe = tmp_path / "probe.html"  # the page plus a script that reports how the images decoded
    probe.write_text(text.replace("</body>", "<script>window.onload = () => document.body.setAttribute("
                                  "'data-images', [...document.images].map(i => i.naturalWidth).join(','));</script></body>"))
    dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
                          "--dump-dom", probe.as_uri()], capture_output=True, text=True, timeout=120).stdout
    widths = [int(w) for w in dom.split('data-images="')[1].split('"')[0].split(",")]
    assert len(widths) == 2 and all(w > 100 for w in widths), widths  # both plots decoded
    for heading in ("Score distribution", "Pass rate per problem", "Pass rate per check", "Most frequent named "
                    "mistakes", "Crashed, timed out, hostile or not graded", "Similarity"):
        assert heading in dom
    assert "5 submissions, 4 graded" in dom and "fill_zero" in dom and "timed out" in dom
    assert "attnkit similarity" in dom
    (tmp_path / "results" / "similarity.json").write_text(json.dumps(  # as `attnkit similarity --json` writes it
        {"threshold": 0.6, "pairs": [{"a": "alice", "b": "bob" + EVIL, "similarity": 0.97, "tokens": 900}]}))
    assert attnkit("class-report", str(tmp_path / "results"), "--out", str(page)).returncode == 0
    text = page.read_text()
    assert "<td>alice</td><td>bob&lt;script&gt;alert(1)&lt;/script&gt;</td><td>97%</td>" in text
    assert "<script>alert(1)</script>" not in dom and "&lt;script&gt;alert(1)&lt;/script&gt;" in dom  # as text


@needs_bwrap  # students' code: grade-batch grades only inside bubblewrap
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
