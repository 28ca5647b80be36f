"""Check memory_cache: keys and values projected from an encoder's memory once, then reused from the cache.

With a cache given, the memory is never read: the same call with `memory=None`, and with a memory of other values,
gives what the cache alone gives, and returns the cache it was given; decoding the queries in steps, each step given
the cache the first one returned and no memory, gives what one call gives."""
from __future__ import annotations

import torch

from ..compare import mismatch, tolerance
from ..context import Failed, compare_all
from ..registry import Check, register
from ...draw.groups import WIDE, case_key, each_case, form
from ...draw.scenarios import Case, base_call, make_mask, output_shapes

SPLITS = ((1, None), (2, 1, None))
"""Steps of the queries: one, then the rest; two, one, then the rest (None: what is left)."""


def _roles(problem):
    """(query argument, memory argument, cache argument, cache outputs) positions."""
    return (problem.arg_index("query")[0], problem.arg_index("key")[0], problem.arg_index("cache")[0],
            [i for i, o in enumerate(problem.returns) if o.role == "cache"])


def _with(problem, call: dict, at: dict) -> dict:
    """The call with the arguments at positions `at` replaced (those before spelled out as drawn or defaulted)."""
    args = list(call["args"])
    args += [problem.call_defaults[n] for n in problem.arg_names[len(args):max(at) + 1]]
    for i, value in at.items():
        args[i] = value
    return dict(call, args=args)


def group_memory_cache(problem, seed):
    """Config 0 (B = 2, prime Tq and S) of each variant with a key padding draw: the memory projected (no cache); a
    random cache with memory=None, and with a memory of other values; the queries in steps against the first step's
    cache."""
    x_at, mem_at, cache_at, outs = _roles(problem)
    cases = []
    for vi, variant, ci, cfg, gen in each_case(problem, seed):
        if ci != 0:
            continue
        if vi == 0:  # the first variant with many more keys than the drawn configs' (draw/groups.py WIDE)
            cfg = problem.fit({**cfg, "Tk": WIDE}, variant)
        g = gen("memory_cache")
        call = base_call(problem, cfg, variant, g, make_mask(problem, "batch", cfg, gen("memory_cache", "mask")))
        shapes = output_shapes(problem, cfg)
        cache = tuple(torch.randn(*shapes[i], generator=g, dtype=torch.float64) for i in outs)
        other = torch.randn(call["args"][mem_at].shape, generator=g, dtype=torch.float64)
        key = lambda *rest, vi=vi, ci=ci: case_key("memory_cache", vi, ci, *rest)  # noqa: E731
        lens = form(problem, "batch")
        cases.append(Case(key("projected"), "memory_cache", variant, cfg, call, lens=lens))
        cases.append(Case(key("cached"), "memory_cache", variant, cfg, _with(problem, call, {mem_at: None, cache_at: cache}),
                          lens=lens, meta={"role": "cached"}))
        cases.append(Case(key("ignored"), "memory_cache", variant, cfg, _with(problem, call, {mem_at: other, cache_at: cache}),
                          lens=lens, meta={"role": "ignored"}))
        Tq = cfg["Tq"]
        for si, split in enumerate(SPLITS):
            sizes = [s for s in split if s is not None]
            if sum(sizes) >= Tq:
                continue
            sizes.append(Tq - sum(sizes))
            chain = {"sizes": sizes, "split": x_at, "dim": -2, "carry": cache_at, "carry_outputs": outs}
            # after the first step: no memory, or (its own cache in hand) a memory of other values, to be ignored
            chain.update({"clear": [mem_at]} if si == 0 else {"later": [(mem_at, other)]})
            cases.append(Case(key("steps", si), "memory_cache", variant, cfg, dict(_with(problem, call, {cache_at: None}),
                                                                                  hooks={"chain": chain}),
                              lens=lens, meta={"role": "steps", "sizes": sizes, "memory": "none" if si == 0 else "other"}))
    return cases


def check_memory_cache(ctx):
    tol = tolerance("float64")
    groups: dict = {}
    for case in ctx.of("memory_cache"):
        groups.setdefault(case.key.rsplit("/", 2)[0] if "steps" in case.key else case.key.rsplit("/", 1)[0], []).append(case)
    for cases in groups.values():
        by_role = {c.meta.get("role", "projected"): c for c in cases if c.meta.get("role") != "steps"}
        projected = ctx.outputs(by_role["projected"])
        compare_all(ctx, by_role["projected"], projected, ctx.expected(by_role["projected"]), tol)
        cached = _outputs(ctx, by_role["cached"], "with a cache given, memory may be None: the cache alone holds the "
                          "keys and values")
        compare_all(ctx, by_role["cached"], cached, ctx.expected(by_role["cached"]), tol)
        ignored = _outputs(ctx, by_role["ignored"], "")
        for name, g, e in zip(ctx.problem.outputs, ignored, cached):
            bad = mismatch(name, g, e, tol)
            if bad:
                ctx.fail(by_role["ignored"], "with a cache given, the memory must be ignored (never projected): the same "
                         f"call with memory=None and with a memory of other values differ\n{bad}")
        for case in (c for c in cases if c.meta.get("role") == "steps"):
            steps = _outputs(ctx, case, "with a cache given, memory may be None")
            for name, g, e in zip(ctx.problem.outputs, steps, projected):
                bad = mismatch(name, g, e, tol)
                if bad:
                    given = "memory=None" if case.meta.get("memory") == "none" else "a memory of other values"
                    ctx.fail(case, f"the queries in steps of {', '.join(map(str, case.meta['sizes']))}, each step after the "
                             f"first given the cache the first returned and {given}, differ from one call on all of "
                             f"them\n{bad}")


def _outputs(ctx, case, why: str) -> list:
    """The case's outputs; a call that raised fails with the contract's rule `why` added."""
    try:
        return ctx.outputs(case)
    except Failed as failed:
        res = ctx.got.get(case.key)
        if why and res is not None and not res.ok and not res.rejected:  # it raised: say what the contract allows
            raise Failed(f"{failed}\n{why}", failed.case, failed.symptom) from None
        raise


register(Check("memory_cache", "memory projected once; a given cache used, memory ignored; steps = one call",
               {"memory_cache": group_memory_cache}, check_memory_cache,
               needs=lambda p: None if p.arg_index("query") and p.arg_index("key") and p.arg_index("cache")
               and p.out_index("cache") is not None
               else "arguments with roles 'query', 'key' and 'cache', and outputs with role 'cache'",
               concepts=(("caching", None),)))
