"""The engine that draws a problem's seeded cases: the loops every check's group builders share (each pair of
variant and config, pairwise coverage, calls with every valid score far below 0) and `build`, which runs the
builders the checks declare (grader/judge/checks/)."""
from __future__ import annotations

import torch

from .scenarios import Case, base_call, cast, draw_configs, generator, make_mask, output_shapes, same_value
from ..masks import rule
from ..model.spec import Problem


def each_case(problem: Problem, seed: int):
    """(variant index, variant, config index, fitted config, generator factory) for every pair."""
    configs = draw_configs(seed)
    for vi, variant in enumerate(problem.variants):
        for ci, cfg in enumerate(configs):
            cfg = problem.fit(cfg, variant)
            yield vi, variant, ci, cfg, (lambda *p, vi=vi, ci=ci: generator(seed, problem.id, vi, ci, *p))


def case_key(group, vi, ci, *rest):
    return "/".join(map(str, (group, f"v{vi}", f"c{ci}", *rest)))


def with_args(problem, call: dict, overrides: dict) -> dict:
    """The call with some arguments replaced, by name (arguments it left to their defaults are spelled out first)."""
    args = list(call["args"])
    for name, value in overrides.items():
        at = problem.arg_names.index(name)
        args += [problem.call_defaults[n] for n in problem.arg_names[len(args):at + 1]]
        args[at] = value
    return dict(call, args=args)


def defaults_left_out(problem, call: dict) -> dict:
    """The call with its last arguments left out while they equal the signature's defaults (is_causal=False, the
    default block sizes): the learner's own defaults then answer, and are tested with the rest."""
    args, names = list(call["args"]), problem.arg_names
    while args and len(args) <= len(names) and same_value(args[-1], problem.call_defaults.get(names[len(args) - 1], ...)):
        args.pop()
    return dict(call, args=args)


def pairwise(options: dict) -> set:
    """Triples (variant, config, option) from {(variant, config): the options valid there} that cover every pair of
    variant and config, of variant and option, and of config and option that the cells allow: each (config,
    option) with the variants taken in turn, then any pair still missing."""
    variants = sorted({v for v, _ in options})
    configs = sorted({c for _, c in options})
    chosen: set = set()
    names = list(dict.fromkeys(o for opts in options.values() for o in opts))
    for c in configs:
        for i, o in enumerate(names):
            turn = [variants[(c + i + j) % len(variants)] for j in range(len(variants))]
            v = next((v for v in turn if o in options.get((v, c), ())), None)
            if v is not None:
                chosen.add((v, c, o))
    for (v, c), opts in options.items():
        if opts and not any((v, c) == t[:2] for t in chosen):
            chosen.add((v, c, opts[(v + c) % len(opts)]))
    for v in variants:
        for o in names:
            cells = [c for c in configs if o in options.get((v, c), ())]
            if cells and not any(t[0] == v and t[2] == o for t in chosen):
                chosen.add((v, cells[(v + names.index(o)) % len(cells)], o))
    return chosen


NEGATIVE = -50.0
"""Valid scores near this value underflow exp() to ~2e-22: a softmax that fills masked scores with
0 and renormalises afterwards loses the row (it no longer sums to 1)."""


def negative_cases(problem, seed, group, to, dtype):
    """Config 0 with per-query lengths (the last query sees one key: masked keys beside it, whatever B) and
    every score moved to about `to` by the spec's `negative` hook."""
    if problem.negative is None:
        return []
    cases = []
    for vi, variant, ci, cfg, gen in each_case(problem, seed):
        if ci != 0:
            continue
        call = base_call(problem, cfg, variant, gen(group, "neg"), make_mask(problem, "query", cfg, gen(group, "nlens"), low=1))
        problem.negative(call["args"], call["state"], {**cfg, **variant}, to)
        cases.append(Case(case_key(group, vi, ci, "negative"), group, variant, cfg, cast(call, dtype), lens=form(problem, "query"),
                          tags=frozenset({"negative"})))
    return cases


WIDE = 24
"""Keys (source positions) of the calls some checks draw beyond the configs' few (at most 11): code that behaves only on
small inputs is seen there."""


def carried_cases(problem, seed, group: str, *, dtype: str = "float64", grad: bool = False) -> list:
    """Where the spec's own draws never carry a cache or state argument (a KV cache grows, and its variants carry
    some): config 0 of each variant given a random one, of the shapes of the outputs that carry it (a cache returned as
    given, or a recurrent state), with a key padding draw; in `dtype`, with gradients where `grad`. The calls that reach
    what a given state or cache does to gradients, dtypes and side effects."""
    carry = problem.arg_index("cache")
    outs = [i for i, o in enumerate(problem.returns) if o.role == "cache"]
    if not carry or not outs:
        return []
    drawn = [(vi, variant, cfg, gen, base_call(problem, cfg, variant, gen(group, "carried"), make_mask(
        problem, "batch", cfg, gen(group, "carried", "lens"), low=1), grad=grad))
        for vi, variant, ci, cfg, gen in each_case(problem, seed) if ci == 0]
    if any(len(call["args"]) > carry[0] and call["args"][carry[0]] is not None for *_, call in drawn):
        return []
    cases = []
    for vi, variant, cfg, gen, call in drawn:
        g = gen(group, "carried", "given")
        shapes = output_shapes(problem, cfg)
        given = tuple(torch.randn(*shapes[i], generator=g, dtype=torch.float64).tanh() for i in outs)
        call = cast(with_args(problem, call, {problem.arg_names[carry[0]]: given}), dtype)
        cases.append(Case(case_key(group, vi, 0, "carried"), group, variant, cfg, call, lens=form(problem, "batch")))
    return cases


def sequence_roles(problem) -> tuple:
    """(the sequence argument (role 'tensor'), its position axis (where its doc names T), the state argument (role
    'cache'), the outputs that carry the state): what stepping a recurrent module position by position needs."""
    split, carry = problem.arg_index("tensor")[0], problem.arg_index("cache")[0]
    doc = problem.args[split].doc
    dim = [d.strip() for d in doc[doc.index("(") + 1:doc.index(")")].split(",")].index("T")
    return split, dim, carry, [i for i, o in enumerate(problem.returns) if o.role == "cache"]


def form(problem, kind: str) -> str:
    """The name of the masking form a call drawn with `kind` ("query", "batch") has: "none" where the problem has
    no masking argument, else its mask rule's per-query or per-batch form."""
    if problem.mask_role is None:
        return "none"
    r = rule(problem)
    return {"query": r.per_query, "batch": r.per_batch}.get(kind, kind)


def build(problem: Problem, groups, seed: int) -> dict[str, Case]:
    """All cases of the groups ({name: builder}, the builders the checks declare), keyed by case key (each key
    unique)."""
    cases = {}
    for name, builder in groups.items():
        for case in builder(problem, seed):
            case.builder = name
            case.call["key"] = case.key
            case.call.setdefault("n_out", len(problem.outputs))
            case.call.setdefault("names", list(problem.outputs))
            if problem.settle is not None:  # every call of every check, whichever built it (local attention's edges)
                problem.settle(case.call, {**case.variant, **case.cfg})
            cases[case.key] = case
    return cases
