"""The interviewers' flow: a bundle carries its scope (`attnkit grade` applies it without flags and says so), its stubs
and public checks speak the bundle's language (one line per check), `attnkit interview start` runs a clock that the
interviewer's side keeps, and the report shows the time, a summary by concept and the candidate's code, fenced
(Markdown) or escaped (HTML, rendered in headless chromium)."""
from __future__ import annotations

import json
import re
import subprocess
import zipfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from conftest import SOLUTIONS, needs_bwrap
from attnkit.defaults import DEFAULT_SEED, variant_seed
from attnkit.integrations.bundle import records_dir
from attnkit.report.attempts import Clock
from attnkit.report.concepts import CONCEPTS, concept_checks
from attnkit.report.interview import MAX_CODE, MAX_FILE, Extras, html, markdown, sources
from attnkit.results import CheckResult, ProblemResult, Report
from test_class_report import CHROMIUM
from test_hiring_and_scale import attnkit, run_public

EVIL = "</code></pre><script>alert(1)</script>"
HOSTILE_CODE = f"# ```` {EVIL}\n"  # a backtick run longer than a plain fence, and HTML that would close the block


def _export(tmp_path: Path, *args: str, command=("export",)) -> Path:
    bundle = tmp_path / "bundle"
    r = attnkit(*command, str(bundle), *args)
    assert r.returncode == 0, r.stderr
    return bundle


def _manifest(bundle: Path) -> dict:
    return json.loads((bundle / "submission" / "bundle.json").read_text())


def _record(bundle: Path) -> Path:
    return records_dir() / f"{_manifest(bundle)['bundle']}.json"


def _zip(bundle: Path, archive: Path) -> Path:
    """What `zip -r submission.zip submission` sends back."""
    with zipfile.ZipFile(archive, "w") as z:
        for f in (bundle / "submission").iterdir():
            z.write(f, f"submission/{f.name}")
    return archive


def _solve(bundle: Path, *problem_ids: str) -> None:
    for pid in problem_ids:
        (bundle / "submission" / f"{pid}.py").write_text((SOLUTIONS / f"{pid}.py").read_text())


def test_a_bundle_is_graded_on_its_own_scope_without_flags(tmp_path):
    bundle = _export(tmp_path, "--problems", "masked,additive", "--variant", "alice-2026")
    _solve(bundle, "masked_softmax", "additive_attention")
    manifest = bundle / "submission" / "bundle.json"
    recorded = manifest.read_text()
    # the candidate narrows the scope in their copy: the interviewer's record decides
    manifest.write_text(json.dumps({**json.loads(recorded), "problems": ["masked_softmax"]}))
    archive = _zip(bundle, tmp_path / "submission.zip")
    out = tmp_path / "r.json"
    r = attnkit("grade", "--impl", str(archive), "--json", str(out))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "grading its 2 problem(s) (masked_softmax, additive_attention) with its variant, as recorded at export" \
        in r.stdout
    report = json.loads(out.read_text())
    assert [p["id"] for p in report["problems"]] == ["masked_softmax", "additive_attention"]
    assert report["variant"] == "alice-2026" and report["seed"] == variant_seed("alice-2026")

    chosen = attnkit("grade", "--impl", str(archive), "--problems", "masked", "--json", str(out))
    assert chosen.returncode == 0 and "replace the bundle's" in chosen.stdout  # the command line still decides
    assert [p["id"] for p in json.loads(out.read_text())["problems"]] == ["masked_softmax"]

    # graded where the record is not (another machine, or an id the candidate made up): the candidate's list of
    # problems is never used on its own (a failing problem left out would vanish from the maximum, and the clock with
    # it); with --problems the interviewer's list is graded, and the report says the bundle was not verified
    env = {**__import__("os").environ, "ATTNKIT_HOME": str(tmp_path / "elsewhere")}
    forged = tmp_path / "forged"
    forged.mkdir()
    (forged / "bundle.json").write_text(json.dumps({**json.loads(recorded), "bundle": "0" * 32,
                                                     "problems": ["masked_softmax"]}))
    (forged / "masked_softmax.py").write_text((SOLUTIONS / "masked_softmax.py").read_text())
    for impl, environ in ((archive, env), (forged, None)):
        refused = attnkit("grade", "--impl", str(impl), "--json", str(out), env=environ)
        assert refused.returncode == 2 and "is not used; give --problems" in refused.stderr, refused.stderr[-1500:]
        assert "Traceback" not in refused.stderr
    md = tmp_path / "r.md"
    elsewhere = attnkit("grade", "--impl", str(archive), "--problems", "masked,additive", "--json", str(out),
                        "--report", str(md), env=env)
    assert elsewhere.returncode == 0 and "whose record is not on this machine" in elsewhere.stdout
    report = json.loads(out.read_text())
    assert [p["id"] for p in report["problems"]] == ["masked_softmax", "additive_attention"]
    assert report["seed"] == DEFAULT_SEED
    assert "is not recorded on this machine: the problems are those given with --problems" in md.read_text()


