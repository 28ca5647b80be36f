"""Hiring (export, zip, interviewer's report), batches, Gradescope, GitHub Classroom, JUnit."""
from __future__ import annotations

import ast
import csv
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from xml.etree import ElementTree

import jsonschema
import pytest

from conftest import SOLUTIONS, make_impl, needs_bwrap
from attnkit import ROOT
from attnkit.diagnose.mistakes import wrong_source
from attnkit.problems import all_problems, get
from test_notebooks import solution_lines

HIDDEN_CODE = ["def check_", "valid_mask", "group_base", "mismatch(", "as_reference", "Recognised mistake",
               "draw_configs", "amplify", "SCORE_BOUND"]
GRADESCOPE_SCHEMA = {  # the fields Gradescope reads from results.json
    "type": "object", "required": ["tests"],
    "properties": {
        "score": {"type": "number"}, "output": {"type": "string"}, "stdout_visibility": {"enum": ["hidden", "visible"]},
        "visibility": {"enum": ["visible", "hidden", "after_due_date", "after_published"]},
        "tests": {"type": "array", "items": {"type": "object", "required": ["name", "score", "max_score"],
                                             "properties": {"name": {"type": "string"}, "score": {"type": "number"},
                                                            "max_score": {"type": "number"},
                                                            "status": {"enum": ["passed", "failed"]},
                                                            "output": {"type": "string"},
                                                            "visibility": {"enum": ["visible", "hidden", "after_due_date",
                                                                                    "after_published"]}}}},
    },
}


def attnkit(*args, cwd=ROOT, env=None):
    return subprocess.run([sys.executable, "-m", "attnkit.fronts.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env=env)


def zip_dir(folder: Path, archive: Path, prefix: str = "") -> Path:
    with zipfile.ZipFile(archive, "w") as z:
        for f in sorted(folder.glob("*.py")):
            z.write(f, f"{prefix}{f.name}")
    return archive


def test_export_bundle_has_no_solution_and_no_hidden_check(tmp_path):
    r = attnkit("export", str(tmp_path / "bundle"))
    assert r.returncode == 0, r.stderr
    files = {p: p.read_text() for p in (tmp_path / "bundle").rglob("*") if p.is_file()}
    names = {str(p.relative_to(tmp_path / "bundle")) for p in files}
    assert names == {"README.md", "test_public.py", "conftest.py", "pytest.ini", "submission/__init__.py",
                     "submission/bundle.json", *(f"submission/{p.id}.py" for p in all_problems())}
    text = "\n".join(files.values())
    for p in all_problems():
        for line in solution_lines(p.id):
            assert line not in text, line
        for m in p.mistakes:  # the catalogue (how wrong variants are made) is hidden too
            assert all(new not in text for _, new in m.patch if len(new) > 25), m.id
    for needle in HIDDEN_CODE:
        assert needle not in text, needle
    tree = ast.parse(files[tmp_path / "bundle" / "test_public.py"])
    imported = {n.names[0].name.split(".")[0] for n in tree.body if isinstance(n, ast.Import)}
    imported |= {n.module.split(".")[0] for n in tree.body if isinstance(n, ast.ImportFrom)}
    assert imported <= {"importlib", "pathlib", "traceback", "pytest", "torch"}, imported  # torch, pytest: all it needs


def run_public(bundle: Path):
    """The candidate's command, with attnkit's own pytest plugin switched off."""
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:attnkit", "-p", "no:cacheprovider",
                           "test_public.py"], cwd=bundle, capture_output=True, text=True, timeout=300)


def test_public_checks_fail_on_stubs_and_pass_on_solutions(tmp_path):
    bundle = tmp_path / "bundle"
    assert attnkit("export", str(bundle), "--problems", "masked,additive").returncode == 0
    stubs = run_public(bundle)
    assert stubs.returncode == 1 and "masked_softmax      not started: it raises NotImplementedError" in stubs.stdout
    for pid in ("masked_softmax", "additive_attention"):
        (bundle / "submission" / f"{pid}.py").write_text((SOLUTIONS / f"{pid}.py").read_text())
    assert run_public(bundle).returncode == 0


