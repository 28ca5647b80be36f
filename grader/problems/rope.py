"""Spec: rotary position embedding (RoPE), both pair conventions, positions that start anywhere."""
import torch

from ..model.roles import Arg, Out
from ..model.spec import Method, Mistake, Problem

ANGLE = "angle = positions.to(work)[..., None] * theta  # (..., T, d/2)"
THETA = "theta = base ** (-2 * i / d)  # (d/2,)"
ROTATE = "ra, rb = a * cos - b * sin, a * sin + b * cos"
FAR = (10**4, 10**5 + 17)
"""Starts of the far positions tested in float64 (base calls): float32 angles there are off by ~1e-3 to 1e-2."""

MISTAKES = (
    Mistake("conventions_swapped", "the two pair conventions swapped (interleaved pairs for rotate-half and back)",
            (("if interleaved else (xw[", "if not interleaved else (xw["),
             ("flatten(-2) if interleaved else", "flatten(-2) if not interleaved else")),
            explain="interleaved=False pairs feature i with i + d/2 (rotate-half: GPT-NeoX, Hugging Face LLaMA); "
                    "interleaved=True pairs 2i with 2i+1 (RoFormer, Meta's LLaMA). Weights trained with one convention "
                    "give garbage with the other.",
            hint="interleaved=False: a = x[..., :d/2], b = x[..., d/2:]; interleaved=True: a = x[..., 0::2], b = x[..., 1::2]."),
    Mistake("theta_i_over_d", "frequencies base ** (-i / d) instead of base ** (-2i / d)",
            ((THETA, "theta = base ** (-i / d)"),),
            explain="Pair i turns at theta_i = base^(-2i/d), i = 0 .. d/2-1, so the slowest pair reaches base^-1 "
                    "(1 / base); with i/d the slowest only reaches base^(-1/2) and every pair but the first turns too fast.",
            hint="theta = base ** (-2 * torch.arange(d // 2) / d) (equivalently base ** (-torch.arange(0, d, 2) / d))."),
    Mistake("sin_sign_flipped", "the sine's sign flipped (rotation by -angle)",
            ((ROTATE, "ra, rb = a * cos + b * sin, -a * sin + b * cos"),),
            explain="A pair (a, b) becomes (a cos - b sin, a sin + b cos): a rotation by +angle. With the signs flipped it "
                    "turns the other way; the relative-position property still holds, so only a comparison with the "
                    "convention shows it.",
            hint="(a, b) -> (a*cos - b*sin, a*sin + b*cos); rotate_half(x) = cat(-x2, x1)."),
    Mistake("positions_from_zero", "positions ignored: rows rotated at 0, 1, ..., T-1",
            ((ANGLE, "angle = torch.arange(x.shape[-2], device=x.device, dtype=work)[:, None] * theta"),),
            explain="The positions argument is the absolute position of each row; a decoder with a cache rotates "
                    "its new tokens at P..P+T-1, not from 0.",
            hint="angle = positions[..., None] * theta: use the positions you are given."),
    Mistake("positions_off_by_one", "positions counted from 1",
            ((ANGLE, "angle = (positions.to(work)[..., None] + 1) * theta"),),
            explain="Position p turns pair i by p * theta_i: the first token (position 0) is not rotated at all.",
            hint="angle = positions * theta, with no offset."),
    Mistake("base_ignored", "base fixed at 10000 instead of the `base` argument",
            ((THETA, "theta = 10000.0 ** (-2 * i / d)"),),
            explain="Models choose their own base (LLaMA 3 uses 500000, code models 1e6); the argument must be used.",
            hint="theta = base ** (-2 * i / d), with the argument `base`."),
    Mistake("float32_angles", "angles computed in float32 for float64 inputs",
            (("work = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32", "work = torch.float32"),),
            explain="At position 10^4 and beyond, float32 angles are off by about position * 2^-23 (~1e-3 rad): fine "
                    "for float32 inputs, wrong for float64 ones (Hugging Face's inv_freq.float() does this).",
            hint="Compute theta and the angles in x.dtype when it is float32 or float64 (float32 for float16/bfloat16)."),
    Mistake("in_place", "the result written into x",
            (("    return rotated.to(x.dtype)", "    x.copy_(rotated.to(x.dtype))\n    return x"),),
            explain="apply_rope must not modify x: the caller's queries or keys (or a cache) would change under it, "
                    "and autograd refuses in-place writes to a leaf that requires grad.",
            hint="Build a new tensor (torch.cat / torch.stack) and return it."),
    Mistake("pairs_not_flattened", "interleaved pairs stacked but not flattened back: (..., T, d/2, 2)",
            (("torch.stack((ra, rb), dim=-1).flatten(-2)", "torch.stack((ra, rb), dim=-1)"),),
            explain="Stacking the rotated halves on a new last axis gives (..., d/2, 2); flattening the last two axes "
                    "puts a_i and b_i back at features 2i and 2i+1.",
            hint="torch.stack((a, b), dim=-1).flatten(-2)."),
    Mistake("odd_d_accepted", "an odd feature size accepted",
            (('raise ValueError(f"apply_rope: the feature size d = {d} must be even")', "return x.clone()"),),
            explain="Every feature belongs to one pair, so d must be even; the contract raises ValueError otherwise.",
            hint="if d % 2: raise ValueError(...)."),
)


def _fit(cfg, variant):
    return {**cfg, **variant, "T": cfg["Tq"], "d": 2 * cfg["dq"], "lead": ["B", "H"]}


