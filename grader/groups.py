"""The groups of seeded cases each check reads (one function per group), and `build`."""
from __future__ import annotations

import torch

from .scenarios import LENS_KINDS, Case, base_call, cast, draw_configs, generator, make_lens
from .spec import Problem


def _cases(problem: Problem, seed: int):
    """(variant index, variant, config index, fitted config, generator factory) for every pair."""
    configs = draw_configs(seed)
    for vi, variant in enumerate(problem.variants):
        for ci, cfg in enumerate(configs):
            cfg = problem.fit(cfg, variant)
            yield vi, variant, ci, cfg, (lambda *p, vi=vi, ci=ci: generator(seed, problem.id, vi, ci, *p))


def _key(group, vi, ci, *rest):
    return "/".join(map(str, (group, f"v{vi}", f"c{ci}", *rest)))


def group_ctor(problem, seed):
    cases = []
    for vi, variant, ci, cfg, gen in _cases(problem, seed):
        call = {"ctor": problem.ctor_call(cfg, variant), "construct": True}
        cases.append(Case(_key("ctor", vi, ci), "ctor", variant, cfg, call))
    for i, (kwargs, why, words) in enumerate(problem.ctor_errors):
        items = list(kwargs.items())
        ctor = {"args": [v for _, v in items[: problem.ctor_required]], "kwargs": dict(items[problem.ctor_required :])}
        meta = {"why": why, "words": words}
        cases.append(Case(f"ctor_error/{i}", "ctor_error", {}, {}, {"ctor": ctor, "construct": True}, reference=False, meta=meta))
    return cases


def group_base(problem, seed):
    """Every variant, config and valid_lens kind, float64, eval()."""
    return [
        Case(_key("base", vi, ci, kind), "base", variant, cfg,
             base_call(problem, cfg, variant, gen(), make_lens(kind, cfg, gen("lens", kind))), lens=kind)
        for vi, variant, ci, cfg, gen in _cases(problem, seed) for kind in LENS_KINDS
    ]


def group_float32(problem, seed):
    return [
        Case(_key("f32", vi, ci), "f32", variant, cfg,
             base_call(problem, cfg, variant, gen(), make_lens("query", cfg, gen("lens", "query")), dtype="float32"),
             lens="query")
        for vi, variant, ci, cfg, gen in _cases(problem, seed)
    ]


def group_grad(problem, seed):
    """Gradients on configs 0 and 3, with every query seeing at least one key."""
    return [
        Case(_key("grad", vi, ci, kind), "grad", variant, cfg,
             base_call(problem, cfg, variant, gen("grad"), make_lens(kind, cfg, gen("glens", kind), low=1), grad=True),
             lens=kind)
        for vi, variant, ci, cfg, gen in _cases(problem, seed) if ci in (0, 3) for kind in ("batch", "query")
    ]


def group_masking(problem, seed):
    """Config 0: original, tail keys/values made huge, lens per query, keys permuted within lens."""
    cases = []
    for vi, variant, ci, cfg, gen in _cases(problem, seed):
        if ci != 0:
            continue
        g = gen("mask")
        lens = make_lens("batch", cfg, g, low=1)
        orig = base_call(problem, cfg, variant, g, lens)
        B, Tk = cfg["B"], cfg["Tk"]
        beyond = (torch.arange(Tk)[None, :] >= lens[:, None])[..., None]  # (B, Tk, 1)
        loud = [a.clone() for a in orig["args"][:-1]]
        noise = lambda t, scale: scale * torch.randn(t.shape, generator=g, dtype=torch.float64)  # noqa: E731
        if problem.is_module:  # keys beyond valid_len become large (x100), values huge (x1e4)
            loud[1] = torch.where(beyond, noise(loud[1], 1e2), loud[1])
            loud[2] = torch.where(beyond, noise(loud[2], 1e4), loud[2])
        else:  # scores at masked positions become large, within the contract's bound
            loud[0] = torch.where(beyond.transpose(1, 2), noise(loud[0], 1e4).clamp(-1e4, 1e4), loud[0])
        perm = torch.stack([
            torch.cat([torch.randperm(int(n), generator=g), torch.arange(int(n), Tk)]) for n in lens
        ])  # (B, Tk): a permutation of the valid prefix of each row
        permuted = [a.clone() for a in orig["args"][:-1]]
        if problem.is_module:
            for i in (1, 2):
                permuted[i] = torch.gather(permuted[i], 1, perm[..., None].expand_as(permuted[i]))
        else:
            permuted[0] = torch.gather(permuted[0], 2, perm[:, None, :].expand_as(permuted[0]))
        per_query = lens[:, None].expand(B, cfg["Tq"]).clone()
        variants = {
            "orig": orig,
            "loud": dict(orig, args=loud + [lens]),
            "per_query": dict(orig, args=orig["args"][:-1] + [per_query]),
            "permuted": dict(orig, args=permuted + [lens]),
        }
        for name, call in variants.items():
            cases.append(Case(_key("mask", vi, ci, name), "mask", variant, cfg, call, lens="batch", meta={"perm": perm}))
    return cases


def group_stability(problem, seed):
    """float32 with scores of magnitude ~1e4."""
    cases = []
    for vi, variant, ci, cfg, gen in _cases(problem, seed):
        if ci != 0:
            continue
        call = base_call(problem, cfg, variant, gen("stable"), make_lens("query", cfg, gen("slens")))
        problem.amplify(call["args"], call["state"], variant)
        cases.append(Case(_key("stable", vi, ci), "stable", variant, cfg, cast(call, "float32"), lens="query"))
    return cases


def group_dropout(problem, seed):
    """dropout=0.5: eval() twice, then train() with a seed."""
    cases = []
    for vi, variant, ci, cfg, gen in _cases(problem, seed):
        if ci != 0:
            continue
        call = base_call(problem, cfg, variant, gen("drop"), make_lens("batch", cfg, gen("dlens"), low=1))
        call["ctor"] = problem.ctor_call(cfg, variant, dropout=0.5)
        cases.append(Case(_key("dropout", vi, ci, "eval"), "dropout", variant, cfg, dict(call, repeat=2), lens="batch"))
        cases.append(Case(_key("dropout", vi, ci, "train"), "dropout", variant, cfg, dict(call, train=True, seed=7), lens="batch"))
    return cases


def group_cuda(problem, seed, dtypes=("float64", "float32"), group="cuda"):
    cases = []
    for vi, variant, ci, cfg, gen in _cases(problem, seed):
        if ci != 0:
            continue
        call = base_call(problem, cfg, variant, gen(group), make_lens("query", cfg, gen(group, "lens")))
        for dt in dtypes:
            cases.append(Case(_key(group, vi, ci, dt), group, variant, cfg, dict(cast(call, dt), device="cuda"), lens="query"))
    return cases


def group_half(problem, seed):
    return group_cuda(problem, seed, ("float16", "bfloat16"), "half")


GROUPS = {
    "ctor": group_ctor, "base": group_base, "f32": group_float32, "grad": group_grad, "mask": group_masking,
    "stable": group_stability, "dropout": group_dropout, "cuda": group_cuda, "half": group_half,
}


def build(problem: Problem, groups, seed: int) -> dict[str, Case]:
    """All cases of the named groups, keyed by case key (each key unique)."""
    cases = {}
    for name in groups:
        for case in GROUPS[name](problem, seed):
            case.call["key"] = case.key
            case.call.setdefault("n_out", len(problem.outputs))
            cases[case.key] = case
    return cases
