"""The groups of seeded cases each check reads (one function per group), and `build`."""
from __future__ import annotations

import torch

from .scenarios import Case, base_call, cast, draw_configs, generator, lens_to_mask, make_lens, make_mask, mask_kinds, spread
from ..model.spec import SCORE_BOUND, Problem


def each_case(problem: Problem, seed: int):
    """(variant index, variant, config index, fitted config, generator factory) for every pair."""
    configs = draw_configs(seed)
    for vi, variant in enumerate(problem.variants):
        for ci, cfg in enumerate(configs):
            cfg = problem.fit(cfg, variant)
            yield vi, variant, ci, cfg, (lambda *p, vi=vi, ci=ci: generator(seed, problem.id, vi, ci, *p))


def case_key(group, vi, ci, *rest):
    return "/".join(map(str, (group, f"v{vi}", f"c{ci}", *rest)))


def group_ctor(problem, seed):
    cases = []
    for vi, variant, ci, cfg, gen in each_case(problem, seed):
        call = {"ctor": problem.ctor_call(cfg, variant), "construct": True}
        cases.append(Case(case_key("ctor", vi, ci), "ctor", variant, cfg, call))
    for i, (kwargs, why, words) in enumerate(problem.ctor_errors):
        items = list(kwargs.items())
        ctor = {"args": [v for _, v in items[: problem.ctor_required]], "kwargs": dict(items[problem.ctor_required :])}
        meta = {"why": why, "words": words}
        cases.append(Case(f"ctor_error/{i}", "ctor_error", {}, {}, {"ctor": ctor, "construct": True}, reference=False, meta=meta))
    return cases


def with_args(problem, call: dict, overrides: dict) -> dict:
    """The call with some arguments replaced, by name (arguments it left to their defaults are spelled out first)."""
    args = list(call["args"])
    for name, value in overrides.items():
        at = problem.arg_names.index(name)
        args += [problem.call_defaults[n] for n in problem.arg_names[len(args):at + 1]]
        args[at] = value
    return dict(call, args=args)


def group_call_errors(problem, seed):
    """Function problems: calls with an invalid argument (config 0), which must raise ValueError."""
    cases = []
    for vi, variant, ci, cfg, gen in each_case(problem, seed):
        if ci != 0:
            continue
        call = base_call(problem, cfg, variant, gen("err"), make_mask(problem, "batch", cfg, gen("err", "lens")))
        for i, (overrides, why, words) in enumerate(problem.call_errors(cfg)):
            cases.append(Case(case_key("call_error", vi, ci, i), "ctor_error", variant, cfg, with_args(problem, call, overrides),
                              reference=False, meta={"why": why, "words": words}))
    return cases


def group_memory(problem, seed):
    """Configs 0 and 3, fitted by the spec's memory_fit (once only where the fit makes them the same dims), with
    its memory settings; each call's forward records its largest allocation."""
    cases, fitted = [], set()
    for vi, variant, ci, cfg, gen in each_case(problem, seed):
        if ci not in (0, 3):
            continue
        cfg = problem.memory_fit(cfg)
        key = (vi, repr(sorted(cfg.items())))
        if key in fitted:
            continue
        fitted.add(key)
        call = base_call(problem, cfg, variant, gen("memory"), make_mask(problem, "query", cfg, gen("memory", "lens")))
        for i, (overrides, allowed) in enumerate(problem.memory(cfg, call["args"])):
            measured = dict(with_args(problem, call, overrides), measure=True)
            cases.append(Case(case_key("memory", vi, ci, i), "memory", variant, cfg, measured,
                              lens=_kind(problem, "query"), meta={"allowed": allowed}))
    backstop = problem.memory_backstop
    if backstop:
        dims = backstop["dims"]  # exactly these dims, whatever the first variant's fit would make of them
        cfg, gen = {**problem.fit(dict(dims), problem.variants[0]), **dims}, generator(seed, problem.id, "backstop")
        call = base_call(problem, cfg, problem.variants[0], gen, make_mask(problem, "query", cfg, gen), dtype="float32")
        # measured alone, in a window the grader opens and reads from outside the worker (run/cgroup.py); no dispatch
        # mode (the small memory calls name the operation and shape), only the worker's own resident count as fallback
        call = dict(with_args(problem, call, backstop["args"]), measure="resident", window=True)
        meta = {"allowed": backstop["allowed"](cfg, call["args"]), "resident_kb": backstop["resident_kb"],
                "held_kb": backstop["held_kb"]}
        cases.append(Case("memory/backstop", "memory", problem.variants[0], cfg, call, lens=_kind(problem, "query"), meta=meta))
    return cases


def group_imports(problem, seed):
    """One import check, run by the grader in a fresh, sandboxed interpreter (grader/run/probe.py), not by a worker."""
    return [Case("imports/fresh", "imports", {}, {}, {"args": []}, reference=False)]


