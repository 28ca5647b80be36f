"""Seeded, reproducible calls for one problem, grouped by the checks that read them.

Dimensions are drawn per run seed but always include the edge cases: B=1, Tq=1, Tk=1,
Tq != Tk, prime sizes, B != H wherever both exceed 1, and unequal feature sizes. valid_lens
cover None, (B,) and (B, Tq), with 0 and Tk; boolean masks every broadcastable form.
"""
from __future__ import annotations

import random
import zlib
from dataclasses import dataclass, field

import torch

from ..model.spec import Problem

LENS_KINDS = ("none", "batch", "query")


@dataclass
class Case:
    key: str
    group: str
    variant: dict
    cfg: dict
    call: dict
    lens: str = "none"
    reference: bool = True
    meta: dict = field(default_factory=dict)


def draw_configs(seed: int) -> list[dict]:
    """Four dimension sets: a general one with prime Tq != Tk, all ones, Tk=1 with B>1, and a
    long one with B=1. B != H wherever both exceed 1, so that a layout mixing them up fails.
    Config 0's Tq and Tk are primes of 5 or more and B = 2, so blocks of 3 queries or keys, with
    or without the batch folded in, leave a partial last block (chunked and tiled problems)."""
    rng = random.Random(seed)

    def feats():
        dq, dk, dv, h = rng.sample(range(2, 9), 4)
        return {"dq": dq, "dk": dk, "dv": dv, "h": h}

    tq, tk = rng.choice(((5, 7), (7, 5), (5, 11)))
    return [
        {"B": 2, "Tq": tq, "Tk": tk, "H": 3, **feats()},
        {"B": 1, "Tq": 1, "Tk": 1, "H": 1, **feats()},
        {"B": 3, "Tq": rng.choice((2, 4)), "Tk": 1, "H": 2, **feats()},
        {"B": 1, "Tq": rng.choice((5, 7)), "Tk": rng.choice((2, 3)), "H": 2, **feats()},
    ]


def generator(*parts) -> torch.Generator:
    return torch.Generator().manual_seed(zlib.crc32("/".join(map(str, parts)).encode()))


def make_lens(kind: str, cfg: dict, gen: torch.Generator, low: int = 0):
    """valid_lens of a kind; with low=0 they include both 0 and Tk where there is room."""
    if kind == "none":
        return None
    B, Tq, Tk = cfg["B"], cfg["Tq"], cfg["Tk"]
    shape = (B,) if kind == "batch" else (B, Tq)
    lens = torch.randint(low, Tk + 1, shape, generator=gen)
    flat = lens.view(-1)
    flat[0] = Tk
    if flat.numel() > 1:
        flat[-1] = low
    return lens


def dim_names(dims: str, cfg: dict) -> list[str]:
    """Named dims of a dims string, with "..." expanded to the config's leading dims."""
    return [n for d in dims.split() for n in (cfg.get("lead", []) if d == "..." else [d])]


def output_shapes(problem: Problem, cfg: dict) -> list[tuple]:
    return [tuple(cfg[d] for d in dim_names(dims, cfg)) for dims in problem.dims]


def score_shape(problem: Problem, cfg: dict) -> tuple:
    """The shape of the call's score matrix (..., Tq, Tk): the weights' shape where the problem returns them,
    else its first output's rows with Tk keys."""
    shapes = output_shapes(problem, cfg)
    at = problem.weights_index
    return shapes[at] if at is not None else shapes[0][:-1] + (cfg["Tk"],)


def spread(t: torch.Tensor, n_lead: int, n_after: int = 0) -> torch.Tensor:
    """A per-batch (B, X) tensor laid out against a tensor with `n_lead` leading dims (batch first),
    then X, then `n_after` dims: (B, 1, ..., X, 1, ...); with no leading dims (B = 1): (X, 1, ...)."""
    if n_lead == 0:
        return t[0].reshape(-1, *[1] * n_after)
    return t.reshape(t.shape[0], *[1] * (n_lead - 1), -1, *[1] * n_after)


def causal_mask(Tq: int, Tk: int) -> torch.Tensor:
    """(Tq, Tk) boolean, True = attend: key j for query i when j <= i + (Tk - Tq) (aligned bottom right)."""
    return torch.ones(Tq, Tk, dtype=torch.bool).tril(Tk - Tq)


def lens_to_mask(problem: Problem, cfg: dict, lens) -> torch.Tensor:
    """valid_lens (B,) or (B, Tq) as the boolean mask they mean, laid out against the weights."""
    per_query = lens[:, None] if lens.dim() == 1 else lens
    mask = torch.arange(cfg["Tk"]) < per_query[..., None]  # (B, 1 or Tq, Tk)
    n_lead = len(score_shape(problem, cfg)) - 2
    return mask[0] if n_lead == 0 else mask.reshape(mask.shape[0], *[1] * (n_lead - 1), *mask.shape[1:])


MASK_KINDS = ("none", "batch", "query", "random", "causal", "keys", "inner", "inner1")
CAUSAL_KINDS = ("none", "causal")
"""A causal flag is False (none) or True (causal)."""


