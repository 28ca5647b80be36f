"""Check memory: the largest tensor the forward allocates stays within the problem's bound."""
from __future__ import annotations

from ..compare import tolerance
from ..context import compare_all
from ..registry import Check, register
from ...draw.groups import group_memory


def check_memory(ctx):
    words = ctx.problem.memory_words
    for case in ctx.of("memory"):
        res = ctx.result(case)
        peak, allowed = res["peak"], case.meta["allowed"]
        if not peak["ops"]:
            ctx.fail(case, "the allocation measurement saw no operator during the forward: it was switched off "
                     "(a disabled dispatch mode); the memory bound cannot be checked, so it is not met")
        limit, resident = case.meta.get("resident_kb"), peak.get("resident_kb")
        if limit is not None and resident is not None and resident > limit:
            ctx.fail(case, f"the process's resident memory grew by {resident / 1024:.1f} MB during the forward; "
                     f"a solution within the bound needs well under {limit / 1024:.0f} MB here: "
                     f"{words['tensor']}, or a large part of it, was built")
        if peak["elements"] > allowed:
            ctx.fail(case, f"the forward allocated a tensor of {peak['elements']} elements ({peak['op']}); "
                     f"allowed at most {allowed} = {words['bound']}. {words['advice']}")
        compare_all(ctx, case, ctx.outputs(case), ctx.expected(case), tolerance(case.call["dtype"]))


register(Check("memory", "largest allocation within the problem's bound", {"memory": group_memory}, check_memory,
               needs=lambda p: None if (p.memory is not None or p.memory_backstop) and p.memory_words
               else "memory calls and their words (spec fields memory, memory_words)"))