def group_base(problem, seed):
    """Float64, eval(): every pair of variant and config, of variant and masking kind and of config and masking
    kind at least once (pairwise: each factor's interactions with each other factor, not their full product); the
    same for block settings, where the problem has them; on config 0, also every valid score far below 0 (about
    NEGATIVE) next to masked keys, where the spec can arrange it."""
    cells = list(each_case(problem, seed))
    kinds = {(vi, ci): mask_kinds(problem, cfg) for vi, _, ci, cfg, _ in cells}
    chosen = pairwise(kinds)
    cases = [
        Case(case_key("base", vi, ci, kind), "base", variant, cfg,
             base_call(problem, cfg, variant, gen(), make_mask(problem, kind, cfg, gen("lens", kind))), lens=kind)
        for vi, variant, ci, cfg, gen in cells for kind in kinds[(vi, ci)] if (vi, ci, kind) in chosen
    ]
    blocks = {(vi, ci): tuple(range(len(problem.blocks(cfg)))) for vi, _, ci, cfg, _ in cells}
    chosen = pairwise(blocks)
    for vi, variant, ci, cfg, gen in cells:
        for bi, overrides in enumerate(problem.blocks(cfg)):
            if (vi, ci, bi) not in chosen:
                continue
            kind = _kind(problem, "query")
            call = base_call(problem, cfg, variant, gen("block", bi), make_mask(problem, kind, cfg, gen("block", bi, "lens")))
            cases.append(Case(case_key("base", vi, ci, f"block{bi}"), "base", variant, cfg, with_args(problem, call, overrides), lens=kind))
    return cases + _negative(problem, seed, "base", NEGATIVE, "float64")


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


def _negative(problem, seed, group, to, dtype):
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
        cases.append(Case(case_key(group, vi, ci, "negative"), group, variant, cfg, cast(call, dtype), lens=_kind(problem, "query")))
    return cases


def group_float32(problem, seed):
    return [
        Case(case_key("f32", vi, ci), "f32", variant, cfg,
             base_call(problem, cfg, variant, gen(), make_mask(problem, "query", cfg, gen("lens", "query")),
                       dtype="float32"), lens=_kind(problem, "query"))
        for vi, variant, ci, cfg, gen in each_case(problem, seed)
    ]


def group_grad(problem, seed):
    """Gradients on configs 0 and 3, with every query seeing at least one key."""
    return [
        Case(case_key("grad", vi, ci, kind), "grad", variant, cfg,
             base_call(problem, cfg, variant, gen("grad"), make_mask(problem, kind, cfg, gen("glens", kind), low=1),
                       grad=True), lens=kind)
        for vi, variant, ci, cfg, gen in each_case(problem, seed) if ci in (0, 3)
        for kind in dict.fromkeys(_kind(problem, k) for k in ("batch", "query"))
    ]


def _kind(problem, kind: str) -> str:
    """`kind` where the problem has a masking argument, else "none"."""
    return "none" if problem.mask_role is None else kind


def group_masking(problem, seed):
    """Config 0: original, tail keys/values made huge, lens per query, keys permuted within lens.
    A mask problem gets the same lengths as a key padding mask, and (B, Tq)-shaped ones expanded."""
    cases = []
    for vi, variant, ci, cfg, gen in each_case(problem, seed):
        if ci != 0:
            continue
        g = gen("mask")
        lens = make_lens("batch", cfg, g, low=1)
        per_query = lens[:, None].expand(cfg["B"], cfg["Tq"]).clone()
        if problem.mask_role == "mask":
            arg, per_query = lens_to_mask(problem, cfg, lens), lens_to_mask(problem, cfg, per_query)
            per_query = per_query.expand(per_query.shape[:-2] + (cfg["Tq"], cfg["Tk"])).clone()
        else:
            arg = lens
        orig = base_call(problem, cfg, variant, g, arg)
        Tk, at = cfg["Tk"], problem.mask_index
        beyond = torch.arange(Tk)[None, :] >= lens[:, None]  # (B, Tk)
        perm = torch.stack([
            torch.cat([torch.randperm(int(n), generator=g), torch.arange(int(n), Tk)]) for n in lens
        ])  # (B, Tk): a permutation of the valid prefix of each row
        noise = lambda t, scale: scale * torch.randn(t.shape, generator=g, dtype=torch.float64)  # noqa: E731
        loud, permuted = list(orig["args"]), list(orig["args"])
        for i in problem.arg_index("scores"):  # scores at masked positions become large, within the contract's bound
            where = spread(beyond, loud[i].dim() - 1)
            loud[i] = torch.where(where, noise(loud[i], 1e4).clamp(-1e4, 1e4), loud[i])
            permuted[i] = torch.gather(orig["args"][i], -1, spread(perm, loud[i].dim() - 1).expand_as(loud[i]))
        # keys beyond valid_len become large (x100), values huge (x1e4); key/value pairs permuted together
        for role, scale in (("key", 1e2), ("value", 1e4)):
            for i in problem.arg_index(role):
                x = orig["args"][i]
                loud[i] = torch.where(spread(beyond, x.dim() - 2, 1), noise(x, scale), x)
                permuted[i] = torch.gather(x, -2, spread(perm, x.dim() - 2, 1).expand_as(x))
        variants = {
            "orig": orig,
            "loud": dict(orig, args=loud),
            "per_query": dict(orig, args=orig["args"][:at] + [per_query] + orig["args"][at + 1:]),
            "permuted": dict(orig, args=permuted),
        }
        for name, call in variants.items():
            cases.append(Case(case_key("mask", vi, ci, name), "mask", variant, cfg, call, lens="batch", meta={"perm": perm}))
    return cases