def test_a_submission_without_a_manifest_is_graded_as_before(tmp_path):
    bundle = _export(tmp_path, "--problems", "masked")
    _solve(bundle, "masked_softmax")
    (bundle / "submission" / "bundle.json").write_text("{not json")
    out = tmp_path / "r.json"
    r = attnkit("grade", "--impl", str(bundle / "submission"), "--problems", "masked", "--json", str(out))
    assert r.returncode == 0 and "is bundle" not in r.stdout and "names bundle" not in r.stdout


def test_stubs_in_a_bundle_name_the_bundles_own_command(tmp_path):
    bundle = _export(tmp_path, "--problems", "masked,additive")
    for pid in ("masked_softmax", "additive_attention"):
        text = (bundle / "submission" / f"{pid}.py").read_text()
        assert f"`pytest test_public.py -k {pid}`" in text
        assert "grader/problems" not in text and "grade it with `pytest -k" not in text
    assert "pytest test_public.py -k masked_softmax" in (bundle / "README.md").read_text()


@pytest.mark.slow  # end to end, seconds each: `pytest tests -m slow`
def test_public_checks_print_one_line_per_check_and_no_traceback(tmp_path):
    bundle = _export(tmp_path, "--problems", "masked,additive,luong")
    cases = ["masked_softmax", "additive_attention", "luong_attention-dot", "luong_attention-scaled_dot",
             "luong_attention-general", "luong_attention-concat"]

    def lines() -> dict[str, str]:
        r = run_public(bundle)
        assert r.returncode == 1
        for noise in ("Traceback", "test_public.py:", "fixed_example_problems", "def test_", "____"):
            assert noise not in r.stdout + r.stderr, noise
        found = {line.split()[0]: line.split(None, 1)[1] for line in r.stdout.splitlines()
                 if line.split() and line.split()[0] in cases}
        assert sorted(found) == sorted(cases) and len(r.stdout.strip().splitlines()) <= len(cases) + 3, r.stdout
        return found

    assert all(v.startswith("not started: it raises NotImplementedError") for v in lines().values())
    _solve(bundle, "masked_softmax")
    source = (SOLUTIONS / "additive_attention.py").read_text()
    line = next(i for i, t in enumerate(source.splitlines(), 1) if "def __init__" in t) + 1
    lines_ = source.splitlines()
    lines_.insert(line - 1, "        1 / 0")
    (bundle / "submission" / "additive_attention.py").write_text("\n".join(lines_) + "\n")
    (bundle / "submission" / "luong_attention.py").write_text("class LuongAttention(:\n")
    found = lines()
    assert found["masked_softmax"] == "passed"
    assert found["additive_attention"] == \
        f"failed: ZeroDivisionError: division by zero (submission/additive_attention.py line {line})"
    assert found["luong_attention-dot"].startswith("failed: submission/luong_attention.py does not compile:")
    (bundle / "submission" / "masked_softmax.py").write_text("def masked_softmax(scores, valid_lens=None):\n"
                                                             "    return scores[..., :1]\n")
    assert re.fullmatch(r"failed: output shapes \[\(2, 3, 1\)\], expected \[\(2, 3, 4\)\]", lines()["masked_softmax"])