@pytest.mark.parametrize("args,expected", [
    (["export", "{tmp}/b", "--problems", "additive"], "needs masked_softmax: add it"),
    (["export", "{tmp}/b", "--problems", "nope"], "unknown problem 'nope'"),
    (["export", "{root}"], "exists and is not empty"),
])
def test_export_bad_input(tmp_path, args, expected):
    r = attnkit(*[a.format(tmp=tmp_path, root=ROOT) for a in args])
    assert r.returncode == 2 and expected in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_zip_submission_and_interviewers_report(tmp_path):
    p = get("luong_attention")
    wrong = wrong_source(p, next(m for m in p.mistakes if m.id == "scale_by_d"))
    folder = make_impl(tmp_path / "cand", {"luong_attention.py": wrong})
    archive = zip_dir(folder, tmp_path / "submission.zip", prefix="submission/")
    report = tmp_path / "report.md"
    r = attnkit("grade", "--impl", str(archive), "--report", str(report), "--seed", "7")
    assert r.returncode == 1, r.stderr
    md = report.read_text()
    assert "| `luong_attention` | failed |" in md and "**scale_by_d**" in md
    assert "attnkit grade --impl" in md and "--seed 7" in md and "submission.zip" in md
    again = attnkit("grade", "--impl", str(archive), "--json", str(tmp_path / "r.json"), "--seed", "7")
    assert json.loads((tmp_path / "r.json").read_text())["score"] == float(md.split("**")[1].split(" / ")[0])
    assert again.returncode == 1


@pytest.mark.parametrize("member,expected", [
    ("../escape.py", "would land outside the submission"),
    ("/abs.py", "would land outside the submission"),
])
def test_unsafe_zips_are_refused(tmp_path, member, expected):
    archive = tmp_path / "bad.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr(member, "x = 1")
    r = attnkit("grade", "--impl", str(archive))
    assert r.returncode == 2 and expected in r.stderr and "Traceback" not in r.stderr


def test_zip_bomb_is_refused(tmp_path):
    archive = tmp_path / "bomb.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("masked_softmax.py", "#" * (60 << 20))
    r = attnkit("grade", "--impl", str(archive))
    assert r.returncode == 2 and "MB when unpacked" in r.stderr


@needs_bwrap  # students' and candidates' code: these commands refuse to grade without bubblewrap
def test_batch_grades_everything_resumes_and_survives_bad_submissions(tmp_path):
    subs = tmp_path / "subs"
    make_impl(subs / "good")
    make_impl(subs / "stub", {f"{p.id}.py": "raise NotImplementedError\n" for p in all_problems()}, base=None)
    make_impl(subs / "hang", {"additive_attention.py": "while True:\n    pass\n"})
    zip_dir(SOLUTIONS, subs / "zipped.zip")
    (subs / "broken.zip").write_text("not a zip")
    (subs / "notes.txt").write_text("ignored")
    out = tmp_path / "results"
    # three problems are enough to show every case (the hang is in additive_attention), at a quarter of the cost
    chosen = ("masked_softmax", "additive_attention", "luong_attention")
    r = attnkit("grade-batch", str(subs), "--out", str(out), "--timeout", "5", "--problems", ",".join(chosen))
    assert r.returncode == 0, r.stderr
    rows = {row["submission"]: row for row in csv.DictReader((out / "grades.csv").open())}
    full = str(sum(v for p in map(get, chosen) for k, v in p.points.items() if not k.startswith("cuda")))
    assert rows["good"]["total"] == rows["zipped.zip"]["total"] == full, rows
    assert rows["stub"]["total"] == "0" and rows["hang"]["additive_attention"] == "0", rows
    assert rows["hang"]["luong_attention"] == "18", rows
    assert "not a valid zip" in rows["broken.zip"]["error"] and "notes" not in rows and "notes.txt" not in rows
    assert json.loads((out / "good.json").read_text())["score"] == float(full)
    before = (out / "good.json").stat().st_mtime_ns
    again = attnkit("grade-batch", str(subs), "--out", str(out), "--problems", ",".join(chosen))
    assert again.returncode == 0 and (out / "good.json").stat().st_mtime_ns == before  # skipped, not regraded
    forced = attnkit("grade-batch", str(subs), "--out", str(out), "--force", "--timeout", "5", "--problems", ",".join(chosen))
    assert forced.returncode == 0 and (out / "good.json").stat().st_mtime_ns != before


