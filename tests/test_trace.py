"""The stage trace (run/hooks/trace.py, diagnose/align.py, diagnose/trace.py): fingerprints that ignore layout, an
alignment that finds where a learner's computation departs, and findings that come from the learner's own tensors
for code written in any style. Each finding here is broken on purpose and found; a passing problem gets none."""
from __future__ import annotations

from pathlib import Path

import torch
from hypothesis import given, settings, strategies as st

from conftest import make_impl
from strategies import tensors
from attnkit.diagnose.align import Trace, align
from attnkit.grading import grade
from attnkit.run.hooks.trace import Recorder, fingerprint


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 3), st.integers(1, 4), st.integers(1, 5), st.integers(1, 3), st.data())
def test_a_fingerprint_ignores_layout_and_repetition(b, h, t, r, data):
    x = data.draw(tensors((b, h, t, 4)))
    same = [x.transpose(1, 2), x.reshape(b * h, t, 4), x.permute(3, 0, 2, 1).contiguous(), x.repeat(r, 1, 1, 1),
            x.unsqueeze(2).expand(b, h, r, t, 4)]
    for y in same:  # the order statistics exactly, the means up to the order of summation
        a, b = fingerprint(y), fingerprint(x)
        assert torch.equal(a[10:], b[10:]) and torch.equal(a[1:7], b[1:7])
        assert torch.allclose(a[7:10], b[7:10], rtol=1e-13, atol=1e-13)
    if x.numel() > 1 and x.abs().max() > 0:
        changed = x.clone()
        changed.view(-1)[0] += 1e-6 * x.abs().max()
        assert not torch.equal(fingerprint(changed), fingerprint(x))


def _trace(fn, *args) -> Trace:
    with Recorder(600) as rec:
        fn(*args)
    return Trace(torch.stack(rec.prints), torch.tensor(rec.metas), rec.ops, rec.parents)


def _reference(q, k, v):
    return torch.softmax(q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5, dim=-1) @ v


def test_alignment_localises_a_left_out_step_float32_rounding_and_a_wrong_axis():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 5, 4, generator=g, dtype=torch.float64) for _ in range(3))
    ref = _trace(_reference, q, k, v)
    assert align(ref, _trace(lambda q, k, v: torch.einsum("bqk,bkd->bqd", torch.softmax(
        torch.einsum("bqd,bkd->bqk", q, k) * q.shape[-1] ** -0.5, -1), v), q, k, v)) is None  # another style, right

    unscaled = align(ref, _trace(lambda q, k, v: torch.softmax(q @ k.transpose(-1, -2), -1) @ v, q, k, v))
    assert "div" in ref.ops[unscaled.departure] and unscaled.skipped is not None

    rounded = align(ref, _trace(lambda q, k, v: torch.softmax((q @ k.transpose(-1, -2) / 2).float(), -1).double() @ v,
                                q, k, v))
    assert rounded.rounding and "softmax" in ref.ops[rounded.departure]

    axis = align(ref, _trace(lambda q, k, v: torch.softmax(q @ k.transpose(-1, -2) / 2, 1) @ v, q, k, v))
    assert "softmax" in ref.ops[axis.departure] and axis.arranged


def _additive(q, k, v, w_v, extra=None):
    scores = torch.tanh(q.unsqueeze(2) + k.unsqueeze(1)) @ w_v
    return torch.softmax(scores if extra is None else extra(scores), dim=-1) @ v


def test_alignment_names_a_step_of_the_learner_s_own_between_two_reference_stages():
    """Scores divided by a constant the reference never uses (the Transformer's scaling borrowed into additive
    attention): the departure is the softmax, made by the learner from a step of its own applied to the right scores,
    and what that step did (times 1/sqrt 2) is read off the learner's tensor. A softmax of the right scores, a softmax
    of a masked copy (a fill is the implementation's choice) and a left-out step are not called that."""
    from attnkit.diagnose.trace import _how

    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(2, 5, 3, generator=g, dtype=torch.float64), torch.randn(2, 7, 3, generator=g, dtype=torch.float64)
    v, w_v = torch.randn(2, 7, 4, generator=g, dtype=torch.float64), torch.randn(3, generator=g, dtype=torch.float64)
    ref = _trace(_additive, q, k, v, w_v)
    assert align(ref, _trace(_additive, q, k, v, w_v, lambda s: s.clone())) is None
    found = align(ref, _trace(_additive, q, k, v, w_v, lambda s: s / 2 ** 0.5))
    got = _trace(_additive, q, k, v, w_v, lambda s: s / 2 ** 0.5)
    assert found.inserted is not None and "softmax" in ref.ops[found.departure]
    p, m, k_ = found.inserted
    assert "div" in got.ops[m] and "softmax" in got.ops[k_] and "(= 1/√2)" in _how(ref.prints[p], got.prints[m])
    tripled_trace = _trace(_additive, q, k, v, w_v, lambda s: s * 3)
    tripled = align(ref, tripled_trace)
    assert tripled.inserted is not None
    assert "times 3" in _how(ref.prints[tripled.inserted[0]], tripled_trace.prints[tripled.inserted[1]])
    unscaled = align(_trace(_reference, q, q, q), _trace(lambda q, k, v: torch.softmax(q @ k.transpose(-1, -2), -1) @ v,
                                                         q, q, q))
    assert unscaled.skipped is not None and unscaled.inserted is None


