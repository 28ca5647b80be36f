"""Check kv_cache: decoding in steps equals one call. The same tokens, given to the module in one call and
split into a prefill and later calls (single tokens among them), each call given the cache the previous one
returned, must give the same outputs and the same final cache; and both must match the reference's."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..compare import mismatch, tolerance
from ..context import compare_all
from ..registry import Check, options, register
from ...draw.groups import case_key, each_case, with_args
from ...draw.scenarios import Case, base_call, make_mask


@dataclass(frozen=True)
class Chained:
    """The kv_cache check's options: `fit(cfg, T)` the dims of a call of T new tokens (by default T and the keys
    S = P + T of a self-attention cache); `rule`, what a call in steps must respect, said where the steps differ."""

    fit: Callable = lambda cfg, T: {**cfg, "T": T, "S": cfg["P"] + T}
    rule: str = ("A new token at position P + t must see the cache and the new tokens up to itself, rotated at its own "
                 "position")

SPLITS = ((3, 1, 1, 2), (1,) * 7, (6, 1))
"""How the 7 new tokens are split: a prefill then single tokens, one token at a time, and a long prefill."""


def _axis(problem) -> int:
    """The new tokens' axis of the split argument: where its documented dims name T."""
    doc = problem.args[problem.arg_index("tensor")[0]].doc
    return [d.strip() for d in doc.strip("()").split(",")].index("T")


def group_cache_chain(problem, seed):
    """Config 0 of each variant with T = 7 new tokens (after the variant's cache, if any): one call, then each split."""
    split, carry = problem.arg_index("tensor")[0], problem.arg_index("cache")[0]
    carry_outputs = [i for i, o in enumerate(problem.returns) if o.role == "cache"]
    fit = options(problem, "kv_cache").fit
    cases = []
    for vi, variant, ci, cfg, gen in each_case(problem, seed):
        if ci != 0:
            continue
        cfg = fit(cfg, 7)
        call = base_call(problem, cfg, variant, gen("chain"), make_mask(problem, "batch", cfg, gen("chain", "mask"), low=1))
        if len(call["args"]) <= carry:  # the cache left to its default: spelled out, as the chain passes it on
            call = with_args(problem, call, {problem.arg_names[carry]: problem.call_defaults[problem.arg_names[carry]]})
        cases.append(Case(case_key("chain", vi, ci, "whole"), "chain", variant, cfg, call, meta={"sizes": None}))
        for si, sizes in enumerate(SPLITS):
            chain = {"sizes": list(sizes), "split": split, "dim": _axis(problem), "carry": carry,
                     "carry_outputs": carry_outputs}
            cases.append(Case(case_key("chain", vi, ci, si), "chain", variant, cfg, dict(call, hooks={"chain": chain}),
                              meta={"sizes": sizes}))
    return cases


def check_kv_cache(ctx):
    tol = tolerance("float64")
    whole = None
    for case in ctx.of("chain"):
        got = ctx.outputs(case)
        if case.meta["sizes"] is None:
            whole = got
            compare_all(ctx, case, got, ctx.expected(case), tol)
            continue
        steps = ", ".join(map(str, case.meta["sizes"]))
        for name, g, e in zip(ctx.problem.outputs, got, whole):
            bad = mismatch(name, g, e, tol)
            if bad:
                ctx.fail(case, f"the same 7 tokens in calls of {steps} tokens (each call given the cache the previous "
                         f"one returned) differ from one call on all 7: {bad}\n{options(ctx.problem, 'kv_cache').rule}")
        compare_all(ctx, case, got, ctx.expected(case), tol)


register(Check("kv_cache", "decoding in steps = one call (outputs and final cache)", {"chain": group_cache_chain},
               check_kv_cache, options=Chained,
               needs=lambda p: None if p.arg_index("tensor") and p.arg_index("cache") and p.out_index("cache") is not None
               else "an argument with role 'tensor', one with role 'cache' and outputs with role 'cache'", concepts=(("caching", None),)))