def _positions(cfg, gen, start=None):
    """Integer positions: (T,) from a random start, or one start per batch row (B, 1, T), or any integers per
    (B, H) row (B, H, T), or per head (H, T): 2-D, which code reading it as Hugging Face's (B, T) position ids
    broadcasts wrong; all below 40, where float32 angles (allowed for float32 inputs) err by under 5e-6 rad.
    Far positions (FAR) are tested in float64 only."""
    B, H, T = cfg["B"], cfg["H"], cfg["T"]
    form = int(torch.randint(4, (1,), generator=gen))
    if form == 3 and start is None:
        return torch.randint(0, 40, (H, T), generator=gen)
    if start is not None:
        return start + torch.arange(T)
    if form == 0:
        return int(torch.randint(1, 24, (1,), generator=gen)) + torch.arange(T)
    if form == 1:
        return torch.randint(1, 24, (B, 1, 1), generator=gen) + torch.arange(T)
    return torch.randint(0, 40, (B, H, T), generator=gen)


def _inputs(cfg, gen):
    """x (B, H, T, d) standard normal, positions (T,), (B, 1, T), (B, H, T) or (H, T)."""
    x = torch.randn(cfg["B"], cfg["H"], cfg["T"], cfg["d"], generator=gen, dtype=torch.float64)
    return [x, _positions(cfg, gen)]


def _trailing(cfg):
    """base and interleaved where they differ from the defaults (so that the defaults are relied on too)."""
    if cfg["interleaved"]:
        return [cfg["base"], True]
    return [] if cfg["base"] == 10000.0 else [cfg["base"]]


def _oracle(call):
    """RoPE as complex multiplication: pair (a, b) as a + ib, times exp(i * position * base^(-2i/d))"""
    x, positions, *rest = call["args"]
    base, interleaved = (list(rest) + [10000.0, False][len(rest):])[:2]
    d = x.shape[-1]
    pairs = x.unflatten(-1, (d // 2, 2)) if interleaved else torch.stack((x[..., : d // 2], x[..., d // 2:]), -1)
    z = torch.view_as_complex(pairs.contiguous())
    freqs = torch.tensor(float(base), dtype=torch.float64) ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angle = positions.to(torch.float64)[..., None] * freqs
    turned = torch.view_as_real(z * torch.polar(torch.ones_like(angle), angle))
    out = turned.flatten(-2) if interleaved else torch.cat((turned[..., 0], turned[..., 1]), -1)
    return [out]


PROBLEM = Problem(
    id="rope",
    title="Rotary position embedding (RoPE)",
    summary="Rotate feature pairs by position: rotate-half and interleaved pairs, positions that start anywhere.",
    symbol="apply_rope",
    points={"shapes": 1, "parity_float64": 3, "parity_float32": 1, "oracle": 2, "rope_properties": 2, "gradients": 1,
            "side_effects": 1, "value_errors": 1, "cuda": 1, "cuda_half": 1},
    hints=(
        "Split the d features into d/2 pairs; pair i turns by the angle position * base^(-2i/d). With "
        "interleaved=False pair i is (i, i + d/2); with interleaved=True it is (2i, 2i+1).",
        "theta = base ** (-2 * arange(d/2) / d); angle = positions[..., None] * theta, shape (..., T, d/2); "
        "(a, b) -> (a cos - b sin, a sin + b cos). Compute the angles in float64 for float64 inputs.",
        "a, b = x[..., :d//2], x[..., d//2:] (interleaved: x[..., 0::2], x[..., 1::2]); out = cat(a*cos - b*sin, "
        "a*sin + b*cos) (interleaved: stack(..., -1).flatten(-2) puts them back in place).",
    ),
    methods=(
        Method(
            signature="def apply_rope(x, positions, base=10000.0, interleaved=False):",
            statement=(
                "Rotate each pair of features of x by the angle position * base^(-2i/d), i = 0 .. d/2-1:\n"
                "(a, b) -> (a cos - b sin, a sin + b cos). Pair i is features (i, i + d/2) when interleaved=False\n"
                "(rotate-half: GPT-NeoX, Hugging Face) and (2i, 2i+1) when interleaved=True (RoFormer, Meta's LLaMA).\n"
                "positions broadcast to x.shape[:-1] and need not start at 0. An odd d raises ValueError. Returns\n"
                "the same shape, dtype and device; never modifies x. Angles in x's dtype for float32/float64\n"
                "inputs, in float32 for float16/bfloat16."
            ),
            args=(Arg("x", "(..., T, d), d even", "tensor"),
                  Arg("positions", "integer tensor broadcastable to (..., T): each row's absolute position", "positions"),
                  Arg("base", "float, 10000.0 by default", "scalar"),
                  Arg("interleaved", "bool: pairs (2i, 2i+1) instead of (i, i + d/2)", "scalar")),
            returns=(Out("output", "(..., T, d), x rotated", "values"),),
        ),
    ),
    variants=({"base": 10000.0, "interleaved": False}, {"base": 2000.0, "interleaved": True},
              {"base": 500.0, "interleaved": False}),
    fit=_fit,
    inputs=_inputs,
    trailing=_trailing,
    options={  # each check's options (the check units in judge/checks/ declare them)
        "parity_float64": {"blocks": lambda cfg: tuple({"positions": start + torch.arange(cfg["T"], dtype=torch.int32)} for start in FAR)},
        "value_errors": {"calls": lambda cfg: (({"x": torch.zeros(cfg["B"], cfg["H"], cfg["T"], cfg["d"] - 1, dtype=torch.float64)},
                              "an odd feature size d", ()),)},
        "oracle": {"call": _oracle},
    },
    mistakes=MISTAKES,
    track="LLM",
)