def _softmax_by_hand(s):
    e = torch.exp(s.masked_fill(torch.zeros_like(s, dtype=torch.bool), float("-inf")) - s.amax(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True)


def test_a_step_of_the_learner_s_own_is_named_where_its_softmax_is_written_by_hand():
    """The same extra scaling before a softmax the learner writes itself (a fill, exp, sum, divide: no operator the
    reference's softmax is): the scaled scores are where its computation first departs (nothing computed from them
    equals a reference stage), said with the factor read off. A hand-written softmax of the right scores is right, and
    a step after the softmax is named there (applied to the weights), not before it."""
    from attnkit.diagnose.trace import _how

    g = torch.Generator().manual_seed(2)
    q, k = torch.randn(2, 5, 3, generator=g, dtype=torch.float64), torch.randn(2, 7, 3, generator=g, dtype=torch.float64)
    v, w_v = torch.randn(2, 7, 4, generator=g, dtype=torch.float64), torch.randn(3, generator=g, dtype=torch.float64)

    def by_hand(q, k, v, w_v, extra=lambda s: s, after=lambda w: w):
        return after(_softmax_by_hand(extra(torch.tanh(q.unsqueeze(2) + k.unsqueeze(1)) @ w_v))) @ v

    ref = _trace(_additive, q, k, v, w_v)
    assert align(ref, _trace(by_hand, q, k, v, w_v)) is None
    got = _trace(by_hand, q, k, v, w_v, lambda s: s / 2 ** 0.5)
    found = align(ref, got)
    assert found.inserted is not None
    p, m, k_ = found.inserted
    assert "div" in got.ops[m] and "masked_fill" in got.ops[k_] and "(= 1/√2)" in _how(ref.prints[p], got.prints[m])
    late_trace = _trace(by_hand, q, k, v, w_v, lambda s: s, lambda w: w * 0.5)
    late = align(ref, late_trace)
    assert "softmax" in ref.ops[late.inserted[0]] and "mul(0.5)" in late_trace.ops[late.inserted[1]]

    def exp2_softmax(s):  # the exp2 form (scores times log2 e), with a wrong denominator after it
        e = torch.exp2(s * 1.4426950408889634 - (s * 1.4426950408889634).amax(-1, keepdim=True))
        return e / (e.sum(-1, keepdim=True) + 1e-3)

    base2_trace = _trace(lambda q, k, v, w_v: exp2_softmax(torch.tanh(q.unsqueeze(2) + k.unsqueeze(1)) @ w_v) @ v,
                         q, k, v, w_v)
    base2 = align(ref, base2_trace)
    assert base2 is not None and (base2.inserted is None or "1.44" not in base2_trace.ops[base2.inserted[1]])


def test_a_malformed_trace_from_a_worker_is_refused():
    good = {"prints": torch.zeros(1, 27, dtype=torch.float64), "metas": torch.zeros(1, 8, dtype=torch.int64),
            "ops": ["aten.mm()"], "parents": [[-1]]}
    assert Trace.decode(good) is not None
    huge = {"prints": torch.zeros(5000, 27, dtype=torch.float64), "metas": torch.zeros(5000, 8, dtype=torch.int64),
            "ops": ["aten.mm()"] * 5000, "parents": [[-1]] * 5000}  # a hostile worker's flood: refused, not aligned
    for bad in (huge, {**good, "parents": [[0]]}, {**good, "ops": [3]}, {**good, "prints": torch.zeros(2, 27)},
                {**good, "metas": torch.zeros(1, 8)}, {"prints": None}):
        assert Trace.decode(bad) is None


UNSCALED_MHA = '''
import math
import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, bias=True, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError("embed_dim must be divisible by num_heads")
        self.h, self.d = num_heads, embed_dim // num_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(embed_dim, embed_dim, bias=bias) for _ in range(4))
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, mask=None):
        B, Tq, E = queries.shape
        split = lambda x: x.view(B, -1, self.h, self.d).transpose(1, 2)
        q, k, v = split(self.W_q(queries)), split(self.W_k(keys)), split(self.W_v(values))
        scores = q @ k.transpose(-2, -1)  # scaled below? no
        if mask is not None:
            m = mask if mask.dim() == 4 else mask.unsqueeze(1) if mask.dim() == 3 else mask
            scores = scores.masked_fill(~m, float("-inf"))
        w = torch.softmax(scores, dim=-1)
        w = torch.nan_to_num(w, nan=0.0)
        out = self.dropout(w) @ v
        return self.W_o(out.transpose(1, 2).reshape(B, Tq, E)), w
'''


def test_a_failing_module_is_told_where_it_departs_and_a_passing_one_is_not(tmp_path):
    report = grade(make_impl(tmp_path / "a", {"multihead_attention.py": UNSCALED_MHA}), ["multihead_attention"])
    result = report.problem("multihead_attention")
    assert result.status == "failed" and result.departure
    said = "\n".join(result.departure)
    assert "aten.div" in said and "leaves out" in said, said
    from attnkit.report.feedback import for_check, problem_text

    assert problem_text(result).count("Where your computation departs") == 1  # said once per problem
    failing = [c for c in result.checks if c.status == "failed"]
    assert sum("Where your computation departs" in for_check(result, c) for c in failing) == 1
    passing = grade(make_impl(tmp_path / "b"), ["multihead_attention", "rope"]).problems
    assert all(p.status == "passed" and p.departure == [] for p in passing)


def test_a_returned_tensor_the_reference_goes_on_from_is_called_a_step_left_out(tmp_path):
    """The output projection left out: the merged heads come back as the output. The departure is the returned tensor,
    and the learner's returned tensor has the values of the reference stage just before it."""
    scaled = UNSCALED_MHA.replace("scores = q @ k.transpose(-2, -1)", "scores = q @ k.transpose(-2, -1) / self.d ** 0.5")
    no_projection = scaled.replace("return self.W_o(out.transpose(1, 2).reshape(B, Tq, E)), w",
                                   "return out.transpose(1, 2).reshape(B, Tq, E), w")
    assert no_projection != scaled
    result = grade(make_impl(tmp_path, {"multihead_attention.py": no_projection}), ["multihead_attention"]).problem(
        "multihead_attention")
    said = "\n".join(result.departure)
    assert result.status == "failed" and "what your code returns as the output equals the reference's reshape" in said, said
    assert "a step left out before returning it" in said and "linear map" in said, said


NARROW_SDPA = '''
import torch


def scaled_dot_product_attention(queries, keys, values, mask=None):
    if values.shape[-1] != queries.shape[-1]:
        raise RuntimeError("this implementation needs dv == d")
    scores = queries @ keys.transpose(-2, -1) / queries.shape[-1]
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1) * (mask if mask is not None else 1)
    return weights @ values, weights
'''


def test_past_a_crash_the_calls_are_drawn_again_where_the_code_runs_and_its_mistake_is_named(tmp_path):
    """Code that refuses dv != d (which the contract allows) and scales by d: the crash hides the scaling on every
    call it refuses; drawn again with dv = d, the rest is diagnosed on its own."""
    result = grade(make_impl(tmp_path, {"scaled_dot_product_attention.py": NARROW_SDPA}),
                   ["scaled_dot_product_attention"]).problem("scaled_dot_product_attention")
    said = "\n".join(result.departure)
    assert result.status == "failed"
    assert "drawn again with" in said and "dv" in said and "[scale_by_d]" in said, said


def test_a_finding_past_a_crash_names_only_sizes_the_statement_names(tmp_path):
    """Paged attention's statement names B, Hq, Hkv, d, dv, N_blocks, block_size and max_blocks; the drawing also has
    a Tq and a Tk of its own. Code that crashes on every call (its block and slot arithmetic swapped) is told about
    the sizes it knows, never "Tq = Tk" (helper 24 found that line)."""
    import re

    from attnkit.model.roles import documented_dims as documented
    from attnkit.problems import get

    source = (Path(__file__).parent / "unseen" / "paged_attention__block_slot_swapped.py").read_text()
    result = grade(make_impl(tmp_path, {"paged_attention.py": source}), ["paged_attention"]).problem("paged_attention")
    lines = [ln for ln in result.departure if "rawn again with" in ln]
    assert lines, result.departure
    said = {w for ln in lines for pair in re.findall(r"rawn again with ([^,]+(?:, [A-Za-z_]+ = [A-Za-z_]+)*)", ln)
            for w in re.findall(r"[A-Za-z_]+", pair)}
    assert said and said <= documented(get("paged_attention")), said
