"""Checks parameters and value_errors: what a constructor creates, and which arguments must raise ValueError."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..context import Failed
from ..registry import Check, options, register
from ...draw.describe import call_text, ctor_text, error_text
from ...draw.groups import case_key, each_case, with_args
from ...draw.scenarios import Case, base_call, make_mask


def group_ctor(problem, seed):
    cases = []
    for vi, variant, ci, cfg, gen in each_case(problem, seed):
        call = {"ctor": problem.ctor_call(cfg, variant), "construct": True}
        cases.append(Case(case_key("ctor", vi, ci), "ctor", variant, cfg, call))
    for i, (kwargs, why, words) in enumerate(options(problem, "parameters").errors):
        items = list(kwargs.items())
        ctor = {"args": [v for _, v in items[: problem.ctor_required]], "kwargs": dict(items[problem.ctor_required :])}
        meta = {"why": why, "words": words}
        cases.append(Case(f"ctor_error/{i}", "ctor_error", {}, {}, {"ctor": ctor, "construct": True}, reference=False, meta=meta, must_raise=True))
    return cases


def group_call_errors(problem, seed):
    """Calls with an invalid argument (config 0), which must raise ValueError; for a module, also the same call on the
    module just after a valid one (then a value it kept from that call must not make the invalid one work)."""
    cases = []
    for vi, variant, ci, cfg, gen in each_case(problem, seed):
        if ci != 0:
            continue
        call = base_call(problem, cfg, variant, gen("err"), make_mask(problem, "batch", cfg, gen("err", "lens")))
        for i, (overrides, why, words) in enumerate(options(problem, "value_errors").calls(cfg)):
            bad = with_args(problem, call, overrides)
            cases.append(Case(case_key("call_error", vi, ci, i), "ctor_error", variant, cfg, bad, must_raise=True,
                              reference=False, meta={"why": why, "words": words}))
            if problem.is_module:  # the same module after a call that worked: nothing it kept may stand in (a cache)
                after = dict(call, then=[{"args": bad["args"], "state": None}], repeat=2)
                cases.append(Case(case_key("call_error", vi, ci, i, "after"), "ctor_error", variant, cfg, after,
                                  must_raise=True, reference=False,
                                  meta={"why": f"{why}, on a module that has just answered a valid call", "words": words}))
    return cases


def check_parameters(ctx):
    p = ctx.problem
    for case in ctx.of("ctor"):
        expected = {n: list(s) for n, s in p.params({**case.cfg, **case.variant}).items()}
        got = ctx.result(case).params
        if got != expected:
            missing = sorted(set(expected) - set(got))
            extra = sorted(set(got) - set(expected))
            wrong = sorted(n for n in set(got) & set(expected) if got[n] != expected[n])
            lines = [f"{ctor_text(p, case.call['ctor'])} has parameters {_fmt(got)}", f"expected exactly {_fmt(expected)}"]
            lines += [f"missing: {', '.join(missing)}"] * bool(missing) + [f"unexpected: {', '.join(extra)}"] * bool(extra)
            lines += [f"{n}: shape {tuple(got[n])}, expected {tuple(expected[n])}" for n in wrong]
            raise Failed("\n".join(lines))
        extra = [n for n in (ctx.result(case).state or []) if n not in got]
        if extra:
            raise Failed(f"{ctor_text(p, case.call['ctor'])}.state_dict() holds {', '.join(extra[:5])} besides its "
                         "parameters: the contract's state_dict is exactly the parameters, so a buffer (a causal mask, "
                         "cached cos/sin tables) is registered with register_buffer(name, tensor, persistent=False)",
                         symptom="persistent_buffer")
    _must_raise(ctx, "ctor")


def raised_value_error(ctx, case, text: str, called: bool = False):
    """The result of a call that must raise ValueError (`case.meta["why"]` says why), once it did; else Failed (its
    message led by "called <text>" where `called`, as the checks that run calls say it)."""
    res = ctx.got.get(case.key)
    lead = f"called {text}\nit" if called else text
    if res is None:
        raise Failed(f"called {text}\nno result: {ctx.failure}")
    if res.ok:
        raise Failed(f"{lead} was accepted; {case.meta['why']} must raise ValueError")
    if not res.error.value_error:
        raise Failed(f"{lead} raised {error_text(res)}; {case.meta['why']} must raise ValueError")
    return res


def check_value_errors(ctx):
    _must_raise(ctx, "call_error")


def _must_raise(ctx, builder: str):
    """Every call or constructor of the ctor_error cases `builder` drew (the constructor's, "ctor"; the calls',
    "call_error") must raise ValueError (naming `words`)."""
    p = ctx.problem
    for case in (c for c in ctx.of("ctor_error") if c.builder == builder):
        text = ctor_text(p, case.call["ctor"]) if case.call.get("ctor") else call_text(p, case)
        res = raised_value_error(ctx, case, text)
        missing = [w for w in case.meta["words"] if w not in res.error.text]
        if missing:
            raise Failed(f"{text} raised {error_text(res)}\nthe message must name the valid choices; missing: {', '.join(missing)}")


def _fmt(params: dict) -> str:
    return "{" + ", ".join(f"{n}: {tuple(s)}" for n, s in sorted(params.items())) + "}" if params else "none"


def _contract(problem, options) -> list[str]:
    """The constructor's errors, for the problem's contract section."""
    if not options.errors:
        return []
    return ["The constructor raises `ValueError` for: "
            + "; ".join(f"{why} (`{', '.join(f'{k}={v!r}' for k, v in kw.items())}`)" for kw, why, _ in options.errors)
            + ".", ""]


@dataclass(frozen=True)
class ConstructorErrors:
    """The parameters check's options: (constructor kwargs in signature order, why it must raise ValueError, words
    the message must contain), one per invalid construction."""

    errors: tuple = ()


@dataclass(frozen=True)
class CallErrors:
    """The value_errors check's options: `calls(cfg)` -> ({arg name: value}, why, words), calls that must raise
    ValueError naming the words."""

    calls: Callable = lambda cfg: ()


register(Check("parameters", "parameter names and shapes, constructor errors", {"ctor": group_ctor}, check_parameters,
               explained_alone=True, options=ConstructorErrors, contract=_contract, names=("persistent_buffer",),
               needs=lambda p: None if p.is_module else "a module problem (a constructor)", concepts=(("shapes and heads", None),)))
register(Check("value_errors", "invalid arguments raise ValueError", {"call_error": group_call_errors}, check_value_errors,
               explained_alone=True, options=CallErrors))