@needs_bwrap  # students' and candidates' code: these commands refuse to grade without bubblewrap
def test_batch_never_merges_or_loses_a_submission(tmp_path):
    """alice/ and alice.zip; `a b/`, a_b/ and a folder named as `a b`'s results are named (a_b-<its hash>): each keeps
    its own result; a zip with a bad CRC, an unknown compression or a directory/file clash is an error row; the batch goes
    on."""
    subs = tmp_path / "subs"
    import hashlib

    lookalike = "a_b-" + hashlib.sha256(b"a b").hexdigest()[:10]  # named as the grader names `a b`'s results
    for name in ("alice", "a b", "a_b", lookalike):
        make_impl(subs / name, {f"{p.id}.py": "raise NotImplementedError\n" for p in all_problems()}, base=None)
    zip_dir(SOLUTIONS, subs / "alice.zip")
    bad_crc = subs / "crc.zip"
    zip_dir(SOLUTIONS, bad_crc)
    data = bytearray(bad_crc.read_bytes())
    at = data.find(b"import torch")  # flip a byte inside the first stored file's compressed data
    data[at + 3 if at >= 0 else 60] ^= 0xFF
    bad_crc.write_bytes(bytes(data))
    with zipfile.ZipFile(subs / "clash.zip", "w") as z:
        z.writestr("helpers", "a file")
        z.writestr("helpers/x.py", "X = 1\n")
    odd = subs / "odd.zip"
    with zipfile.ZipFile(odd, "w") as z:
        z.writestr("masked_softmax.py", "x = 1\n")
    raw = bytearray(odd.read_bytes())
    for sig in (b"PK\x03\x04", b"PK\x01\x02"):  # compression method 99 (AES) in both headers
        at = raw.find(sig)
        offset = 8 if sig == b"PK\x03\x04" else 10
        raw[at + offset:at + offset + 2] = (99).to_bytes(2, "little")
    odd.write_bytes(bytes(raw))
    out = tmp_path / "out"
    r = attnkit("grade-batch", str(subs), "--out", str(out), "--timeout", "5", "--problems", "masked")
    assert r.returncode == 0, r.stderr[-2000:]
    rows = {row["submission"]: row for row in csv.DictReader((out / "grades.csv").open())}
    assert len(rows) == 8, sorted(rows)
    assert rows["alice.zip"]["total"] == "14" and rows["alice"]["total"] == "0"
    spaced = [n for n in rows if n.startswith("a_b-")]
    assert len(spaced) == 2 and rows["a_b"]["total"] == "0" and all(rows[n]["total"] == "0" for n in spaced)
    assert len(list(out.glob("a_b-*.json"))) == 2
    for bad in ("clash.zip", "odd.zip"):
        assert rows[bad]["error"] or rows[bad]["total"] == "0", (bad, rows[bad])
    assert rows["crc.zip"]["error"] or rows["crc.zip"]["total"] != "14"
    assert "Traceback" not in r.stdout + r.stderr


