"""Seeded, reproducible calls for one problem, grouped by the checks that read them.

Dimensions are drawn per run seed but always include the edge cases: B=1, Tq=1 after several keys (a decoding
step), Tk=1, Tq != Tk, prime sizes, B != H wherever both exceed 1, and unequal feature sizes. valid_lens
cover None, (B,) and (B, Tq), with 0 and Tk; boolean masks every broadcastable form.
"""
from __future__ import annotations

import random
import zlib
from dataclasses import dataclass, field

import torch

from ..masks import rule
from ..masks.layout import dim_names, lens_to_mask, make_lens, output_shapes, score_shape  # noqa: F401 - for the checks
from ..model.spec import Problem

@dataclass
class Case:
    """One seeded call of a check's group. Its tags say what it is, so that no one parses its key."""

    key: str
    group: str  # the group its check reads it by
    variant: dict
    cfg: dict
    call: dict
    lens: str = "none"  # the masking argument's form (its mask rule's name for it)
    reference: bool = True  # the reference answers it (its expected values)
    meta: dict = field(default_factory=dict)
    tags: frozenset = frozenset()  # e.g. "negative" (every valid score far below 0), "block" (block settings)
    must_raise: bool = False  # a call that must raise ValueError: judged by its outcome alone
    tol: object = None  # the tolerance its results are compared with, where not its dtype's (judge/compare.py)
    builder: str = ""  # the group name of the builder that drew it (set by draw/groups.build)


def draw_configs(seed: int) -> list[dict]:
    """Four dimension sets: a general one with prime Tq != Tk, a decoding step (B = H = Tq = 1 after 6 keys), Tk=1
    with B>1, and a long one with B=1. B != H wherever both exceed 1, so that a layout mixing them up fails.
    Config 0's Tq and Tk are primes of 5 or more and B = 2, so blocks of 3 queries or keys, with
    or without the batch folded in, leave a partial last block (chunked and tiled problems)."""
    rng = random.Random(seed)

    def feats():
        dq, dk, dv, h = rng.sample(range(2, 9), 4)
        return {"dq": dq, "dk": dk, "dv": dv, "h": h}

    tq, tk = rng.choice(((5, 7), (7, 5), (5, 11)))
    return [
        {"B": 2, "Tq": tq, "Tk": tk, "H": 3, **feats()},
        {"B": 1, "Tq": 1, "Tk": 6, "H": 1, **feats()},
        {"B": 3, "Tq": rng.choice((2, 4)), "Tk": 1, "H": 2, **feats()},
        {"B": 1, "Tq": rng.choice((5, 7)), "Tk": rng.choice((2, 3)), "H": 2, **feats()},
    ]


def generator(*parts) -> torch.Generator:
    return torch.Generator().manual_seed(zlib.crc32("/".join(map(str, parts)).encode()))


def spread(t: torch.Tensor, n_lead: int, n_after: int = 0) -> torch.Tensor:
    """A per-batch (B, X) tensor laid out against a tensor with `n_lead` leading dims (batch first),
    then X, then `n_after` dims: (B, 1, ..., X, 1, ...); with no leading dims (B = 1): (X, 1, ...)."""
    if n_lead == 0:
        return t[0].reshape(-1, *[1] * n_after)
    return t.reshape(t.shape[0], *[1] * (n_lead - 1), -1, *[1] * n_after)


def make_mask(problem: Problem, kind: str, cfg: dict, gen: torch.Generator, low: int = 0):
    """The masking argument of form `kind`, drawn by the problem's mask rule (grader/masks/); "query" and "batch"
    stand for the rule's per-query and per-batch forms, and "<form>_tied" for the form (drawn with two sizes equal, draw/tied.py)."""
    r = rule(problem)
    kind = kind.removesuffix("_tied")
    return r.make(problem, {"query": r.per_query, "batch": r.per_batch}.get(kind, kind), cfg, gen, low)


def mask_kinds(problem: Problem, cfg: dict | None = None) -> tuple[str, ...]:
    """The masking forms a call of `cfg` can take (the problem's mask rule says)."""
    return rule(problem).forms(problem, cfg)


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
    at = problem.mask_index
    if at is not None and rule(problem).omit_default and len(args) == at + 1 \
            and same_value(lens, problem.call_defaults.get(problem.arg_names[at], ...)):
        args = args[:-1]  # left to its default where the rule says so, so that the default is tested too
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
        "structure": output_structure(problem),
    }
    frozen = [i for i, a in enumerate(problem.args) if a.role == "scalar" and i < len(args)
              and isinstance(args[i], torch.Tensor)]
    if frozen:  # a setting given as a tensor: the contract asks no gradient of it
        call["frozen"] = frozen
    if grad:
        call["grad_out"] = [None if out.role == "lse" else torch.randn(*s, generator=gen, dtype=torch.float64)
                            for out, s in zip(problem.returns, output_shapes(problem, cfg))]  # lse need not be differentiable
    return cast(call, dtype)


def same_value(a, b) -> bool:
    return not isinstance(a, torch.Tensor) and type(a) is type(b) and a == b


def output_structure(problem: Problem, method=None) -> list[int] | None:
    """The outputs' nesting as group sizes (of the call's own function, or of `method`): consecutive outputs with role
    "cache" form one tuple, (k, v). None when every output stands alone."""
    sizes: list[int] = []
    returns = (method or problem.methods[-1]).returns
    for i, out in enumerate(returns):
        if out.role == "cache" and i and returns[i - 1].role == "cache":
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
    if call.get("warm") is not None:  # the run before it on the same module, in the same dtype
        out["warm"] = cast(call["warm"], dtype)
    return out


def as_reference(call: dict) -> dict:
    """The call the reference runs: the same rounded values, computed in float64 on the CPU."""
    return dict(cast(call, "float64"), device="cpu")


def expected_call(call: dict) -> dict:
    """The call that computes the expected values: as_reference (the hooks that only watch the learner are dropped
    by run/hooks.for_reference)."""
    return as_reference(call)
