"""Property tests over drawn named dimensions (size 1 and unequal sizes included)."""
from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from grader.compare import Tol, argmax_index, mismatch
from grader.grading import reference
from grader.problems import get
from grader.wire import dumps, loads
from strategies import DTYPES, dims, tensors, valid_lens

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