@pytest.mark.slow  # end to end, seconds each: `pytest tests -m slow`
def test_interview_start_keeps_the_clock_on_the_interviewers_side(tmp_path):
    r = attnkit("interview", "start", "--problems", "masked", "--minutes", "30", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    bundle = tmp_path / "interview"  # the default folder
    manifest, record = _manifest(bundle), json.loads(_record(bundle).read_text())
    assert manifest["minutes"] == record["minutes"] == 30 and manifest["started"] == record["started"]
    assert record["problems"] == ["masked_softmax"] and "You have 30 minutes" in (bundle / "README.md").read_text()
    assert oct(_record(bundle).stat().st_mode & 0o777) == "0o600"
    shown = run_public(bundle).stdout
    assert re.search(r"time: \d+ of 30 min used, \d+ min left", shown), shown
    for args, expected in ((["--minutes", "0"], "must be a number above 0"), (["--minutes", "5000"], "at most a day"),
                           ([], "exists and is not empty")):
        bad = attnkit("interview", "start", *args, cwd=tmp_path)
        assert bad.returncode == 2 and expected in bad.stderr and len(bad.stderr.strip().splitlines()) == 1, bad.stderr


def _fake_report() -> Report:
    def problem(pid, checks):
        cs = [CheckResult(c, c, "passed" if ok else "failed", int(ok), 1, "" if ok else f"{c} went wrong {EVIL}")
              for c, ok in checks]
        return ProblemResult(pid, pid, "passed" if all(ok for _, ok in checks) else "failed",
                             sum(ok for _, ok in checks), len(cs), cs)

    ps = [problem("masked_softmax", [("shapes", True), ("masking", False), ("parity_float64", False)]),
          problem("multihead_attention", [("shapes", True), ("parity_float64", False), ("stability", True)]),
          problem("causal_self_attention", [("kv_cache", True)])]
    return Report(impl="x", seed=1, score=sum(p.score for p in ps), max_score=sum(p.max_score for p in ps),
                  devices={"cpu": True, "cuda": False}, problems=ps)


def test_the_summary_by_concept_reads_the_checks():
    from attnkit.judge.registry import CHECKS
    from attnkit.problems import ORDER

    for rules in CONCEPTS.values():  # the map names registered checks and known problems only
        assert all(cid in CHECKS and set(where or ()) <= set(ORDER) for cid, where in rules), rules
    found = concept_checks(_fake_report())
    assert set(found) == set(CONCEPTS)
    by = {name: sorted((pid, c.id, c.status) for pid, c in v) for name, v in found.items()}
    assert by["masking"] == [("masked_softmax", "masking", "failed")]
    assert by["caching"] == [("causal_self_attention", "kv_cache", "passed")] and by["memory"] == []
    # parity on heads counts for "shapes and heads" in a multi-head problem only
    assert ("multihead_attention", "parity_float64", "failed") in by["shapes and heads"]
    assert not any(c == "parity_float64" for pid, c, _ in by["shapes and heads"] if pid == "masked_softmax")
    text = markdown(_fake_report(), "x", ["grade"])
    assert "| masking | failed | 0 of 1 | `masked_softmax: masking` |" in text
    assert "| caching | passed | 1 of 1 | - |" in text and "| memory | not graded here | - | - |" in text


def test_the_candidates_code_is_bounded_and_never_follows_a_link(tmp_path):
    (tmp_path / "masked_softmax.py").write_text(HOSTILE_CODE + "x = 1\n" * MAX_FILE)
    (tmp_path / "secret").write_text("the interviewer's secret")
    (tmp_path / "additive_attention.py").symlink_to(tmp_path / "secret")
    got = {pid: (text, note) for pid, text, note in sources(tmp_path, ["masked_softmax", "additive_attention",
                                                                        "luong_attention"])}
    assert got["masked_softmax"][0].startswith(HOSTILE_CODE) and len(got["masked_softmax"][0]) < MAX_FILE + 100
    assert got["masked_softmax"][1].endswith("(cut)")
    assert got["additive_attention"] == (None, "not a plain file: not shown")
    assert got["luong_attention"] == (None, "no file")
    for pid in ("multihead_attention", "rope", "flash_attention", "attention_backward", "causal_self_attention"):
        (tmp_path / f"{pid}.py").write_text("y = 2\n" * MAX_FILE)
    more = sources(tmp_path, ["masked_softmax", "multihead_attention", "rope", "flash_attention", "attention_backward",
                              "causal_self_attention"])
    assert sum(len(t or "") for _, t, _ in more) < MAX_CODE + 500  # bounded in all
    assert more[-1] == ("causal_self_attention", None, "not shown: the report holds at most 100,000 characters of code")
    text = markdown(_fake_report(), "x", ["grade"], Extras(code=[(p, t, n) for p, (t, n) in got.items()]))
    block = text.split("### `masked_softmax`: masked_softmax.py (cut)\n\n")[1]
    fence = block.split("\n", 1)[0]
    assert fence == "`````python"  # longer than the code's own run of four
    assert block.split("\n", 1)[1].startswith(HOSTILE_CODE)


def _dom(page: Path) -> str:
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
                           "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120).stdout


SECTIONS = ["concepts", "mistakes", "time", "attempts", "code", "reproduce"]


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed: the page is not rendered in a browser here")
def test_the_html_report_in_a_headless_browser(tmp_path):
    started = datetime(2026, 11, 24, 10, 0, tzinfo=timezone.utc)
    log = {"runs": [("2026-11-24T10:05:00Z", [], ["masked_softmax"]),
                    ("2026-11-24T10:50:00Z", ["masked_softmax"], [])], "ignored": 0}
    extras = Extras(attempts=(log, {"masked_softmax": "masked_softmax"}), clock=Clock(started, 45),
                    code=[("masked_softmax", HOSTILE_CODE + "def masked_softmax(x):\n    return x\n", "masked_softmax.py")])
    page = tmp_path / "report.html"
    page.write_text(html(_fake_report(), "sub" + EVIL + ".zip", ["grade"], extras))
    dom = _dom(page)
    ids = re.findall(r'<h[23] id="([^"]+)"', dom)
    assert [i for i in ids if i in SECTIONS] == SECTIONS, ids
    assert "<script" not in dom and dom.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 3  # name, message, code
    assert "Time limit: 45 min, ran out at 2026-11-24 10:45 UTC" in dom
    assert "After time ran out (as the candidate's machine claims): 1 run(s) of the public checks; first passed " \
           "then: <code>masked_softmax</code>" in dom
    assert "first all passed at 2026-11-24T10:50:00Z (+50 min, after time ran out)" in dom


@needs_bwrap  # a candidate's code: --report grades only inside bubblewrap
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed: the page is not rendered in a browser here")
@pytest.mark.slow  # end to end, seconds each: `pytest tests -m slow`
def test_a_timed_interview_end_to_end(tmp_path):
    bundle = _export(tmp_path, "--problems", "masked,additive,luong", "--minutes", "30",
                     command=("interview", "start"))
    record = _record(bundle)
    started = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(hours=2)  # as if it began 2 hours ago
    record.write_text(json.dumps({**json.loads(record.read_text()), "started": started.strftime("%Y-%m-%dT%H:%M:%SZ")}))
    _solve(bundle, "masked_softmax", "additive_attention")
    target = bundle / "submission" / "additive_attention.py"
    target.write_text(HOSTILE_CODE + target.read_text())
    run_public(bundle)  # after time ran out, by the interviewer's clock
    manifest = bundle / "submission" / "bundle.json"  # the candidate gives themselves more time: it changes nothing
    manifest.write_text(json.dumps({**_manifest(bundle), "started": "2099-01-01T00:00:00Z", "minutes": 1000}))
    archive = _zip(bundle, tmp_path / "submission.zip")
    for name in ("r.md", "r.html"):
        r = attnkit("grade", "--impl", str(archive), "--report", str(tmp_path / name))
        assert r.returncode == 1 and "grading its 3 problem(s)" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
    md = (tmp_path / "r.md").read_text()
    assert f"- Started: {started.strftime('%Y-%m-%d %H:%M UTC')} (the interviewer's machine" in md
    assert "- Time limit: 30 min" in md and "1 run(s) of the public checks; first passed then: `masked_softmax`, " \
           "`additive_attention`" in md
    assert "## `luong_attention`: 0 / " in md and "## `rope`" not in md  # the bundle's scope only
    assert "--problems masked_softmax,additive_attention,luong_attention" in md.split("## Reproduce")[1]
    assert "`````python\n" + HOSTILE_CODE in md
    dom = _dom(tmp_path / "r.html")
    ids = re.findall(r'<h[23] id="([^"]+)"', dom)
    assert [i for i in ids if i in SECTIONS] == SECTIONS, ids
    assert {"problem-masked_softmax", "problem-additive_attention", "problem-luong_attention"} <= set(ids)
    assert "<script" not in dom and "&lt;script&gt;alert(1)&lt;/script&gt;" in dom


def test_a_log_time_that_is_no_real_time_is_said_so():
    """The attempt log's form with month 13: the candidate's data, shown as such, never a traceback."""
    from attnkit.report.attempts import clock_section
    from attnkit.report.doc import markdown as render

    clock = Clock(datetime(2026, 11, 24, 10, 0, tzinfo=timezone.utc), 30)
    log = {"runs": [("2026-13-45T99:99:99Z", ["masked_softmax"], [])], "ignored": 0}
    text = render("t", clock_section(clock, log, {"masked_softmax": "masked_softmax"}, datetime.now(timezone.utc)))
    assert "2026-13-45T99:99:99Z (not a real time; as the candidate's machine claims)" in text
