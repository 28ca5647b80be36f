"""Seeded, reproducible calls for one problem, grouped by the checks that read them.

Dimensions are drawn per run seed but always include the edge cases: B=1, Tq=1, Tk=1,
Tq != Tk and unequal feature sizes. valid_lens cover None, (B,) and (B, Tq), with 0 and Tk.
"""
from __future__ import annotations

import random
import zlib
from dataclasses import dataclass, field

import torch

from .spec import Problem

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
    """Four dimension sets: a general one, all ones, Tk=1 with B>1, and a long one with B=1."""
    rng = random.Random(seed)

    def feats():
        dq, dk, dv, h = rng.sample(range(2, 9), 4)
        return {"dq": dq, "dk": dk, "dv": dv, "h": h}

    tq = rng.randint(3, 4)
    return [
        {"B": 2, "Tq": tq, "Tk": tq + rng.randint(1, 3), "H": 2, **feats()},
        {"B": 1, "Tq": 1, "Tk": 1, "H": 1, **feats()},
        {"B": 3, "Tq": rng.randint(2, 4), "Tk": 1, "H": 3, **feats()},
        {"B": 1, "Tq": rng.randint(5, 6), "Tk": rng.randint(3, 4), "H": 2, **feats()},
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


def output_shapes(problem: Problem, cfg: dict) -> list[tuple]:
    dims = {"output": "B Tq dv", "weights": problem.weights_dims}
    return [tuple(cfg[d] for d in dims[name].split()) for name in problem.outputs]


def make_state(problem: Problem, cfg: dict, gen: torch.Generator) -> dict:
    """Random weights in nn.Linear's range, U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    return {
        name: (torch.rand(*shape, generator=gen, dtype=torch.float64) * 2 - 1) / shape[-1] ** 0.5
        for name, shape in problem.params(cfg).items()
    }


def base_call(problem, cfg, variant, gen, lens, *, dtype="float64", grad=False) -> dict:
    args = problem.inputs(cfg, gen) + [lens]
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
    }
    if grad:
        call["grad_out"] = [torch.randn(*s, generator=gen, dtype=torch.float64) for s in output_shapes(problem, cfg)]
    return cast(call, dtype)


def cast(call: dict, dtype: str) -> dict:
    """The same call with every floating tensor (inputs, weights) rounded to `dtype`."""
    dt = getattr(torch, dtype)

    def conv(x):
        return x.to(dt) if isinstance(x, torch.Tensor) and x.is_floating_point() else x

    out = dict(call, dtype=dtype, args=[conv(a) for a in call.get("args", [])])
    if call.get("state") is not None:
        out["state"] = {k: conv(v) for k, v in call["state"].items()}
    return out


def as_reference(call: dict) -> dict:
    """The call the reference runs: the same rounded values, computed in float64 on the CPU."""
    return dict(cast(call, "float64"), device="cpu")