def group_stability(problem, seed):
    """float32 with scores of magnitude ~1e4, and (where the spec can arrange it) with every valid
    score near -1e4 next to masked keys."""
    cases = _negative(problem, seed, "stable", -0.999 * SCORE_BOUND, "float32")
    for vi, variant, ci, cfg, gen in each_case(problem, seed):
        if ci != 0:
            continue
        call = base_call(problem, cfg, variant, gen("stable"), make_mask(problem, "query", cfg, gen("slens")))
        problem.amplify(call["args"], call["state"], {**cfg, **variant})
        cases.append(Case(case_key("stable", vi, ci), "stable", variant, cfg, cast(call, "float32"), lens=_kind(problem, "query")))
    return cases


DROPOUT_DIMS = {"B": 2, "Tq": 4, "Tk": 3, "H": 2, "dq": 5, "dk": 4, "dv": 7, "h": 3}
"""Dims of the dropout calls: each output row (dv = 7, or E = H*dq = 10) has more entries than the
dropped weights that make it (H*Tk = 6), so the grader can solve the output for them (grader/run/dropout.py)."""
DROPOUT_P = ((0.3, 7), (0.6, 8))
"""(p, seed) of the train() calls: two values of p, so that a hard-coded p fails; 48 weights each, so that a
correct dropout keeps all or drops all of them with probability below 1e-7."""


def group_dropout(problem, seed):
    """Each variant: eval() twice with dropout=0.5, train() once per DROPOUT_P, and train() with the
    constructor's default dropout (0.0: exactly the eval() result)."""
    cases = []
    for vi, variant in enumerate(problem.variants):
        cfg = problem.fit(dict(DROPOUT_DIMS), variant)
        gen = lambda *p, vi=vi: generator(seed, problem.id, vi, "dropout", *p)  # noqa: E731
        call = base_call(problem, cfg, variant, gen(), make_mask(problem, "batch", cfg, gen("lens"), low=1))
        key = lambda *rest, vi=vi: case_key("dropout", vi, "d", *rest)  # noqa: E731
        eval_call = dict(call, ctor=problem.ctor_call(cfg, variant, dropout=0.5), repeat=2)
        cases.append(Case(key("eval"), "dropout", variant, cfg, eval_call, lens="batch"))
        for i, (p, s) in enumerate(DROPOUT_P):
            train = dict(call, ctor=problem.ctor_call(cfg, variant, dropout=p), train=True, seed=s)
            cases.append(Case(key("train", i), "dropout", variant, cfg, train, lens="batch", meta={"p": p}))
        default = dict(call, ctor=problem.ctor_call(cfg, variant), train=True, seed=9)  # the default: no dropout
        cases.append(Case(key("train", "default"), "dropout", variant, cfg, default, lens="batch"))
    return cases


def group_cuda(problem, seed, dtypes=("float64", "float32"), group="cuda"):
    cases = []
    for vi, variant, ci, cfg, gen in each_case(problem, seed):
        if ci != 0:
            continue
        call = base_call(problem, cfg, variant, gen(group), make_mask(problem, "query", cfg, gen(group, "lens")))
        for dt in dtypes:
            cases.append(Case(case_key(group, vi, ci, dt), group, variant, cfg, dict(cast(call, dt), device="cuda"),
                              lens=_kind(problem, "query")))
    return cases


def group_half(problem, seed):
    return group_cuda(problem, seed, ("float16", "bfloat16"), "half")


GROUPS = {
    "ctor": group_ctor, "base": group_base, "f32": group_float32, "grad": group_grad, "mask": group_masking,
    "stable": group_stability, "call_error": group_call_errors, "imports": group_imports, "memory": group_memory,
    "dropout": group_dropout, "cuda": group_cuda, "half": group_half,
}


def build(problem: Problem, groups, seed: int) -> dict[str, Case]:
    """All cases of the groups, {name: builder} or names of this module's GROUPS, keyed by case key (each key
    unique)."""
    if not isinstance(groups, dict):
        groups = {name: GROUPS[name] for name in groups}
    cases = {}
    for builder in groups.values():
        for case in builder(problem, seed):
            case.call["key"] = case.key
            case.call.setdefault("n_out", len(problem.outputs))
            case.call.setdefault("names", list(problem.outputs))
            case.call.setdefault("return_inputs", True)
            cases[case.key] = case
    return cases
