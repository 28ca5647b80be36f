"""Check masking: masked keys are ignored, valid key order does not matter, a broadcast mask equals its expansion."""
from __future__ import annotations

import torch

from ..compare import mismatch, tolerance
from ..registry import Check, register
from ...draw.groups import group_masking
from ...draw.scenarios import spread


def check_masking(ctx):
    tol = tolerance("float64")
    groups = {}
    for c in ctx.of("mask"):
        groups.setdefault(c.key.rsplit("/", 1)[0], {})[c.key.rsplit("/", 1)[1]] = c
    for parts in groups.values():
        orig = ctx.outputs(parts["orig"])
        rules = [
            ("loud", orig, "changing keys/values (or scores) at masked positions changed the result: masked positions leak in"),
            ("per_query", orig, f"{_per_query_words(ctx.problem)} gave different results"),
        ]
        perm = parts["permuted"].meta["perm"]
        at_w = ctx.problem.weights_index
        w = orig[at_w]
        permuted_w = torch.gather(w, -1, spread(perm, w.dim() - 1).expand_as(w))
        rules.append(("permuted", orig[:at_w] + [permuted_w] + orig[at_w + 1:],
                      "permuting valid key/value pairs together must permute the weights the same way and leave the output unchanged"))
        for name, expected, why in rules:
            got = ctx.outputs(parts[name])
            for out_name, g, e in zip(ctx.problem.outputs, got, expected):
                problem = mismatch(out_name, g, e, tol)
                if problem:
                    ctx.fail(parts[name], f"{why}\n{problem}")


def _per_query_words(problem) -> str:
    if problem.mask_role == "mask":
        return "a mask that broadcasts over queries and the same mask expanded to every query"
    return "valid_lens of shape (B,) and the same lengths repeated as (B, Tq)"


def _needs(p):
    if p.mask_role not in ("lengths", "mask") or p.weights_index is None:
        return "an argument with role 'lengths' or 'mask' and an output with role 'weights'"
    if not p.arg_index("scores") and not (p.arg_index("key") and p.arg_index("value")):
        return "arguments with roles 'key' and 'value' (or 'scores')"
    return None


register(Check("masking", "masked keys ignored; key order; broadcast = expanded", {"mask": group_masking}, check_masking,
               needs=_needs))
