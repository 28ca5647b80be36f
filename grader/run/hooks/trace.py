"""A trace of the call's computation: one fingerprint per tensor an operator computes (diagnose/trace.py aligns the
learner's with the reference's). Options: the most operators recorded (an int). Result: {"trace": {...}}.

A fingerprint is what stays the same when a tensor is laid out differently (transposed, split into heads or merged,
repeated along an axis): its values' multiset, summarised as the fraction of NaN, +inf, -inf and zeros, then over the
finite values min, max, mean, mean |x|, mean x^2 and QUANTILES order statistics at ranks floor(q N). Uniform
repetition leaves every entry unchanged, so a broadcast K matches the K it repeats. Only the fingerprints, the
operators' names and their data flow leave the worker, never a whole tensor.
"""
from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from . import Hook, register

QUANTILES = 17
WIDTH = 10 + QUANTILES
DIMS = 6  # shape entries kept per tensor (meta: dtype code, ndim, then the sizes, -1 past the last)
_CODES = {torch.float64: 64, torch.float32: 32, torch.float16: 16, torch.bfloat16: -16,
          torch.complex128: 128, torch.complex64: 96}


def fingerprint(t: torch.Tensor) -> torch.Tensor:
    """(WIDTH,) float64: the layout-free summary of `t`'s values (module docstring)."""
    x = t.detach()
    if x.is_complex():
        x = torch.view_as_real(x)
    x = x.reshape(-1).to(device="cpu", dtype=torch.float64)
    n = max(x.numel(), 1)
    finite = x[torch.isfinite(x)]
    head = [float(x.numel()), torch.isnan(x).sum().item() / n, (x == float("inf")).sum().item() / n,
            (x == float("-inf")).sum().item() / n, (finite == 0).sum().item() / n]
    if finite.numel() == 0:
        return torch.tensor(head + [0.0] * (WIDTH - 5), dtype=torch.float64)
    s = torch.sort(finite).values
    m = s.numel()
    ranks = torch.clamp((torch.linspace(0, 1, QUANTILES, dtype=torch.float64) * m).floor().long(), max=m - 1)
    stats = [s[0].item(), s[-1].item(), s.mean().item(), s.abs().mean().item(), (s * s).mean().item()]
    return torch.cat([torch.tensor(head + stats, dtype=torch.float64), s[ranks]])


def meta(t: torch.Tensor) -> list[int]:
    shape = list(t.shape)[:DIMS]
    return [_CODES.get(t.dtype, 0), t.dim()] + shape + [-1] * (DIMS - len(shape))


def _args_text(func, args, kwargs) -> str:
    """The operator and its plain arguments (dims, scalars), never tensors: 'aten._softmax(-1, False)'."""
    plain = [repr(a) for a in list(args) + list((kwargs or {}).values())
             if isinstance(a, (int, float, bool)) or (isinstance(a, (list, tuple)) and all(isinstance(v, int) for v in a))]
    name = func.__name__.split(".")[0]
    return f"aten.{name}({', '.join(plain)[:60]})"


class Recorder(TorchDispatchMode):
    """Every floating-point tensor an operator computes, fingerprinted, with its producer and its parents (earlier
    records it was computed from, -1 for a tensor that no recorded operator computed: an input, a parameter; views
    pass their source's record on; in-place writes make a new record)."""

    def __init__(self, limit: int):
        super().__init__()
        self.limit, self.prints, self.metas, self.ops, self.parents = limit, [], [], [], []
        self.source: dict[int, int] = {}  # id(tensor) -> its latest record
        self.keep: list = []  # the recorded tensors stay alive, so that an id is never reused meanwhile

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # as intercept.Peak: no torch._dynamo import

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if len(self.prints) >= self.limit:
            return out
        inputs = [a for a in tree_leaves((args, kwargs or {})) if isinstance(a, torch.Tensor)]
        parents = sorted({self.source.get(id(a), -1) for a in inputs})  # -1: a tensor no operator here computed
        returns = func._schema.returns
        for i, t in enumerate(x for x in tree_leaves(out) if isinstance(x, torch.Tensor)):
            alias = returns[i].alias_info if i < len(returns) else None
            if alias is not None and not alias.is_write:  # a view: the same values, laid out anew
                if parents and parents[-1] >= 0:
                    self.source[id(t)] = parents[-1]
                    self.keep.append(t)
                continue
            if not (t.is_floating_point() or t.is_complex()) or len(self.prints) >= self.limit:
                continue
            self.source[id(t)] = len(self.prints)
            self.keep.append(t)
            parts = [t, t.real, t.imag] if t.is_complex() else [t]  # a complex rotation forms cos and sin together
            for part, suffix in list(zip(parts, ("", ".real", ".imag")))[:self.limit - len(self.prints)]:
                self.prints.append(fingerprint(part))
                self.metas.append(meta(part))
                self.ops.append(_args_text(func, args, kwargs) + suffix)
                self.parents.append(parents)
        return out


class Trace(Hook):
    name = "trace"
    order = 85  # inside every other hook but the measurement
    fields = {"trace": ({"prints": torch.Tensor, "metas": torch.Tensor, "ops": list, "parents": list}, {})}

    def around(self, options):
        return Recorder(int(options))

    def finish(self, options, state, result) -> None:
        prints = torch.stack(state.prints) if state.prints else torch.zeros(0, WIDTH, dtype=torch.float64)
        metas = torch.tensor(state.metas, dtype=torch.int64) if state.metas else torch.zeros(0, 2 + DIMS, dtype=torch.int64)
        result["trace"] = {"prints": prints, "metas": metas, "ops": state.ops, "parents": state.parents}
        state.keep.clear()


register(Trace())