@needs_bwrap  # students' and candidates' code: these commands refuse to grade without bubblewrap
def test_batch_of_nothing_is_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    r = attnkit("grade-batch", str(tmp_path / "empty"), "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "no submissions" in r.stderr and len(r.stderr.strip().splitlines()) == 1


@needs_bwrap  # students' and candidates' code: these commands refuse to grade without bubblewrap
def test_gradescope_autograder_runs_and_writes_valid_results(tmp_path):
    assert attnkit("gradescope", "build", str(tmp_path / "autograder.zip")).returncode == 0
    with zipfile.ZipFile(tmp_path / "autograder.zip") as z:
        z.extractall(tmp_path / "source")
        names = z.namelist()
    assert {"setup.sh", "run_autograder", "attnkit/solutions/masked_softmax.py", "attnkit/grader/grading.py"} <= set(names)
    root = tmp_path / "autograder"
    p = get("additive_attention")
    make_impl(root / "submission" / "uploaded", {"additive_attention.py": wrong_source(p, p.mistakes[0])})
    env = dict(os.environ, AUTOGRADER_ROOT=str(root), PYTHON=sys.executable)
    r = subprocess.run(["bash", str(tmp_path / "source" / "run_autograder")], env=env, capture_output=True, text=True,
                       timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    results = json.loads((root / "results" / "results.json").read_text())
    jsonschema.validate(results, GRADESCOPE_SCHEMA)
    failed = [t for t in results["tests"] if t["status"] == "failed"]
    assert failed and all(t["name"].startswith("additive_attention") for t in failed)
    assert results["score"] == sum(t["score"] for t in results["tests"])
    leaks = [t for t in results["tests"] if "called " in t["output"] or "expected" in t["output"]]
    assert leaks == [], leaks[:2]  # no inputs
    assert any(f"Recognised mistake [{p.mistakes[0].id}]" in t["output"] for t in failed)


@needs_bwrap  # students' and candidates' code: these commands refuse to grade without bubblewrap
def test_gradescope_empty_submission_still_gets_results(tmp_path):
    (tmp_path / "submission").mkdir()
    r = attnkit("gradescope", "run", "--root", str(tmp_path))
    results = json.loads((tmp_path / "results" / "results.json").read_text())
    assert r.returncode == 0 and results["score"] == 0 and "Upload the problem files" in results["output"]


def test_gradescope_visibility_reaches_results_json(tmp_path, monkeypatch):
    """--visibility is written into the autograder's copy of the kit and from there into results.json, for the whole
    result and each test; a spec's field visibility overrides it for its check; without it, nothing changes."""
    import dataclasses

    from attnkit import problems
    from attnkit.integrations import gradescope
    from attnkit.results import CheckResult, ProblemResult, Report

    assert attnkit("gradescope", "build", str(tmp_path / "a.zip"), "--visibility", "after_due_date").returncode == 0
    with zipfile.ZipFile(tmp_path / "a.zip") as z:
        assert json.loads(z.read("attnkit/gradescope.json")) == {"visibility": "after_due_date"}
    bad = attnkit("gradescope", "build", str(tmp_path / "b.zip"), "--visibility", "later")
    assert bad.returncode == 2 and "invalid choice: 'later'" in bad.stderr and not (tmp_path / "b.zip").exists()
    checks = [CheckResult("masking", "masking", "passed", 2, 2, ""), CheckResult("memory", "memory", "failed", 0, 3, "x")]
    report = Report(impl="x", seed=0, score=2, max_score=5, devices={"cpu": True, "cuda": False}, sandbox="process",
                    problems=[ProblemResult("chunked_additive_attention", "t", "failed", 2, 5, checks)])
    real = problems.get
    monkeypatch.setattr(problems, "get", lambda pid: dataclasses.replace(real(pid), visibility={"memory": "hidden"}))
    data = gradescope.results(report, "after_due_date")
    jsonschema.validate(data, GRADESCOPE_SCHEMA)
    assert data["visibility"] == "after_due_date"
    assert [t["visibility"] for t in data["tests"]] == ["after_due_date", "hidden"]
    monkeypatch.setattr(problems, "get", real)
    plain = gradescope.results(report)
    assert "visibility" not in plain and [t["visibility"] for t in plain["tests"]] == ["visible", "visible"]
    monkeypatch.setattr(gradescope, "ROOT", tmp_path)  # the autograder's copy of the kit
    (tmp_path / "gradescope.json").write_text('{"visibility": "after_published"}')
    assert gradescope.settings() == {"visibility": "after_published"}
    (tmp_path / "gradescope.json").write_text('{"visibility": "everyone"}')
    assert gradescope.settings() == {}


def test_junit_xml_has_one_case_per_check_with_points(tmp_path):
    r = attnkit("grade", "--impl", str(SOLUTIONS), "--junit", str(tmp_path / "j.xml"))
    assert r.returncode == 0
    cases = ElementTree.parse(tmp_path / "j.xml").getroot().iter("testcase")
    points = {c.get("name"): c.find("properties/property[@name='points']").get("value") for c in cases}
    assert points["parity_float64"] and len(points) >= 10


@needs_bwrap  # students' and candidates' code: these commands refuse to grade without bubblewrap
def test_a_partial_bundle_is_graded_on_its_own_problems(tmp_path):
    bundle = tmp_path / "bundle"
    assert attnkit("export", str(bundle), "--problems", "masked,additive").returncode == 0
    for pid in ("masked_softmax", "additive_attention"):
        (bundle / "submission" / f"{pid}.py").write_text((SOLUTIONS / f"{pid}.py").read_text())
    archive = tmp_path / "submission.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for f in (bundle / "submission").glob("*.py"):
            z.write(f, f"submission/{f.name}")
    r = attnkit("grade", "--impl", str(archive), "--problems", "masked,additive", "--json", str(tmp_path / "r.json"),
                "--report", str(tmp_path / "r.md"))
    assert r.returncode == 0, r.stdout[-2000:]
    report = json.loads((tmp_path / "r.json").read_text())
    assert [p["id"] for p in report["problems"]] == ["masked_softmax", "additive_attention"]
    assert report["score"] == report["max_score"] > 0
    assert "--problems masked,additive" in (tmp_path / "r.md").read_text()
    batch = attnkit("grade-batch", str(tmp_path / "bundle"), "--out", str(tmp_path / "out"), "--problems", "nope")
    assert batch.returncode == 2 and "unknown problem 'nope'" in batch.stderr
