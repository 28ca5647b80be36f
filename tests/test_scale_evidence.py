"""The scale of the scores read off the learner's own results (judge/checks/scale_evidence.py), for problems the stage
trace does not follow: a FlashAttention forward that scales by 1/sqrt(dv) is told so, with the rule proved on every
wrong call (their d and dv differ); the search finds a factor only where one reproduces the results exactly."""
from __future__ import annotations

import math

from conftest import SOLUTIONS
from together import Together
from attnkit.judge.checks.scale_evidence import _fit, _rules


def test_a_forward_scaled_by_the_value_size_is_told_its_scale(tmp_path_factory):
    source = (SOLUTIONS / "flash_attention.py").read_text()
    assert "scale = d ** -0.5" in source
    runs = Together(tmp_path_factory.mktemp)
    runs.add("dv", "flash_attention", source.replace("scale = d ** -0.5", "scale = values.shape[-1] ** -0.5"))
    result = runs.report("dv").problem("flash_attention")
    assert result.status == "failed"
    shown = [line for line in result.unexplained if "queries multiplied by" in line]
    assert len(shown) == 1 and "√(d/dv)" in shown[0] and "1/√dv where the contract scales by 1/√d" in shown[0], \
        result.unexplained


def test_the_search_finds_an_exact_factor_and_nothing_where_none_fits():
    assert abs(_fit(lambda c: abs(c - 1.3) * 1e9) - 1.3) < 1e-9
    assert _fit(lambda c: 5 + abs(c - 1.3)) is None  # the error levels off above the tolerance
    assert _fit(lambda c: math.inf) is None  # the reference refuses every factor
    words = [w for w, _ in _rules({"d": 6, "dv": 5, "Tq": 7}, math.sqrt(6 / 5))]
    assert words[0] == "√(d/dv)" and words[-1] == f"{math.sqrt(6 / 5):.6g}"  # then the constant itself
    assert [w for w, _ in _rules({"d": 8}, 1 / math.sqrt(8))][0] == "1/√d"
