"""Tolerances per dtype, and the comparison that reports max error and where.

A value passes when |got - expected| <= atol * scale + rtol * |expected|, where
scale = max(1, max |expected|) keeps atol meaningful for large outputs (gradients of
parameters sum over every batch row, query and key).

Why these numbers. The expected values are computed in float64 from the very inputs the
learner received (already rounded to the tested dtype), so the only difference a correct
implementation can show is its own rounding. The kit's computations are short: scores sum
at most ~64 products of O(1) terms, a softmax and one more weighted sum. Rounding grows at
worst like n * u and typically like sqrt(n) * u (u = unit roundoff):
  float64  u = 1.1e-16: errors ~1e-14; atol 1e-9, rtol 1e-10 leave 4 orders of margin and stay
           below float32's rounding: a float32 step inside a float64 computation (u = 6e-8 on
           values of ~0.1 to 1) fails at any length (an rtol of 1e-7 let it pass on short inputs).
  float32  u = 6.0e-8: worst case 64 * 6e-8 * ~10 ~ 4e-5; atol 1e-4, rtol 1e-4.
  float16  u = 4.9e-4: scores of size ~5 carry ~5e-3 error, which moves a softmax weight by
           ~5e-3 relative; atol 3e-2, rtol 3e-2 (these checks catch overflow, NaN and wrong
           dtype handling, not subtle math: float64 and float32 do that).
  bfloat16 u = 3.9e-3: eight times float16's; atol 1e-1, rtol 1e-1, for the same reason.
  gradients: ten times the dtype's tolerances (they add up more terms).
  stability: scores of ~1e4 in float32 carry absolute errors of ~1e-3 that exp() turns into
           relative weight errors of the same size where two scores are close; atol 1e-2.
tests/test_tolerances.py checks that the reference meets these bounds in float32, float16 and
bfloat16 against float64 on many seeds, and that typical mistakes exceed them by far.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Tol:
    atol: float
    rtol: float

    def scaled(self, factor: float) -> "Tol":
        return Tol(self.atol * factor, self.rtol * factor)

    def __str__(self) -> str:
        return f"{self.atol:.0e} * max(1, max|expected|) + {self.rtol:.0e} * |expected|"


TOLERANCES = {
    "float64": Tol(1e-9, 1e-10),
    "float32": Tol(1e-4, 1e-4),
    "float16": Tol(3e-2, 3e-2),
    "bfloat16": Tol(1e-1, 1e-1),
}
GRAD_FACTOR = 10.0
STABILITY = Tol(1e-2, 1e-2)


def tolerance(dtype: str, grad: bool = False) -> Tol:
    tol = TOLERANCES[dtype]
    return tol.scaled(GRAD_FACTOR) if grad else tol


def mismatch(name: str, got: torch.Tensor | None, expected: torch.Tensor, tol: Tol) -> str | None:
    """None when `got` matches; otherwise one line: what differs, by how much, and where."""
    if got is None:
        return f"{name}: nothing came back (no gradient reached it?)"
    if tuple(got.shape) != tuple(expected.shape):
        return f"{name}: shape {tuple(got.shape)}, expected {tuple(expected.shape)}"
    if got.dtype == expected.dtype and got.device == expected.device and torch.equal(got, expected):  # bit for bit
        return None  # (and no NaN): one pass, no copy
    got64, exp64 = got.detach().to(torch.float64), expected.detach().to(torch.float64)
    if got64.numel() == 0:
        return None
    if usage(got64, exp64, tol) <= 1.0:  # the usual case in one pass: a NaN or an infinity on either side makes the
        return None  # usage NaN or infinite (torch's max keeps a NaN), which is then looked at below
    finite = torch.isfinite(exp64)
    if not (finite.all() and torch.isfinite(got64).all()):  # (the usual case, every value finite, in two passes)
        special = ~finite  # an expected -inf (the lse of a row with no allowed key) must come back exactly
        bad = (~torch.isfinite(got64) & finite) | (special & (got64 != exp64))
        if bad.any():
            at = tuple(bad.nonzero()[0].tolist())
            return f"{name}: {got64[at].item()} at {list(at)}, expected {exp64[at].item():.6g}"
        got64, exp64 = got64.masked_fill(special, 0.0), exp64.masked_fill(special, 0.0)
    if usage(got64, exp64, tol) <= 1.0:
        return None
    err = (got64 - exp64).abs()
    at = argmax_index(err)
    g, e = digits(got64[at].item(), exp64[at].item())
    return f"{name}: max error {err.max().item():.3g} at {list(at)} (got {g}, expected {e}); allowed {tol}"


def digits(got: float, expected: float) -> tuple[str, str]:
    """Both numbers with the fewest significant digits (6 or more) at which they differ visibly."""
    for n in range(6, 18):
        a, b = f"{got:.{n}g}", f"{expected:.{n}g}"
        if a != b:
            return a, b
    return f"{got!r}", f"{expected!r}"


def usage(got: torch.Tensor, expected: torch.Tensor, tol: Tol) -> float:
    """The largest |got - expected| as a fraction of what `tol` allows there (<= 1 passes)."""
    got, expected = got.to(torch.float64), expected.to(torch.float64)
    if expected.numel() == 0:
        return 0.0
    bound = expected.abs()  # then rtol * |expected| + atol * max(1, max|expected|), in place: one temporary less
    top = bound.max().item()
    bound.mul_(tol.rtol).add_(tol.atol * max(1.0, top))
    return (got - expected).abs_().div_(bound).max().item()


def same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit for bit the same values, NaN where NaN (torch.equal calls two NaNs different: two identical results with a
    NaN in them would read as two different runs)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if torch.equal(a, b):  # no NaN (a NaN is unequal to itself), every value equal: the usual answer, in one pass
        return True
    if not a.is_floating_point():
        return False
    return torch.equal(torch.isnan(a), torch.isnan(b)) \
        and torch.equal(a.nan_to_num(0.0, 0.0, 0.0), b.nan_to_num(0.0, 0.0, 0.0)) \
        and torch.equal(torch.isinf(a), torch.isinf(b)) and torch.equal(torch.isinf(a) & (a > 0), torch.isinf(b) & (b > 0))


def argmax_index(t: torch.Tensor) -> tuple:
    """Index of the largest element (torch.unravel_index costs ~0.5 s on first use)."""
    flat, at = int(t.argmax()), []
    for size in reversed(t.shape):
        flat, i = divmod(flat, size)
        at.append(i)
    return tuple(reversed(at))
