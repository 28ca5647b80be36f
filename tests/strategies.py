"""Hypothesis strategies shared by the property tests: shapes from named dimensions."""
from __future__ import annotations

import torch
from hypothesis import strategies as st

SIZE = st.integers(min_value=1, max_value=5)  # size 1 is always in range


@st.composite
def dims(draw, names=("B", "Tq", "Tk", "dq", "dk", "dv", "h", "H")):
    """A dict of named dimensions, each 1..5, drawn independently (so often unequal)."""
    return {n: draw(SIZE) for n in names}


@st.composite
def valid_lens(draw, B: int, Tq: int, Tk: int):
    """None, (B,) or (B, Tq) lengths in 0..Tk."""
    kind = draw(st.sampled_from(["none", "batch", "query"]))
    if kind == "none":
        return None
    shape = (B,) if kind == "batch" else (B, Tq)
    values = draw(st.lists(st.integers(0, Tk), min_size=B * (1 if kind == "batch" else Tq),
                           max_size=B * (1 if kind == "batch" else Tq)))
    return torch.tensor(values, dtype=torch.int64).reshape(shape)


def tensors(shape, dtype=torch.float64, scale: float = 3.0):
    """A float tensor of `shape` from a drawn seed (values are not shrunk one by one)."""
    return st.integers(0, 2**31 - 1).map(
        lambda seed: (torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * scale).to(dtype)
    )


DTYPES = st.sampled_from([torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool])


@st.composite
def bool_masks(draw, lead: tuple, Tq: int, Tk: int):
    """None, or a boolean mask (True = attend) broadcastable to (*lead, Tq, Tk): some leading and
    query dims drawn as 1, rows with no allowed key included."""
    if draw(st.booleans()):
        return None
    shape = tuple(draw(st.sampled_from([1, n])) for n in (*lead, Tq)) + (Tk,)
    shape = shape[draw(st.integers(0, len(lead))):]  # fewer dims than the scores is allowed
    seed = draw(st.integers(0, 2**31 - 1))
    return torch.rand(shape, generator=torch.Generator().manual_seed(seed)) < draw(st.sampled_from([0.0, 0.5, 1.0]))


@st.composite
def option_grids(draw):
    """{(variant, config): the options valid there}: 1..4 variants, 1..5 configs, up to 7 options, each cell
    allowing a drawn subset (an empty cell too), as mask kinds or block settings differ by fitted config."""
    variants, configs = draw(st.integers(1, 4)), draw(st.integers(1, 5))
    names = [f"o{i}" for i in range(draw(st.integers(1, 7)))]
    return {(v, c): tuple(o for o in names if draw(st.booleans()) or o == names[0] and draw(st.booleans()))
            for v in range(variants) for c in range(configs)}
