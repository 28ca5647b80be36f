"""Check steps: a recurrent module's own step method, applied to each position in turn (each call given the state the
previous one returned), equals its forward on the whole sequence (teacher forcing), from no state and from a given one;
both equal the reference."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..compare import mismatch, tolerance
from ..context import compare_all
from ..registry import Check, options, register
from ...draw.groups import WIDE, case_key, each_case, form, sequence_roles, with_args
from ...draw.scenarios import Case, base_call, make_mask, output_shapes


@dataclass(frozen=True)
class StepOptions:
    """The steps check's options: `method`, the name of the module's step method (its signature is forward's with one
    position of the sequence argument)."""

    method: str = "step"


def group_steps(problem, seed):
    """Config 0 of each variant (B = 2, prime T and S): no state, and a random state (the state outputs' shapes), with a
    key padding draw that may leave a row empty; each once as one forward and once stepped."""
    split, dim, carry, outs = sequence_roles(problem)
    name = problem.arg_names[carry]
    method = options(problem, "steps").method
    cases = []
    for vi, variant, ci, cfg, gen in each_case(problem, seed):
        if ci != 0:
            continue
        if vi == 0:  # the first variant with many more keys than the drawn configs' (draw/groups.py WIDE)
            cfg = problem.fit({**cfg, "Tk": WIDE}, variant)
        for start in ("zeros", "given"):
            g = gen("steps", start)
            call = base_call(problem, cfg, variant, g, make_mask(problem, "batch", cfg, gen("steps", start, "mask")))
            shapes = output_shapes(problem, cfg)
            state = None if start == "zeros" else tuple(torch.randn(*shapes[i], generator=g, dtype=torch.float64).tanh()
                                                        for i in outs)
            call = with_args(problem, call, {name: state})
            key = lambda *rest, vi=vi, ci=ci, start=start: case_key("steps", vi, ci, start, *rest)  # noqa: E731
            hook = {"method": method, "split": split, "dim": dim, "carry": carry, "carry_outputs": outs}
            lens = form(problem, "batch")
            cases.append(Case(key("forward"), "steps", variant, cfg, call, lens=lens))
            cases.append(Case(key("stepped"), "steps", variant, cfg, dict(call, hooks={"steps": hook}), lens=lens,
                              meta={"stepped": True}))
    return cases


def check_steps(ctx):
    tol = tolerance("float64")
    method = options(ctx.problem, "steps").method
    forward = {}
    for case in sorted(ctx.of("steps"), key=lambda c: c.meta.get("stepped", False)):  # each forward before its steps
        got = ctx.outputs(case)
        pair = case.key.rsplit("/", 1)[0]
        if not case.meta.get("stepped"):
            forward[pair] = got
            compare_all(ctx, case, got, ctx.expected(case), tol)
            continue
        for name, g, e in zip(ctx.problem.outputs, got, forward[pair]):
            bad = mismatch(name, g, e, tol)
            if bad:
                ctx.fail(case, f"{method}() applied to each position in turn (each call given the state the previous "
                         f"one returned) differs from forward on the whole sequence: {bad}\nforward must be exactly "
                         f"{method}() applied to positions 0, 1, ..., T - 1, starting from the given state")
        compare_all(ctx, case, got, ctx.expected(case), tol)


def _needs(p):
    method = options(p, "steps").method
    if not any(m.signature.lstrip().startswith(f"def {method}(") for m in p.methods):
        return f"a method named {method!r} in the spec's methods"
    if not (p.arg_index("tensor") and p.arg_index("cache") and p.out_index("cache") is not None):
        return "an argument with role 'tensor' (its doc naming T), one with role 'cache', and outputs with role 'cache'"
    return None


register(Check("steps", "step() at each position = forward (teacher forcing)", {"steps": group_steps}, check_steps,
               options=StepOptions, needs=_needs, concepts=(("caching", None),)))
