"""A problem of a new shape arrives from its own files alone: a spec, its translations, a stub and a reference.

The throwaway problem `attention_lse` returns a tuple of two tensors, (output, lse), with no weights, and takes
a causal flag instead of a mask: roles the shipped problems do not use together. The test copies the installed
package into a temporary directory, adds the spec (grader/problems/), its Chinese texts (grader/problems/zh/) and
the reference (solutions/) there and nothing else, renders the stub from the spec, and grades the stub, the reference and a one-line mistake in a
fresh interpreter that imports the copy.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import attnkit

SPEC = '''"""Spec (a test's throwaway problem): attention that also returns each row's log-sum-exp."""
import torch

from ..model.roles import Arg, Out
from ..model.spec import SCORE_BOUND, Method, Mistake, Problem

CAUSAL = "tril(Tk - Tq)"


def _inputs(cfg, gen):
    shapes = [(cfg["B"], cfg["Tq"], cfg["dq"]), (cfg["B"], cfg["Tk"], cfg["dq"]), (cfg["B"], cfg["Tk"], cfg["dv"])]
    return [torch.randn(*s, generator=gen, dtype=torch.float64) for s in shapes]


def _amplify(args, state, cfg):
    scores = args[0] @ args[1].transpose(-2, -1) / args[0].shape[-1] ** 0.5
    scale = (SCORE_BOUND / scores.abs().max()) ** 0.5
    args[0].mul_(scale)
    args[1].mul_(scale)


PROBLEM = Problem(
    id="attention_lse",
    title="Attention with its log-sum-exp",
    summary="softmax(q k^T / sqrt(d)) v and the logsumexp of each row, causal or not.",
    symbol="attention_lse",
    points={"shapes": 1, "parity_float64": 2, "parity_float32": 1, "stability": 1, "side_effects": 1},
    hints=("One", "Two", "Three"),
    methods=(Method(
        signature="def attention_lse(queries, keys, values, is_causal=False):",
        statement="output = softmax(q k^T / sqrt(d)) v over allowed keys; lse = logsumexp of each row's scaled scores.",
        args=(Arg("queries", "(B, Tq, d)", "query"), Arg("keys", "(B, Tk, d)", "key"),
              Arg("values", "(B, Tk, dv)", "value"), Arg("is_causal", "bool", "causal")),
        returns=(Out("output", "(B, Tq, dv)", "values"), Out("lse", "(B, Tq)", "lse")),
    ),),
    fit=lambda cfg, variant: {**cfg, "dk": cfg["dq"]},
    inputs=_inputs,
    options={"stability": {"amplify": _amplify}},
    mistakes=(Mistake("top_left", "causal aligned to the top left", ((CAUSAL, "tril(0)"),)),),
    track="memory",
)
'''

TRANSLATION = {"title": "t", "summary": "s", "hints": ["1", "2", "3"], "statements": ["s"],
               "mistakes": {"top_left": {"name": "n"}}}

REFERENCE = '''import torch


def attention_lse(queries, keys, values, is_causal=False):
    Tq, Tk = queries.shape[-2], keys.shape[-2]
    scores = queries @ keys.transpose(-2, -1) / queries.shape[-1] ** 0.5
    if is_causal:
        allowed = torch.ones(Tq, Tk, dtype=torch.bool, device=queries.device).tril(Tk - Tq)
        scores = scores.masked_fill(~allowed, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    safe = torch.where(torch.isfinite(lse), lse, torch.zeros_like(lse))
    return torch.exp(scores - safe[..., None]) @ values, lse
'''

GRADE = '''
import json, sys
import attnkit
from attnkit.grading import grade
from attnkit.model.stubs import render
from attnkit.problems import ORDER, get
from pathlib import Path

assert attnkit.__file__.startswith(sys.argv[1]), attnkit.__file__
problem = get("attention_lse")
out = {"order": list(ORDER)}
for name in ("stub", "reference", "mistake"):
    impl = Path(sys.argv[1]) / "impls" / name
    impl.mkdir(parents=True)
    source = (Path(attnkit.REFERENCE_DIR) / "attention_lse.py").read_text()
    if name == "stub":
        source = render(problem)
    if name == "mistake":
        old, new = problem.mistakes[0].patch[0]
        source = source.replace(old, new)
    (impl / "attention_lse.py").write_text(source)
    result = grade(impl, ["attention_lse"], sandbox=False).problems[0]
    out[name] = {"status": result.status, "score": result.score, "max": result.max_score,
                 "checks": {c.id: [c.status, c.message, c.mistake] for c in result.checks}}
print(json.dumps(out))
'''


def test_a_problem_of_a_new_shape_is_graded_from_its_own_files(tmp_path):
    package = Path(attnkit.__file__).parent
    copy = tmp_path / "attnkit"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
    if not (copy / "solutions").is_dir():  # an editable install keeps the references beside the package
        shutil.copytree(attnkit.REFERENCE_DIR, copy / "solutions", ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "problems" / "attention_lse.py").write_text(SPEC)
    (copy / "problems" / "zh" / "attention_lse.json").write_text(json.dumps(TRANSLATION))
    (copy / "solutions" / "attention_lse.py").write_text(REFERENCE)
    r = subprocess.run([sys.executable, "-c", GRADE, str(tmp_path)], capture_output=True, text=True, timeout=300,
                       cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path), "HOME": str(tmp_path)})
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])

    order = out["order"]  # discovered from its spec file, placed in its track (the last), after the transformer's
    assert "attention_lse" in order and order.index("attention_lse") > order.index("multihead_attention"), order
    assert out["stub"]["status"] == "not_started" and out["stub"]["score"] == 0
    ref = out["reference"]
    assert ref["status"] == "passed" and ref["score"] == ref["max"] == 6, ref
    bad = out["mistake"]
    assert bad["status"] == "failed" and 0 < bad["score"] < bad["max"], bad
    assert bad["checks"]["parity_float64"][0] == "failed"
    message = bad["checks"]["parity_float64"][1]
    assert "is_causal=True" in message and "lse" in message, message  # what was called, which output differs
    assert bad["checks"]["parity_float64"][2] == "top_left"  # named by reproducing the catalogued patch
