"""Check metamorphic: relations between two calls that the contract implies, whatever the reference computes.

A relation zeroes some columns of the module's weights in both calls, changes one argument (or one part of a tuple
argument, a recurrent state, or some positions of several arguments) in the second, and says whether the outputs it
names must stay the same (that input reaches them only through those columns) or must change (the input is used at
all), or which rows must change and which must not. Both calls are also compared with the reference. A spec declares
its relations: the order of a concatenation, what is fed forward, and which keys a window lets through are proven
this way and not only by agreeing with our own code."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import torch

from ..compare import mismatch, tolerance
from ..context import compare_all
from ..registry import Check, options, register
from ...draw.groups import case_key, each_case, form, with_args
from ...draw.scenarios import Case, base_call, make_mask, output_shapes


@dataclass(frozen=True)
class Relation:
    """`change`: an argument's name, "name[i]" for part i of a tuple argument, or names joined by commas;
    `positions(cfg)`: the positions along the changed arguments' sequence axis (-2) that change (None: all);
    `zero(cfg)` -> {parameter name: (first column, end column)} set to 0 in both calls; `same`: the outputs `compared`
    (all where empty) must be equal (True) or must differ (False); `rows(cfg)`: where given, a bool (Tq,) of the rows
    (axis -2 of the outputs) that must change, every other row must stay the same; `transform(cfg, args, gen)`: where
    given, the second call's arguments made from the first's (`change` then only names what it changes); `says`: the
    contract's rule, said when the relation breaks."""

    id: str
    change: str
    says: str
    zero: Callable = lambda cfg: {}
    same: bool = True
    compared: tuple = ()
    positions: Callable = lambda cfg: None
    rows: Callable | None = None
    transform: Callable | None = None


@dataclass(frozen=True)
class Relations:
    """The metamorphic check's options: its relations, and `fit(cfg)`, the dims (and trailing arguments) of their
    calls (config 0 of the first variant as drawn where not given)."""

    relations: tuple
    fit: Callable = lambda cfg: cfg

    def __post_init__(self):
        object.__setattr__(self, "relations", tuple(r if isinstance(r, Relation) else Relation(**r)
                                                    for r in self.relations))


def _part(change: str) -> tuple[str, int | None]:
    found = re.fullmatch(r"(\w+)\[(\d+)\]", change)
    return (found.group(1), int(found.group(2))) if found else (change, None)


def _state(problem, cfg, gen) -> dict:
    """A random value for each tuple argument (role 'cache') the call leaves None: the shapes of the outputs it
    carries forward."""
    outs = [i for i, o in enumerate(problem.returns) if o.role == "cache"]
    shapes = output_shapes(problem, cfg)
    return {problem.arg_names[i]: tuple(torch.randn(*shapes[j], generator=gen, dtype=torch.float64).tanh() for j in outs)
            for i in problem.arg_index("cache")}


def group_metamorphic(problem, seed):
    """Config 0 of the first variant (B = 2, prime T and S), a key padding draw and a random state: per relation, two
    calls."""
    cases = []
    opts = options(problem, "metamorphic")
    for vi, variant, ci, cfg, gen in each_case(problem, seed):
        if vi != 0 or ci != 0:
            continue
        cfg = opts.fit(cfg)
        for rel in opts.relations:
            g = gen("metamorphic", rel.id)
            call = base_call(problem, cfg, variant, g, make_mask(problem, "batch", cfg, gen("metamorphic", rel.id, "mask")))
            call = with_args(problem, call, _state(problem, cfg, g))
            for name, (lo, hi) in rel.zero({**cfg, **variant}).items():
                call["state"][name][..., lo:hi] = 0
            new = list(call["args"])
            for change in ([] if rel.transform else rel.change.split(",")):
                arg, part = _part(change.strip())
                at = problem.arg_names.index(arg)
                old = call["args"][at]
                if part is not None:
                    new[at] = tuple(torch.randn(t.shape, generator=g, dtype=t.dtype) if i == part else t
                                    for i, t in enumerate(old))
                    continue
                new[at] = torch.randn(old.shape, generator=g, dtype=old.dtype)
                where = rel.positions({**variant, **cfg})
                if where is not None:  # only these positions change
                    new[at] = old.clone()
                    new[at][..., where, :] = torch.randn(old[..., where, :].shape, generator=g, dtype=old.dtype)
            if rel.transform:
                new = list(rel.transform({**variant, **cfg}, call["args"], g))
            key = lambda *rest, ci=ci, rid=rel.id: case_key("metamorphic", vi, ci, rid, *rest)  # noqa: E731
            lens = form(problem, "batch")
            cases.append(Case(key("a"), "metamorphic", variant, cfg, call, lens=lens, meta={"relation": rel.id}))
            cases.append(Case(key("b"), "metamorphic", variant, cfg, dict(call, args=new), lens=lens,
                              meta={"relation": rel.id, "changed": True}))
    return cases


def check_metamorphic(ctx):
    """Each relation first (what it proves is the rule the learner can act on), then both calls against the
    reference."""
    tol = tolerance("float64")
    relations = {r.id: r for r in options(ctx.problem, "metamorphic").relations}
    pairs: dict = {}
    for case in ctx.of("metamorphic"):
        pairs.setdefault(case.key.rsplit("/", 1)[0], {})["b" if case.meta.get("changed") else "a"] = case
    for pair in pairs.values():
        rel = relations[pair["a"].meta["relation"]]
        before, after = ctx.outputs(pair["a"]), ctx.outputs(pair["b"])
        names = rel.compared or ctx.problem.outputs
        compared = [(n, g, e) for n, g, e in zip(ctx.problem.outputs, after, before) if n in names]
        if rel.rows is not None:
            _rows(ctx, pair["b"], rel, compared, tol)
        elif rel.same:
            bad = next((b for b in (mismatch(n, g, e, tol) for n, g, e in compared) if b), None)
            if bad:
                ctx.fail(pair["b"], f"{rel.says}\nthe call before {rel.change} was changed and this one differ: {bad}")
        elif all(mismatch(n, g, e, tol) is None for n, g, e in compared):
            ctx.fail(pair["b"], f"{rel.says}\nchanging {rel.change} changed none of {', '.join(names)}")
    for pair in pairs.values():
        for case in pair.values():
            compare_all(ctx, case, ctx.outputs(case), ctx.expected(case), tol)


def _rows(ctx, case, rel, compared, tol) -> None:
    """Each row that must change differs somewhere, and every other row is the same, in each compared output."""
    moves = rel.rows({**case.variant, **case.cfg})
    for name, got, before in compared:
        for i, must in enumerate(moves.tolist()):
            bad = mismatch(f"{name}[..., {i}, :]", got[..., i, :], before[..., i, :], tol)
            if must and bad is None:
                ctx.fail(case, f"{rel.says}\nchanging {rel.change} left row {i} of {name} as it was; it must change")
            if not must and bad:
                ctx.fail(case, f"{rel.says}\nchanging {rel.change} changed row {i} of {name}, which must stay the same:"
                         f" {bad}")


def _needs(p):
    if not (p.options or {}).get("metamorphic", {}).get("relations"):
        return "options['metamorphic'] (its relations)"
    return None


register(Check("metamorphic", "relations the contract implies (what feeds what, in which order)",
               {"metamorphic": group_metamorphic}, check_metamorphic, options=Relations, needs=_needs))
