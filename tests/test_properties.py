"""Property tests over drawn named dimensions (size 1 and unequal sizes included)."""
from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnkit.judge.compare import Tol, argmax_index, mismatch, same_values, usage
from attnkit.judge.reference import reference
from attnkit.problems import get
from attnkit.run.wire import dumps, loads, value_digest
from strategies import DTYPES, bool_masks, dims, option_grids, tensors, valid_lens

masked_softmax = reference(get("masked_softmax"))


@st.composite
def softmax_inputs(draw):
    d = draw(dims(("B", "Tq", "Tk")))
    scores = draw(tensors((d["B"], d["Tq"], d["Tk"])))
    return scores, draw(valid_lens(d["B"], d["Tq"], d["Tk"]))


@settings(max_examples=60, deadline=None)
@given(softmax_inputs())
def test_reference_masked_softmax_obeys_the_contract(inputs):
    scores, lens = inputs
    w = masked_softmax(scores, lens)
    assert w.shape == scores.shape and w.dtype == scores.dtype and torch.isfinite(w).all()
    B, Tq, Tk = scores.shape
    per_query = torch.full((B, Tq), Tk) if lens is None else (lens[:, None].expand(B, Tq) if lens.dim() == 1 else lens)
    mask = torch.arange(Tk) < per_query[..., None]
    assert (w[~mask] == 0).all()
    sums = w.sum(-1)
    assert torch.allclose(sums[per_query > 0], torch.ones_like(sums[per_query > 0]))
    assert (sums[per_query == 0] == 0).all()


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31 - 1), DTYPES, dims(("B", "Tq", "Tk")))
def test_wire_round_trips_every_dtype_and_shape(seed, dtype, d):
    g = torch.Generator().manual_seed(seed)
    t = (torch.randn(d["B"], d["Tq"], d["Tk"], generator=g) * 10).to(dtype)
    msg = {"a": [t, None, "x", 1.5, {"b": t[:, :0]}]}
    back = loads(dumps(msg))
    assert torch.equal(back["a"][0], t) and back["a"][0].dtype == dtype and back["a"][1:4] == [None, "x", 1.5]
    assert back["a"][4]["b"].shape == t[:, :0].shape


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 2**31 - 1), DTYPES, dims(("B", "Tq", "Tk")), st.sampled_from(["same", "nan", "zero", "one", "shape"]))
def test_an_inputs_digest_tells_apart_exactly_what_same_values_does(seed, dtype, d, edit):
    """The worker says its inputs after a call as digests (wire.value_digest), which the grader compares with the
    digest of what it sent: two tensors have the same digest exactly when same_values calls them the same (a NaN
    with another payload, -0.0 for 0.0: the same; one value, a shape or a dtype otherwise: different)."""
    g = torch.Generator().manual_seed(seed)
    a = (torch.randn(d["B"], d["Tq"], d["Tk"], generator=g) * 10).to(dtype)
    if a.is_floating_point():
        a.view(-1)[0] = float("nan")
        a.view(-1)[-1] = -0.0 if a.numel() > 1 else a.view(-1)[-1]
    b = a.clone()
    if edit == "nan" and a.is_floating_point():  # a NaN of another payload (bits differ), still NaN
        b.view(-1)[0] = -a.view(-1)[0]
    elif edit == "zero" and a.is_floating_point() and a.numel() > 1:
        b.view(-1)[-1] = 0.0
    elif edit == "one":
        b.view(-1)[a.numel() // 2] = (b.view(-1)[a.numel() // 2] == 0).to(dtype) if dtype == torch.bool else 3.25 + b.view(-1)[a.numel() // 2]
    elif edit == "shape":
        b = b.reshape(-1)
    assert (value_digest(a) == value_digest(b)) == same_values(a, b), (edit, dtype)
    assert value_digest(a) != value_digest(a.to(torch.float64 if dtype != torch.float64 else torch.float32))


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 2**31 - 1), dims(("B", "Tq", "Tk")), st.sampled_from(["finite", "inf", "nan", "zero", "tiny"]),
       st.sampled_from([torch.float64, torch.float32]))
