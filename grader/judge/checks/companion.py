"""Check companion: the other functions a function problem's file defines beside the graded one (alibi_slopes beside
alibi_attention, linear_attention_step beside causal_linear_attention), each called as the contract says, and the
graded one called with its defaults. Each call's values equal the reference's own function on the same arguments, at
the tolerance of the dtype that came back (where the contract lets it choose); stepped calls run the function once
per position, each given the state the previous returned; calls with invalid arguments must raise ValueError; no
call modifies what it is given."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..compare import mismatch, tolerance
from ..registry import Check, options, register
from ...draw.describe import arg_name, call_text
from ...draw.groups import case_key, each_case
from ...draw.scenarios import Case, output_structure
from .construct import raised_value_error


STEPPED = "steps"
"""The worker hook (run/hooks/steps.py) that steps a call's function over positions."""


@dataclass(frozen=True)
class Other:
    """One call: `symbol` (None: the graded function itself) with positional `args`; `raises`: why it must raise
    ValueError (empty: it must not); `dtypes`: the dtypes it may return (empty: the call's `dtype`); `steps`: where
    given, the steps hook's options ({"split", "dim", "carry", "carry_outputs"}): the function is stepped over
    positions; `tolerance`, `grad_out`: see below."""

    symbol: str | None
    args: list
    raises: str = ""
    dtypes: tuple = ()
    steps: dict | None = None
    dtype: str = "float64"
    tolerance: str = ""  # compare at this dtype's tolerance instead (a float64 call whose inputs carry less)
    grad_out: list | None = None  # one tensor per output: the gradients of sum(output * grad_out) are compared too


@dataclass(frozen=True)
class Companions:
    """The companion check's options: `calls(cfg, gen)` -> [Other, or its fields as a dict], on config 0 of the first
    variant (its dims, and a seeded generator)."""

    calls: Callable = field(default=lambda cfg, gen: ())


def _call(problem, other: Other) -> dict:
    method = problem.method(other.symbol)
    hooks = {} if other.steps is None else {STEPPED: dict(other.steps)}
    structure = output_structure(problem, method)
    how = None if other.steps is None else \
        "at each position in turn, each step given the state the previous one returned"
    return {"ctor": None, "symbol": other.symbol, "how": how, "state": None, "args": list(other.args), "train": False,
            "seed": 0, "repeat": 1,
            "grad_out": other.grad_out, "device": "cpu", "dtype": None if other.dtypes else other.dtype,
            "n_out": len(method.returns), "structure": structure, "names": [o.name for o in method.returns],
            "hooks": hooks}


def group_companion(problem, seed):
    for vi, variant, ci, cfg, gen in each_case(problem, seed):
        others = [o if isinstance(o, Other) else Other(**o)
                  for o in options(problem, "companion").calls({**cfg, **variant}, gen("companion"))]
        # where the function may choose among dtypes, results are compared at the widest one's tolerance
        return [Case(case_key("companion", vi, ci, i), "companion", variant, cfg, _call(problem, o),
                     must_raise=bool(o.raises), reference=not o.raises,
                     meta={"why": o.raises, "dtypes": o.dtypes or (o.dtype,)},
                     tol=tolerance(o.tolerance) if o.tolerance else
                     max((tolerance(d) for d in o.dtypes), key=lambda t: t.rtol, default=None))
                for i, o in enumerate(others)]
    return []


def check_companion(ctx):
    for case in ctx.of("companion"):
        if case.must_raise:
            raised_value_error(ctx, case, call_text(ctx.problem, case), called=True)
            continue
        got, expected = ctx.outputs(case), ctx.expected(case)
        for name, g, e in zip(case.call["names"], got, expected):
            dtype = str(g.dtype).removeprefix("torch.")
            if dtype not in case.meta["dtypes"]:
                ctx.fail(case, f"{name} came back as {dtype}, expected {' or '.join(case.meta['dtypes'])}")
            if g.device.type != "cpu":
                ctx.fail(case, f"{name} came back on {g.device.type}, expected the CPU")
            bad = mismatch(name, g, e, case.tol if case.tol and not case.meta["dtypes"][1:] else tolerance(dtype))
            if bad:
                ctx.fail(case, bad)
        for key, expected in (ctx.ref[case.key].grads or {}).items() if case.call.get("grad_out") else ():
            got = (ctx.result(case).grads or {}).get(key)
            label = f"gradient of {arg_name(ctx.problem, case.call, int(key.split(':')[1].split('.')[0]))}"
            bad = "no gradient reaches it" if got is None else mismatch(label, got, expected,
                                                                         tolerance(case.call["dtype"], grad=True))
            if bad:
                ctx.fail(case, bad if got is not None else f"{label}: {bad}")
        changed = ctx.result(case).changed
        if changed:
            name = arg_name(ctx.problem, case.call, changed[0])
            ctx.fail(case, f"the call modified its input `{name}` in place: what it returns must be new tensors "
                     "(S = S + ..., not S += ...)")


register(Check("companion", "the file's other functions, and the defaults", {"companion": group_companion},
               check_companion, options=Companions, needs=lambda p: None if "companion" in (p.options or {}) else
               "companion calls (spec options['companion']['calls'])", concepts=(("shapes and heads", None),)))
