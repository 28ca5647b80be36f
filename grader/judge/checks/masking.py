"""Check masking: masked keys are ignored, valid key order does not matter, a broadcast mask equals its expansion."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..compare import mismatch, tolerance
from ..registry import Check, options, register
from ...masks import rule
from ...draw.groups import case_key, each_case
from ...draw.scenarios import Case, base_call, make_lens, spread


@dataclass(frozen=True)
class MaskingOptions:
    """The masking check's options: `permuted` False where the keys' order matters (attention over positions, such
    as a local window), so that permuting valid key/value pairs is not asked to permute the weights."""

    permuted: bool = True


def group_masking(problem, seed):
    """Config 0: original, tail keys/values made huge, lens per query, keys permuted within lens.
    The problem's mask rule lays the lengths out as its argument (a mask problem: a key padding mask, and the
    per-query one spelled out to its full (..., Tq, Tk) shape)."""
    cases = []
    for vi, variant, ci, cfg, gen in each_case(problem, seed):
        if ci != 0:
            continue
        g = gen("mask")
        lens = make_lens("batch", cfg, g, low=1)
        per_query = lens[:, None].expand(cfg["B"], cfg["Tq"]).clone()
        arg = rule(problem).from_lengths(problem, cfg, lens)
        per_query = rule(problem).from_lengths(problem, cfg, per_query, spell_out=True) if rule(problem).spelled_out \
            else None
        orig = base_call(problem, cfg, variant, g, arg)
        Tk, at = cfg["Tk"], problem.mask_index
        beyond = torch.arange(Tk)[None, :] >= lens[:, None]  # (B, Tk)
        perm = torch.stack([
            torch.cat([torch.randperm(int(n), generator=g), torch.arange(int(n), Tk)]) for n in lens
        ])  # (B, Tk): a permutation of the valid prefix of each row
        noise = lambda t, scale: scale * torch.randn(t.shape, generator=g, dtype=torch.float64)  # noqa: E731
        loud, permuted = list(orig["args"]), list(orig["args"])
        for i in problem.arg_index("scores"):  # scores at masked positions become large, within the contract's bound
            where = spread(beyond, loud[i].dim() - 1)
            loud[i] = torch.where(where, noise(loud[i], 1e4).clamp(-1e4, 1e4), loud[i])
            permuted[i] = torch.gather(orig["args"][i], -1, spread(perm, loud[i].dim() - 1).expand_as(loud[i]))
        # keys beyond valid_len become large (x100), values huge (x1e4); key/value pairs permuted together
        for role, scale in (("key", 1e2), ("value", 1e4)):
            for i in problem.arg_index(role):
                x = orig["args"][i]
                loud[i] = torch.where(spread(beyond, x.dim() - 2, 1), noise(x, scale), x)
                permuted[i] = torch.gather(x, -2, spread(perm, x.dim() - 2, 1).expand_as(x))
        variants = {
            "orig": orig,
            "loud": dict(orig, args=loud),
            "per_query": dict(orig, args=orig["args"][:at] + [per_query] + orig["args"][at + 1:]),
            "permuted": dict(orig, args=permuted),
        }
        if not rule(problem).spelled_out:  # one form only (a key padding mask): nothing to spell out
            del variants["per_query"]
        if not options(problem, "masking").permuted:
            del variants["permuted"]
        for name, call in variants.items():
            cases.append(Case(case_key("mask", vi, ci, name), "mask", variant, cfg, call, lens="batch", meta={"perm": perm}))
    return cases


def check_masking(ctx):
    tol = tolerance("float64")
    groups = {}
    for c in ctx.of("mask"):
        groups.setdefault(c.key.rsplit("/", 1)[0], {})[c.key.rsplit("/", 1)[1]] = c
    for parts in groups.values():
        orig = ctx.outputs(parts["orig"])
        rules = [("loud", orig, "changing keys/values (or scores) at masked positions changed the result: masked "
                  "positions leak in")]
        if "per_query" in parts:
            rules.append(("per_query", orig, f"{_per_query_words(ctx.problem)} gave different results"))
        if "permuted" in parts:  # key order does not matter
            perm = parts["permuted"].meta["perm"]
            moved = [_permuted(out, o, perm) for out, o in zip(ctx.problem.returns, orig)]
            rules.append(("permuted", moved, "permuting valid key/value pairs together must permute the weights (and "
                          "any returned keys and values) the same way and leave the output unchanged"))
        for name, expected, why in rules:
            got = ctx.outputs(parts[name])
            for out, g, e in zip(ctx.problem.returns, got, expected):
                if name == "loud" and out.role == "cache":  # returned keys and values hold the changed ones
                    continue
                problem = mismatch(out.name, g, e, tol)
                if problem:
                    ctx.fail(parts[name], f"{why}\n{problem}")


def _permuted(out, value, perm):
    """What a returned tensor becomes when the valid keys are permuted by `perm` (B, Tk): the weights along their
    last axis, returned keys and values (a cache, `(B, H, S, d)`) along their key axis S, anything else unchanged."""
    names = out.dims.split()
    if out.role == "weights":
        return torch.gather(value, -1, spread(perm, value.dim() - 1).expand_as(value))
    if out.role == "cache" and ("S" in names or "Tk" in names):
        at = names.index("S" if "S" in names else "Tk") - len(names)  # from the end
        moved = value.movedim(at, -1)
        return torch.gather(moved, -1, spread(perm, moved.dim() - 1).expand_as(moved)).movedim(-1, at)
    return value


def _per_query_words(problem) -> str:
    return rule(problem).spelled_out


def _needs(p):
    if not rule(p).lengths or p.weights_index is None:
        return "a masking argument whose rule can express lengths (grader/masks/) and an output with role 'weights'"
    if not p.arg_index("scores") and not p.arg_index("key"):
        return "an argument with role 'key' (and 'value', where the values are not the keys themselves), or 'scores'"
    return None


register(Check("masking", "masked keys ignored; key order; broadcast = expanded", {"mask": group_masking}, check_masking,
               options=MaskingOptions,
               needs=_needs, concepts=(("masking", None),)))