def test_a_bit_for_bit_answer_is_judged_as_the_full_comparison_judges_it(seed, d, special, dtype):
    """mismatch's first step (torch.equal: one pass, no copy) decides nothing the comparison after it would not: for
    the same answer, with infinities, NaN, signed zeros or a tiny difference, both give the same line or None."""
    from unittest import mock

    g = torch.Generator().manual_seed(seed)
    expected = (torch.randn(d["B"], d["Tq"], d["Tk"], generator=g, dtype=torch.float64) * 10).to(dtype)
    flat = expected.view(-1)
    if special == "inf":
        flat[0] = float("-inf")
    elif special == "nan":
        flat[-1] = float("nan")
    elif special == "zero":
        flat[0] = -0.0
    got = expected.clone()
    if special == "tiny":
        got.view(-1)[-1] += 1e-30
    tol = Tol(1e-6, 1e-6)
    fast = mismatch("w", got, expected, tol)
    with mock.patch.object(torch, "equal", lambda a, b: False):  # the full comparison only
        full = mismatch("w", got, expected, tol)
    assert fast == full, (special, fast, full)
    assert (full is None) == (special != "nan"), full  # an expected NaN is never matched; the rest is within tolerance


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 2**31 - 1), dims(("B", "Tq", "Tk")), st.floats(1e-12, 1e2), st.floats(1e-12, 1e-1),
       st.floats(1e-6, 1e4))
def test_usage_is_the_largest_error_over_what_the_tolerance_allows_there(seed, d, spread, rtol, scale):
    """usage = max |got - expected| / (rtol * |expected| + atol * max(1, max|expected|)), computed in place: the
    bound's largest |expected| is read before the bound is scaled (where the values are small and large alike)."""
    g = torch.Generator().manual_seed(seed)
    expected = torch.randn(d["B"], d["Tq"], d["Tk"], generator=g, dtype=torch.float64) * scale
    got = expected + torch.randn(expected.shape, generator=g, dtype=torch.float64) * spread
    tol = Tol(rtol / 3, rtol)
    if expected.numel() == 0:
        assert usage(got, expected, tol) == 0.0
        return
    bound = tol.rtol * expected.abs() + tol.atol * max(1.0, expected.abs().max().item())
    want = ((got - expected).abs() / bound).max().item()
    before = expected.clone()
    assert abs(usage(got, expected, tol) - want) <= 1e-12 * max(1.0, want), (usage(got, expected, tol), want)
    assert torch.equal(expected, before)  # the bound is built in place on a copy, never on the expected values


def test_wire_refuses_objects():
    import pickle

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    try:
        loads(pickle.dumps(Evil()))
    except pickle.UnpicklingError as exc:
        assert "refusing" in str(exc)
    else:
        raise AssertionError("an object was unpickled")


@settings(max_examples=60, deadline=None)
@given(dims(("B", "Tq", "Tk")), st.integers(0, 2**31 - 1), st.floats(1e-3, 1e3))
def test_mismatch_reports_the_worst_position(d, seed, bump):
    shape = (d["B"], d["Tq"], d["Tk"])
    expected = torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    tol = Tol(1e-6, 1e-6)
    assert mismatch("w", expected.clone(), expected, tol) is None
    at = tuple(int(torch.randint(s, (1,), generator=torch.Generator().manual_seed(seed + i))) for i, s in enumerate(shape))
    got = expected.clone()
    got[at] += bump
    assert argmax_index((got - expected).abs()) == at
    text = mismatch("w", got, expected, tol)
    assert text and f"at {list(at)}" in text and "max error" in text
    assert "shape" in mismatch("w", got[..., :0] if shape[-1] > 0 else got[:0], expected, tol)


