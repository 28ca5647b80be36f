"""Check reuse: one module, called again and again, as a model is in training or decoding.

Three calls on the same module in train() (no dropout): the drawn call; the very same input tensors again after new
weights are loaded in place (an optimizer's step); new inputs under the new weights. Each must equal the reference's
run of the same sequence, and the module's state_dict must hold the same names after them. A value remembered from an
earlier call (a projection kept in an attribute), weights changed by a forward, a buffer shared by the tensors
returned from two calls, or parameters added on the way show there."""
from __future__ import annotations

from dataclasses import dataclass

from ..compare import tolerance
from ..context import Failed, compare_all
from ..registry import Check, options, register
from ...draw.groups import case_key, each_case, form, sequence_roles
from ...draw.scenarios import Case, base_call, make_mask, make_state


@dataclass(frozen=True)
class ReuseOptions:
    """The reuse check's options: `stepped`, the name of a method that takes one position at a time (a decoder's
    step), through which the same three calls are made once more (a projection of the memory kept by the step method
    across calls shows only there)."""

    stepped: str | None = None


def group_reuse(problem, seed):
    """Config 0 of the first variant: the call, then its input tensors again under new weights, then new inputs; the
    same again through the spec's stepped method, where it names one."""
    cases = []
    method = options(problem, "reuse").stepped
    for vi, variant, ci, cfg, gen in each_case(problem, seed):
        if vi != 0 or ci != 0:
            continue
        first = base_call(problem, cfg, variant, gen("reuse"), make_mask(problem, "batch", cfg, gen("reuse", "mask")))
        second = base_call(problem, cfg, variant, gen("reuse", 2), make_mask(problem, "batch", cfg, gen("reuse", 2, "mask")))
        weights = make_state(problem, {**cfg, **variant}, gen("reuse", "weights"))
        then = [{"args": None, "state": weights}, {"args": second["args"], "state": None}]
        call = dict(first, train=True, then=then, repeat=1 + len(then))
        cases.append(Case(case_key("reuse", vi, ci), "reuse", variant, cfg, call, lens=form(problem, "batch")))
        if method:
            split, dim, carry, outs = sequence_roles(problem)
            hook = {"method": method, "split": split, "dim": dim, "carry": carry, "carry_outputs": outs}
            stepped = dict(call, hooks={"steps": hook})
            cases.append(Case(case_key("reuse", vi, ci, method), "reuse", variant, cfg, stepped,
                              lens=form(problem, "batch"), meta={"stepped": method}))
    return cases


WHAT = ("the first call", "the second call (the same input tensors again, new weights loaded into the same module)",
        "the third call (new inputs, under the second weights)")


def check_reuse(ctx):
    tol = tolerance("float64")
    for case in ctx.of("reuse"):
        res = ctx.result(case)
        for run, what in enumerate(WHAT):
            try:
                compare_all(ctx, case, ctx.outputs(case, run), ctx.expected(case, run), tol)
            except Failed as failed:  # said for this run of the sequence
                how = f" (each call made through {case.meta['stepped']}(), position by position)" \
                    if case.meta.get("stepped") else ""
                raise Failed(f"{failed}\nin {what}{how}, on the same module in train(): nothing may carry over from one "
                             "call to the next (a value kept from an earlier call, weights a forward changed, a buffer "
                             "the returned tensors share)", failed.case, failed.symptom) from None
        expected = set(ctx.ref[case.key].state or [])
        got = res.state if isinstance(res.state, list) and all(isinstance(n, str) for n in res.state) else None
        if got is None or set(got) != expected:
            extra = sorted(set(got or []) - expected)[:5]
            ctx.fail(case, f"after three calls the module's state_dict holds {len(got or [])} names, expected "
                     f"{len(expected)}" + (f" (new: {', '.join(repr(n[:60]) for n in extra)})" if extra else "")
                     + ": a forward adds no parameter or persistent buffer")


register(Check("reuse", "the same module used again: nothing carried over from one call to the next",
               {"reuse": group_reuse}, check_reuse, options=ReuseOptions,
               needs=lambda p: None if p.is_module else "a module problem (a constructor)"))
