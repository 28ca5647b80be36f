"""ALiBi and linear attention (sections 18 and 21): their draws reach what the contract singles out, the references
agree with the papers' own formulas and with each other's forms, and the checks that read a file's other function
(alibi_slopes, linear_attention_step) and the memory of the chunked form can fail."""
from __future__ import annotations

import importlib.util

import pytest
import torch

from attnkit.defaults import DEFAULT_SEED
from attnkit.judge.plan import draw
from attnkit.masks import rule
from attnkit.problems import get
from attnkit.problems.alibi_attention import SLOPE_COUNTS, paper_slopes
from attnkit.report.feedback import problem_text
from conftest import SOLUTIONS, grade_shared, make_impl


def _reference(pid):
    spec = importlib.util.spec_from_file_location(f"ref_{pid}", SOLUTIONS / f"{pid}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _calls(pid):
    return [c for c in draw(get(pid), DEFAULT_SEED).values() if not c.must_raise]


def _failing(tmp_path, pid, source):
    report = grade_shared(make_impl(tmp_path, {f"{pid}.py": source}), [pid])
    assert report.grader_errors == 0
    return {c.id: c for c in report.problem(pid).checks if c.status == "failed"}


@pytest.mark.parametrize("n", SLOPE_COUNTS + (7, 9, 10, 11, 13, 14, 15, 48, 100))
def test_the_reference_slopes_are_the_paper_s(n):
    """The paper's get_slopes (a ratio sequence, written in the spec independently of the reference) for powers of two
    and every other count; n = 8 gives 1/2 ... 1/256 exactly."""
    got = _reference("alibi_attention").alibi_slopes(n)
    assert got.shape == (n,) and got.dtype == torch.float64
    assert torch.allclose(got, torch.tensor(paper_slopes(n), dtype=torch.float64), rtol=1e-13, atol=0)
    if n == 8:
        assert got.tolist() == [2.0 ** -k for k in range(1, 9)]


def test_alibi_draws_reach_both_modes_given_slopes_empty_rows_and_odd_head_counts():
    seen = set()
    for case in _calls("alibi_attention"):
        args = case.call["args"]
        if len(args) != 6 or not isinstance(args[0], torch.Tensor):
            continue
        q, k, _, causal, slopes, mask = args
        H, Tq, Tk = q.shape[1], q.shape[2], k.shape[2]
        seen.add("causal" if causal else "not causal")
        seen |= {"given slopes"} if slopes is not None else {"default slopes, H = %d" % H}
        seen |= {"Tq > Tk"} if Tq > Tk else set()
        allowed = rule(get("alibi_attention")).allowed(get("alibi_attention"), case.cfg, mask, case.call)
        seen |= {"a row with no allowed key"} if not allowed.expand(q.shape[0], H, Tq, Tk).any(-1).all() else set()
        seen |= {"a mask"} if mask is not None else set()
        assert slopes is not None or H <= 8  # float32 default slopes are exact up to 8 heads (docs/contract.md)
    assert {"causal", "not causal", "given slopes", "default slopes, H = 6", "Tq > Tk", "a row with no allowed key",
            "a mask"} <= seen, seen


def test_the_flagged_mask_is_the_mask_and_the_causal_rule():
    p = get("alibi_attention")
    cfg = {"B": 1, "H": 1, "Tq": 2, "Tk": 4, "lead": ["B", "H"], "dq": 3, "dv": 3}
    mask = torch.tensor([True, False, True, True])
    args = lambda causal: [None, None, None, causal, None, mask]  # noqa: E731
    causal = rule(p).allowed(p, cfg, mask, {"args": args(True)}).reshape(2, 4)
    assert causal.tolist() == [[True, False, True, False], [True, False, True, True]]
    assert rule(p).allowed(p, cfg, mask, {"args": args(False)}).reshape(-1, 4)[0].tolist() == mask.tolist()
    assert rule(p).allowed(p, cfg, None, None).reshape(2, 4).tolist() == [[True] * 3 + [False], [True] * 4]  # default


def test_a_bloom_bias_is_accepted_and_a_row_dependent_one_is_not(tmp_path):
    """BLOOM's slope * j differs from -slope * |pos(i) - j| by a constant per row under the causal rule: the same
    softmax, full marks. Without the causal rule it is another bias (the later keys favoured), and fails."""
    source = (SOLUTIONS / "alibi_attention.py").read_text()
    bloom = source.replace("scores = scores - slopes[:, None, None] * distance",
                           "scores = scores + slopes[:, None, None] * j.to(scores.dtype) if is_causal else "
                           "scores - slopes[:, None, None] * distance")
    assert bloom != source and _failing(tmp_path / "bloom", "alibi_attention", bloom) == {}
    everywhere = source.replace("scores = scores - slopes[:, None, None] * distance",
                                "scores = scores + slopes[:, None, None] * j.to(scores.dtype)")
    assert "parity_float64" in _failing(tmp_path / "everywhere", "alibi_attention", everywhere)


def test_slopes_wrong_only_beyond_the_drawn_heads_fail_the_companion_check(tmp_path):
    """A slope rule that is right up to 8 heads (all the attention calls draw) and wrong above is caught by the calls of
    alibi_slopes itself (12, 20, 24, 80 heads)."""
    source = (SOLUTIONS / "alibi_attention.py").read_text()
    wrong = source.replace("    c = 1 << (num_heads.bit_length() - 1)  # the largest power of two <= num_heads\n",
                           "    c = 1 << (num_heads.bit_length() - 1)  # the largest power of two <= num_heads\n"
                           "    if num_heads > 8:\n        return torch.tensor(geometric(num_heads), dtype=torch.float64)\n")
    assert wrong != source
    failing = _failing(tmp_path, "alibi_attention", wrong)
    assert set(failing) == {"companion"} and "alibi_slopes(" in failing["companion"].message


def test_the_three_forms_of_the_reference_agree():
    ref = _reference("linear_attention")
    g = torch.Generator().manual_seed(0)
    q, k = (torch.randn(2, 3, 11, 4, generator=g, dtype=torch.float64) * 2 for _ in range(2))
    v = torch.randn(2, 3, 11, 5, generator=g, dtype=torch.float64)
    whole = ref.causal_linear_attention(q, k, v)
    for c in (1, 2, 3, 4, 11, 12):
        assert torch.allclose(ref.causal_linear_attention(q, k, v, c), whole, rtol=1e-12, atol=1e-12)
    state, outs = None, []
    for t in range(11):
        out, state = ref.linear_attention_step(q[:, :, t], k[:, :, t], v[:, :, t], state)
        outs.append(out)
    assert torch.allclose(torch.stack(outs, 2), whole, rtol=1e-12, atol=1e-12)
    phi = torch.nn.functional.elu(k) + 1
    assert torch.allclose(state[0], phi.transpose(-2, -1) @ v) and torch.allclose(state[1], phi.sum(2))


def test_linear_draws_reach_partial_chunks_the_default_and_the_feature_range():
    seen = set()
    for case in _calls("linear_attention"):
        args = case.call.get("args") or [None]
        if not isinstance(args[0], torch.Tensor) or args[0].dim() != 4 or case.group == "companion":
            continue
        T = args[0].shape[2]
        chunk = args[3] if len(args) > 3 else None
        seen.add("chunk_size None" if chunk is None else "chunk_size 1" if chunk == 1 else "chunk_size > 1")
        seen |= {"a partial last chunk"} if chunk and T % chunk and chunk < T else set()
        q = args[0].to(torch.float64)
        assert q.min() >= -8 and q.max() <= 1e4, case.key  # the contract's range of features
        seen |= {"features near -8"} if q.min() < -7 else set()
        seen |= {"features near 1e4"} if q.max() > 5e3 else set()
    assert {"chunk_size None", "chunk_size 1", "chunk_size > 1", "a partial last chunk", "features near -8",
            "features near 1e4"} <= seen, seen


def test_linear_memory_calls_keep_the_contract_s_conditions():
    cases = [c for c in _calls("linear_attention") if c.group == "memory"]
    assert len(cases) >= 2
    for case in cases:
        q, _, v, C = case.call["args"]
        B, H, T, d = q.shape
        dv, L = v.shape[-1], B * H
        assert T >= 8 * C and T > max(d, dv) and min(d, dv) >= 2, case.key
        assert L * T * T > case.meta["allowed"]  # the (T, T) products break it
        assert L * T * d * dv > case.meta["allowed"]  # and so does a cumulative sum of every outer product
    assert any(T % c.call["args"][3] for c in cases)  # a partial last chunk is measured

def test_an_epsilon_of_any_size_fails_and_is_named(tmp_path):
    """1e-12, not the catalogued 1e-6: the rows come back shrunk by one factor each, which names the mistake."""
def test_an_epsilon_fails_and_the_message_says_why(tmp_path):
    source = (SOLUTIONS / "linear_attention.py").read_text()
    wrong = source.replace("outs.append(num / den)", "outs.append(num / (den + 1e-12))")
    report = grade_shared(make_impl(tmp_path, {"linear_attention.py": wrong}), ["linear_attention"])
    failing = {c.id: c for c in report.problem("linear_attention").checks if c.status == "failed"}
    assert "parity_float64" in failing and {c.mistake for c in failing.values()} == {"epsilon"}, failing
    assert "no epsilon" in problem_text(report.problem("linear_attention"))  # its explanation and hint, said once


def test_a_step_that_changes_the_given_state_fails_naming_it(tmp_path):
    source = (SOLUTIONS / "linear_attention.py").read_text()
    wrong = source.replace("    z = z + k\n", "    z += k\n")
    failing = _failing(tmp_path, "linear_attention", wrong)
    assert "companion" in failing and "`state`" in failing["companion"].message, failing


def test_a_fixed_chunk_size_fails_the_memory_check(tmp_path):
    """chunk_size ignored for a chunk of 32 of its own: within the bound only where the inputs' size dominates it, which
    the memory calls' dims (T = 64, dv = 10: (4C)^2 > T*dv for C = 8) do not let happen."""
    source = (SOLUTIONS / "linear_attention.py").read_text()
    wrong = source.replace("C = chunk_size or max(T, 1)", "C = 32 if chunk_size else max(T, 1)")
    assert wrong != source and set(_failing(tmp_path, "linear_attention", wrong)) == {"memory"}


def test_given_slopes_of_another_dtype_are_used_in_the_inputs_dtype(tmp_path):
    """float32 inputs with float64 slopes: slopes not cast to the inputs' dtype raise, or promote the scores, and fail."""
    source = (SOLUTIONS / "alibi_attention.py").read_text()
    wrong = source.replace("slopes = slopes.to(dtype=queries.dtype, device=queries.device)", "slopes = slopes")
    assert wrong != source
    failing = _failing(tmp_path, "alibi_attention", wrong)
    assert "companion" in failing and "float32" in failing["companion"].message


def test_self_attention_without_a_mask_is_called_both_ways():
    """The drawn configs rarely give Tq = Tk > 1 with no mask: the companion calls make sure of both modes there."""
    calls = [c.call["args"] for c in draw(get("alibi_attention"), DEFAULT_SEED).values()
             if c.group == "companion" and c.call.get("symbol") is None]
    square = [a for a in calls if a[0].shape[-2] == a[1].shape[-2] > 1 and (len(a) < 6 or a[5] is None)]
    assert {len(a) > 3 and a[3] is False for a in square} == {True, False}


def test_given_slopes_need_no_gradient(tmp_path):
    """slopes are a setting passed as a tensor: code that reads them as numbers (no gradient reaches them) is right."""
    source = (SOLUTIONS / "alibi_attention.py").read_text()
    numbers = source.replace("slopes = slopes.to(dtype=queries.dtype, device=queries.device)",
                             "slopes = torch.tensor(slopes.tolist(), dtype=queries.dtype, device=queries.device)")
    assert numbers != source and _failing(tmp_path, "alibi_attention", numbers) == {}


def test_a_fill_far_enough_below_in_float32_only_fails_the_float64_split_calls(tmp_path):
    """-1e4 for float64 scores (the dtype's own minimum otherwise): the split calls, valid scores near -1e4 beside masked
    ones near +1e4, run in float64 too."""
    source = (SOLUTIONS / "alibi_attention.py").read_text()
    wrong = source.replace("filled = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)",
                           "filled = scores.masked_fill(~mask, -1e4 if scores.dtype == torch.float64 else "
                           "torch.finfo(scores.dtype).min)")
    assert wrong.count("-1e4") == 1
    assert set(_failing(tmp_path, "alibi_attention", wrong)) == {"stability"}