@settings(max_examples=60, deadline=None)
@given(dims(("B", "H", "Tq", "Tk", "dq", "dv")), st.integers(0, 2), st.data())
def test_reference_sdpa_any_leading_dims_equals_each_slice(d, n_lead, data):
    """Leading dims are independent problems: the batched call equals a 2-D call per slice, with the mask
    broadcast to it; rows with an allowed key sum to 1, the others are all zeros."""
    sdpa = reference(get("scaled_dot_product_attention"))
    lead = (d["B"], d["H"])[:n_lead]
    q = data.draw(tensors((*lead, d["Tq"], d["dq"])))
    k = data.draw(tensors((*lead, d["Tk"], d["dq"])))
    v = data.draw(tensors((*lead, d["Tk"], d["dv"])))
    mask = data.draw(bool_masks(lead, d["Tq"], d["Tk"]))
    out, w = sdpa(q, k, v, mask)
    full = torch.ones(*lead, d["Tq"], d["Tk"], dtype=torch.bool) if mask is None else mask.expand(*lead, d["Tq"], d["Tk"])
    flat = [t.reshape(-1, *t.shape[-2:]) for t in (q, k, v, full)]
    for i in range(flat[0].shape[0]):
        o_i, w_i = sdpa(flat[0][i], flat[1][i], flat[2][i], flat[3][i])
        assert torch.allclose(o_i, out.reshape(-1, *out.shape[-2:])[i]) and torch.allclose(w_i, w.reshape(-1, *w.shape[-2:])[i])
    allowed = full.any(-1)
    assert (w[~full] == 0).all() and torch.allclose(w.sum(-1)[allowed], torch.ones((), dtype=w.dtype)) and (w.sum(-1)[~allowed] == 0).all()


@settings(max_examples=40, deadline=None)
@given(dims(("B", "Tq", "Tk", "dq", "dk", "dv", "h")), st.integers(0, 40), st.data())
def test_reference_chunked_equals_one_chunk_within_its_bound(d, extra, data):
    """Any max_elements >= h gives the unchunked result, and no allocation exceeds max(max_elements, S)."""
    from attnkit.run.intercept import Peak
    from attnkit.problems.chunked_additive_attention import allowed

    chunked = reference(get("chunked_additive_attention"))
    B, Tq, Tk, h = d["B"], d["Tq"], d["Tk"], d["h"]
    args = [data.draw(tensors(s, scale=1.0)) for s in ((B, Tq, d["dq"]), (B, Tk, d["dk"]), (B, Tk, d["dv"]),
                                                      (h, d["dq"]), (h, d["dk"]), (1, h))]
    lens = data.draw(valid_lens(B, Tq, Tk))
    whole = chunked(*args, lens, max_elements=2**20)
    with Peak() as peak:
        parts = chunked(*args, lens, max_elements=h + extra)
    assert all(torch.allclose(a, b) for a, b in zip(whole, parts))
    assert peak.elements <= allowed(d, args, h + extra), peak.op


@settings(max_examples=60, deadline=None)
@given(dims(("Tk", "dq", "dv", "h")), st.sampled_from([torch.float32, torch.float64]), st.data())
def test_reference_numpy_step_is_a_convex_combination(d, dtype, data):
    """alpha is a distribution over the T steps, the context lies in the box spanned by h's rows, dtypes kept."""
    step = reference(get("numpy_additive_attention"))
    shapes = ((d["dq"],), (d["Tk"], d["dv"]), (d["h"], d["dq"]), (d["h"], d["dv"]), (d["h"],))
    arrays = [data.draw(tensors(s)).to(dtype).numpy() for s in shapes]
    context, alpha = step(*arrays)
    assert alpha.dtype == context.dtype == arrays[0].dtype and alpha.shape == (d["Tk"],)
    assert abs(float(alpha.sum()) - 1) < 1e-5 and (alpha >= 0).all()
    h = arrays[1]
    assert (context >= h.min(0) - 1e-5).all() and (context <= h.max(0) + 1e-5).all()


@settings(max_examples=200, deadline=None)
@given(option_grids())
def test_pairwise_covers_every_pair_the_grid_allows(grid):
    """The base group's covering design: only allowed triples, and every (variant, config), (variant, option) and
    (config, option) pair that some allowed triple has is covered, so no factor's interaction with another is lost."""
    from attnkit.draw.groups import pairwise

    chosen = pairwise(grid)
    allowed = {(v, c, o) for (v, c), opts in grid.items() for o in opts}
    assert chosen <= allowed
    for a, b in ((0, 1), (0, 2), (1, 2)):
        assert {(t[a], t[b]) for t in allowed} == {(t[a], t[b]) for t in chosen}


def test_pairwise_is_smaller_than_the_full_product():
    """Three variants, four configs, six masking kinds: 24 calls cover every pair (72 in the full product)."""
    from attnkit.draw.groups import pairwise

    grid = {(v, c): tuple(f"k{i}" for i in range(6)) for v in range(3) for c in range(4)}
    assert len(pairwise(grid)) == 24