def make_mask(problem: Problem, kind: str, cfg: dict, gen: torch.Generator, low: int = 0):
    """The masking argument of a kind: valid_lens, or a boolean mask (True = attend) that
    broadcasts to the weights (..., Tq, Tk): a key padding mask (batch: (B, 1, .., 1, Tk)),
    per-query lengths (query: (B, 1, .., Tq, Tk)), an independent draw per weight row (random:
    the full shape; with low=0 one row has no allowed key), a causal (Tq, Tk) mask, one (Tk,)
    row for every query (keys), or a draw shared by the batch (inner: the weights' shape
    without its first dim, e.g. (H, Tq, Tk); inner1: the same with a leading 1)."""
    if problem.mask_role == "causal":
        return kind == "causal"
    if kind == "none" or problem.mask_role is None:
        return None
    if problem.mask_role == "lengths":
        return make_lens(kind, cfg, gen, low)
    if kind in ("batch", "query"):
        return lens_to_mask(problem, cfg, make_lens(kind, cfg, gen, low))
    shape = score_shape(problem, cfg)
    if kind == "causal":
        return causal_mask(cfg["Tq"], cfg["Tk"])
    shape = {"keys": shape[-1:], "inner": shape[1:] if len(shape) > 2 else shape,
             "inner1": (1, *shape[1:])}.get(kind, shape)
    if kind == "keys":  # one row for every query: no empty row unless every row is empty
        mask = torch.rand(shape, generator=gen) < 0.6
        mask[int(torch.randint(shape[-1], (1,), generator=gen))] = True
        return mask
    mask = torch.rand(shape, generator=gen) < 0.6
    mask.view(-1, shape[-1])[:, int(torch.randint(shape[-1], (1,), generator=gen))] |= low > 0
    if low == 0:
        mask.view(-1, shape[-1])[-1] = False
    return mask


def mask_kinds(problem: Problem, cfg: dict | None = None) -> tuple[str, ...]:
    """The masking kinds a call of `cfg` can take (inner1 needs room for its extra leading dim)."""
    kinds = {"lengths": LENS_KINDS, "mask": MASK_KINDS, "causal": CAUSAL_KINDS, None: ("none",)}[problem.mask_role]
    if cfg is not None and problem.mask_role == "mask" and len(score_shape(problem, cfg)) < 3:
        kinds = tuple(k for k in kinds if k != "inner1")
    return kinds


def make_state(problem: Problem, cfg: dict, gen: torch.Generator) -> dict:
    """Random weights in nn.Linear's range, U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    return {
        name: (torch.rand(*shape, generator=gen, dtype=torch.float64) * 2 - 1) / shape[-1] ** 0.5
        for name, shape in problem.params(cfg).items()
    }


def base_call(problem, cfg, variant, gen, lens, *, dtype="float64", grad=False) -> dict:
    """The call with the problem's inputs, its masking argument `lens` (valid_lens, mask or causal flag) and
    trailing args."""
    args = problem.inputs(cfg, gen) + ([] if problem.mask_role is None else [lens]) + list(problem.trailing(cfg))
    if problem.mask_role == "causal" and lens is False and len(args) == problem.mask_index + 1:
        args = args[:-1]  # is_causal left to its default (False), so that the default is tested too
    call = {
        "ctor": problem.ctor_call(cfg, variant) if problem.is_module else None,
        "state": make_state(problem, {**cfg, **variant}, gen) if problem.is_module else None,
        "args": args,
        "train": False,
        "seed": 0,
        "repeat": 1,
        "grad_out": None,
        "device": "cpu",
        "dtype": "float64",
        "n_out": len(problem.outputs),
        "arrays": problem.arrays,
        "banned": list(problem.banned),
        # a problem that returns gradients computes them by hand: automatic differentiation is refused
        "no_autograd": all(out.role == "gradient" for out in problem.returns),
        "structure": output_structure(problem),
    }
    if grad:
        call["grad_out"] = [None if out.role == "lse" else torch.randn(*s, generator=gen, dtype=torch.float64)
                            for out, s in zip(problem.returns, output_shapes(problem, cfg))]  # lse need not be differentiable
    return cast(call, dtype)


def output_structure(problem: Problem) -> list[int] | None:
    """The outputs' nesting as group sizes: consecutive outputs with role "cache" form one tuple, (k, v).
    None when every output stands alone."""
    sizes: list[int] = []
    for i, out in enumerate(problem.returns):
        if out.role == "cache" and i and problem.returns[i - 1].role == "cache":
            sizes[-1] += 1
        else:
            sizes.append(1)
    return sizes if any(s > 1 for s in sizes) else None


def cast(call: dict, dtype: str) -> dict:
    """The same call with every floating tensor (inputs, weights, a cache's) rounded to `dtype`."""
    dt = getattr(torch, dtype)

    def conv(x):
        if isinstance(x, tuple):
            return tuple(conv(t) for t in x)
        return x.to(dt) if isinstance(x, torch.Tensor) and x.is_floating_point() else x

    out = dict(call, dtype=dtype, args=[conv(a) for a in call.get("args", [])])
    if call.get("state") is not None:
        out["state"] = {k: conv(v) for k, v in call["state"].items()}
    return out


def as_reference(call: dict) -> dict:
    """The call the reference runs: the same rounded values, computed in float64 on the CPU."""
    return dict(cast(call, "float64"), device="cpu")


def expected_call(call: dict) -> dict:
    """The call that computes the expected values: as_reference, without watching the trusted reference (no
    banned-call mode, no allocation measurement: they cost a third of the grader's own time and tell nothing)."""
    return dict(as_reference(call), banned=[], measure=False)
