"""Visible quick checks on one small fixed example per problem: shapes and weight sums.

Learners see these (notebooks, candidate bundles); they catch gross errors fast and reveal
nothing of the hidden checks' inputs.
"""
from __future__ import annotations

import torch

from .scenarios import generator, output_shapes

FIXED = {"B": 2, "Tq": 3, "Tk": 4, "dq": 5, "dk": 6, "dv": 3, "h": 7, "H": 2}


def example(problem, variant: dict):
    """(cfg, args) of the fixed example: valid_lens (B,) = [Tk, 2]."""
    cfg = problem.fit(dict(FIXED), variant)
    args = problem.inputs(cfg, generator("public", problem.id)) + [torch.tensor([cfg["Tk"], 2])]
    return cfg, args


def run(problem, target, variant: dict):
    """Call the learner's target on the fixed example; returns (cfg, outputs as a list)."""
    cfg, args = example(problem, variant)
    if problem.is_module:
        ctor = problem.ctor_call(cfg, variant)
        torch.manual_seed(0)
        target = target(*ctor["args"], **ctor["kwargs"]).double().eval()
    with torch.no_grad():
        out = target(*args)
    return cfg, list(out) if isinstance(out, (tuple, list)) else [out]


def quick_checks(problem, target) -> list[tuple[str, str | None]]:
    """(what was checked, None if it held or why not) for each variant of the problem."""
    results = []
    for variant in problem.variants:
        label = ", ".join(f"{k}={v!r}" for k, v in variant.items())
        where = f" ({label})" if label else ""
        try:
            cfg, out = run(problem, target, variant)
        except Exception as exc:  # noqa: BLE001 - the learner's code may raise anything
            results.append((f"call on the fixed example{where}", f"{type(exc).__name__}: {exc}"))
            continue
        shapes = output_shapes(problem, cfg)
        got = [tuple(o.shape) for o in out]
        if got != shapes:
            results.append((f"shapes{where}", f"got {got}, expected {shapes} for {problem.outputs}"))
            continue
        results.append((f"shapes {shapes}{where}", None))
        w = out[-1]
        lens = torch.tensor([cfg["Tk"], 2])
        mask = torch.arange(cfg["Tk"]) < lens.view(-1, *[1] * (w.dim() - 1))
        if (w.masked_select(~mask.expand_as(w)) != 0).any():
            results.append((f"masked weights are 0{where}", "keys at j >= valid_len got nonzero weight"))
        elif not torch.allclose(w.sum(-1), torch.ones((), dtype=w.dtype)):
            results.append((f"weights sum to 1{where}", f"row sums {w.sum(-1).flatten()[:6].tolist()}"))
        else:
            results.append((f"masked weights are 0 and rows sum to 1{where}", None))
    return results
