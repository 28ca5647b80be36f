"""Checks cuda and cuda_half: the same calls on a GPU, in every floating dtype."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..compare import tolerance
from ..context import compare_all
from ..registry import Check, options, register
from ...draw.groups import case_key, each_case, form
from ...draw.scenarios import Case, base_call, cast, make_mask


@dataclass(frozen=True)
class HalfInputs:
    """The cuda_half check's options: `within(args)`, None or a function that moves a float64 call's inputs, in place,
    into the range where float16 and bfloat16 can carry the contract's result (linear attention's features: elu(x) +
    1 rounds to 0 in bfloat16 long before x = -8, the float32 range the contract names)."""

    within: Callable | None = None


def group_cuda(problem, seed, dtypes=("float64", "float32"), group="cuda", within=None, device="cuda", reference=True):
    """Config 0 of each variant in each of `dtypes` on `device` (with `reference` False: judged without values)."""
    cases = []
    for vi, variant, ci, cfg, gen in each_case(problem, seed):
        if ci != 0:
            continue
        call = base_call(problem, cfg, variant, gen(group), make_mask(problem, "query", cfg, gen(group, "lens")))
        if within is not None:
            within(call["args"])
        for dt in dtypes:
            cases.append(Case(case_key(group, vi, ci, dt), group, variant, cfg, dict(cast(call, dt), device=device),
                              lens=form(problem, "query"), reference=reference))
    return cases


def group_half(problem, seed):
    return group_cuda(problem, seed, ("float16", "bfloat16"), "half", options(problem, "cuda_half").within)


def check_device(group: str):
    def judge(ctx):
        for case in ctx.of(group):
            res = ctx.result(case)
            if any(d != "cuda" for d in res.devices):
                ctx.fail(case, f"outputs came back on {res.devices}, expected cuda (the inputs' device)")
            compare_all(ctx, case, ctx.outputs(case), ctx.expected(case), tolerance(case.call["dtype"]))

    return judge


register(Check("cuda", "CUDA float64/float32 vs CPU reference", {"cuda": group_cuda}, check_device("cuda"), needs_cuda=True))
register(Check("cuda_half", "CUDA float16/bfloat16", {"half": group_half}, check_device("half"), needs_cuda=True,
               options=HalfInputs, concepts=(("numerical stability", None),)))
