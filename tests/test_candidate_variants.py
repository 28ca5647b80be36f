"""A variant per candidate: `attnkit export DIR --variant NAME` and `attnkit grade --variant NAME` grade with hidden
inputs whose seed comes from NAME; the reports record it; without --variant nothing changes."""
from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import torch

from conftest import ROOT, SOLUTIONS
from attnkit.defaults import DEFAULT_SEED, variant_seed
from attnkit.judge.plan import draw
from attnkit.problems import get
from test_hiring_and_scale import attnkit


def test_a_name_gives_one_seed_and_other_names_other_inputs():
    assert variant_seed("alice-2026") == variant_seed("alice-2026") != variant_seed("bob-2026")
    assert all(0 <= variant_seed(n) < 2**31 for n in ("a", "b", "x" * 64))
    p = get("masked_softmax")
    a, b = (draw(p, variant_seed(n)) for n in ("alice-2026", "bob-2026"))
    key = next(k for k in a if k.startswith("base/"))
    assert not torch.equal(a[key].call["args"][0], b[key].call["args"][0]), "two candidates would share inputs"


def test_grading_a_variant_records_it(tmp_path):
    out, md = tmp_path / "r.json", tmp_path / "r.md"
    r = attnkit("grade", "--impl", str(SOLUTIONS), "--problems", "masked", "--variant", "alice-2026",
                "--json", str(out), "--report", str(md))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    report = json.loads(out.read_text())
    jsonschema.validate(report, json.loads((ROOT / "grader" / "report.schema.json").read_text()))
    assert report["variant"] == "alice-2026" and report["seed"] == variant_seed("alice-2026")
    text = md.read_text()
    assert f"seed {variant_seed('alice-2026')} (variant `alice-2026`)" in text
    assert "--variant alice-2026" in text and "--seed" not in text.split("## Reproduce")[1]
    plain = attnkit("grade", "--impl", str(SOLUTIONS), "--problems", "masked", "--json", str(out))
    assert plain.returncode == 0 and "variant" not in json.loads(out.read_text())  # nothing changes without it
    assert json.loads(out.read_text())["seed"] == DEFAULT_SEED


def test_bad_variant_requests_are_one_line():
    both = attnkit("grade", "--impl", str(SOLUTIONS), "--variant", "alice", "--seed", "3")
    assert both.returncode == 2 and "give --variant or --seed, not both" in both.stderr
    assert len(both.stderr.strip().splitlines()) == 1 and "Traceback" not in both.stderr
    for bad in ("", "a b", "../x", "x" * 65, "a`b"):
        r = attnkit("export", "/nonexistent/never", "--variant", bad)
        assert r.returncode == 2 and "is not a variant name" in r.stderr and "Traceback" not in r.stderr, bad


def test_export_with_a_variant_names_it_to_the_interviewer_only(tmp_path):
    plain, named = tmp_path / "plain", tmp_path / "named"
    assert attnkit("export", str(plain), "--problems", "masked").returncode == 0
    r = attnkit("export", str(named), "--problems", "masked", "--variant", "alice-2026")
    assert r.returncode == 0 and "alice" not in r.stdout.split("kept the interviewer's record")[1].split("\n", 1)[1]
    record = Path(r.stdout.split("kept the interviewer's record (problems, variant, start time) in ")[1].split()[0])
    assert json.loads(record.read_text())["variant"] == "alice-2026"  # only the interviewer's record names it
    files = sorted(p.relative_to(plain) for p in plain.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(named) for p in named.rglob("*") if p.is_file())
    for f in files:  # the candidate's copy never names the variant: with the public kit, the name gives the seed
        if f.name == "bundle.json":  # its own id and start time: never the variant
            assert "alice" not in (named / f).read_text() and "variant" not in (named / f).read_text()
        else:
            assert (plain / f).read_bytes() == (named / f).read_bytes()
