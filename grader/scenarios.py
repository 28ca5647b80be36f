"""Seeded, reproducible calls for one problem, grouped by the checks that read them.

Dimensions are drawn per run seed but always include the edge cases: B=1, Tq=1, Tk=1,
Tq != Tk and unequal feature sizes. valid_lens cover None, (B,) and (B, Tq), with 0 and Tk.
"""
from __future__ import annotations

import random
import zlib
from dataclasses import dataclass, field

import torch

from .spec import Problem

LENS_KINDS = ("none", "batch", "query")


@dataclass
class Case:
    key: str
    group: str
    variant: dict
    cfg: dict
    call: dict
    lens: str = "none"
    reference: bool = True
    meta: dict = field(default_factory=dict)


def draw_configs(seed: int) -> list[dict]:
    """Four dimension sets: a general one, all ones, Tk=1 with B>1, and a long one with B=1."""
    rng = random.Random(seed)

    def feats():
        dq, dk, dv, h = rng.sample(range(2, 9), 4)
        return {"dq": dq, "dk": dk, "dv": dv, "h": h}

    tq = rng.randint(3, 4)
    return [
        {"B": 2, "Tq": tq, "Tk": tq + rng.randint(1, 3), "H": 2, **feats()},
        {"B": 1, "Tq": 1, "Tk": 1, "H": 1, **feats()},
        {"B": 3, "Tq": rng.randint(2, 4), "Tk": 1, "H": 3, **feats()},
        {"B": 1, "Tq": rng.randint(5, 6), "Tk": rng.randint(3, 4), "H": 2, **feats()},
    ]


def generator(*parts) -> torch.Generator:
    return torch.Generator().manual_seed(zlib.crc32("/".join(map(str, parts)).encode()))


def make_lens(kind: str, cfg: dict, gen: torch.Generator, low: int = 0):
    """valid_lens of a kind; with low=0 they include both 0 and Tk where there is room."""
    if kind == "none":
        return None
    B, Tq, Tk = cfg["B"], cfg["Tq"], cfg["Tk"]
    shape = (B,) if kind == "batch" else (B, Tq)
    lens = torch.randint(low, Tk + 1, shape, generator=gen)
    flat = lens.view(-1)
    flat[0] = Tk
    if flat.numel() > 1:
        flat[-1] = low
    return lens


def output_shapes(problem: Problem, cfg: dict) -> list[tuple]:
    dims = {"output": "B Tq dv", "weights": problem.weights_dims}
    return [tuple(cfg[d] for d in dims[name].split()) for name in problem.outputs]


def make_state(problem: Problem, cfg: dict, gen: torch.Generator) -> dict:
    """Random weights in nn.Linear's range, U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    return {
        name: (torch.rand(*shape, generator=gen, dtype=torch.float64) * 2 - 1) / shape[-1] ** 0.5
        for name, shape in problem.params(cfg).items()
    }


def base_call(problem, cfg, variant, gen, lens, *, dtype="float64", grad=False, **extra) -> dict:
    args = problem.inputs(cfg, gen) + [lens]
    call = {
        "ctor": problem.ctor_call(cfg, variant) if problem.is_module else None,
        "state": make_state(problem, {**cfg, **variant}, gen) if problem.is_module else None,
        "args": args,
        "train": False,
        "seed": 0,
        "repeat": 1,
        "grad_out": None,
        "device": "cpu",
        "dtype": "float64",
        "n_out": len(problem.outputs),
    }
    if grad:
        call["grad_out"] = [torch.randn(*s, generator=gen, dtype=torch.float64) for s in output_shapes(problem, cfg)]
    call.update(extra)
    return cast(call, dtype)


def cast(call: dict, dtype: str) -> dict:
    """The same call with every floating tensor (inputs, weights) rounded to `dtype`."""
    dt = getattr(torch, dtype)

    def conv(x):
        return x.to(dt) if isinstance(x, torch.Tensor) and x.is_floating_point() else x

    out = dict(call, dtype=dtype, args=[conv(a) for a in call.get("args", [])])
    if call.get("state") is not None:
        out["state"] = {k: conv(v) for k, v in call["state"].items()}
    return out


def as_reference(call: dict) -> dict:
    """The call the reference runs: the same rounded values, computed in float64 on the CPU."""
    return dict(cast(call, "float64"), device="cpu")


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
