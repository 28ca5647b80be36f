"""Checks parity_float64, parity_float32 and oracle: the values, against the reference and a library."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable


import torch

from ..compare import mismatch, tolerance
from ..context import compare_all, valid_mask
from ..registry import Check, options, register
from ...draw.scenarios import as_reference
from .outputs import PartialBlocks, group_base, group_float32
from . import crash_evidence, parity_evidence, scale_evidence, tiled_evidence
from .parity_symptoms import SYMPTOMS


def has_heads(problem) -> bool:
    """A problem whose returned tensors have a heads axis (H, Hq or Hkv in their documented shapes)."""
    return any(re.search(r"\bH(q|kv)?\b", o.dims) for o in problem.methods[-1].returns)


def check_parity(group: str, dtype: str):
    def judge(ctx):
        for case in ctx.of(group):
            compare_all(ctx, case, ctx.outputs(case), ctx.expected(case), tolerance(dtype))

    return judge


def check_oracle(ctx):
    """Parity with a library implementation (ctx.ref[...]["oracle"]) on every row with an allowed key."""
    tol = tolerance("float64")
    for case in (c for c in ctx.of("base") if "far" not in c.tags):  # (_oracle_values: far calls left out)
        got, oracle = ctx.outputs(case), ctx.ref[case.key].extra["oracle"]
        rows = valid_mask(ctx.problem, case).any(-1)  # the score matrix's rows with an allowed key
        for out, g, e in zip(ctx.problem.returns, got, oracle):
            name, row_dims = out.name, e.dim() - (out.role != "lse")  # lse has one entry per row, the others a vector
            # oracle gradients, and returned keys and values (a cache, one row per key): every row
            keep = rows if out.role not in ("gradient", "cache") else torch.ones((), dtype=torch.bool)
            while keep.dim() > row_dims:  # an output row mixes every head: keep it where all heads attend
                keep = keep.all(1)
            if tuple(g.shape) != tuple(e.shape):
                ctx.fail(case, f"{name}: shape {tuple(g.shape)}, expected {tuple(e.shape)}")
            keep = keep.expand(e.shape[:row_dims])
            if keep.all():  # every row compared (the problem's rule allows a key to each): said as such, and where the
                problem = mismatch(name, g, e, tol)  # error is, at its place in the output
            else:
                problem = mismatch(f"{name} (on rows with an allowed key)", g[keep], e[keep], tol)
            if problem:
                ctx.fail(case, f"compared with {options(ctx.problem, 'oracle').call.__doc__.strip()}:\n{problem}")


register(Check("parity_float64", "same values as the reference, float64", {"base": group_base},
               check_parity("base", "float64"), general=True, options=PartialBlocks, symptoms=SYMPTOMS,
               evidence=lambda p, ctx: (crash_evidence.evidence(p, ctx) + parity_evidence.evidence(p, ctx)
                                        + tiled_evidence.evidence(p, ctx) + scale_evidence.evidence(p, ctx)), concepts=(("shapes and heads", has_heads),)))
register(Check("parity_float32", "same values as the reference, float32", {"f32": group_float32},
               check_parity("f32", "float32"), concepts=(("numerical stability", None),)))
@dataclass(frozen=True)
class Oracle:
    """The oracle check's options: `call(float64 call) -> outputs`, from a library implementation we did not write
    (its docstring names it in messages)."""

    call: Callable


def _oracle_values(problem, cases, target, refs) -> None:
    """A library implementation's outputs on the same float64 calls (refs[key]["oracle"])."""
    for k, c in cases.items():
        if c.group == "base" and "far" not in c.tags:  # a library's call may build a (Tk, Tk) matrix (ALiBi's weights)
            refs[k]["oracle"] = [o.detach() for o in options(problem, "oracle").call(as_reference(c.call))]


register(Check("oracle", "same values as an independent oracle (PyTorch's own)", {"base": group_base}, check_oracle,
               expected=_oracle_values,
               options=Oracle))
