"""Check memory: the largest tensor the forward allocates stays within the problem's bound.

Two measurements: inside the worker, a dispatch mode names the largest tensor an operator allocated (which
operation, which shape: the message); outside it, for the spec's backstop call, the kernel's count of the worker's
memory cgroup (run/cgroup.py), which nothing in the learner's process can switch off: the verdict stands on that one
where the grader can make cgroups. Without them (docs/security.md), the backstop falls back to the worker's own
resident-memory count.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import torch

from ..compare import tolerance
from ..context import GraderError, compare_all
from ..registry import Check, options, register
from ...draw.groups import case_key, each_case, form, with_args
from ...draw.scenarios import Case, base_call, expected_call, generator, make_mask
from ...masks.layout import output_shapes
from ...run.harness import execute
from ...run.hooks import for_reference


@dataclass(frozen=True)
class Words:
    """How messages name the problem's bound: the formula, how to stay within it, what a solution must not build."""

    bound: str
    advice: str
    tensor: str


@dataclass(frozen=True)
class Backstop:
    """A float32 call too big to hide, measured by the grader in the worker's memory cgroup (run/cgroup.py), else by
    the worker's own resident count: exactly these dims and arguments; `allowed(cfg, args)` elements; growth and
    held-at-start limits in kB. `rows`: compare the values of that many seeded query rows only (0: all of them); the
    reference then computes those rows alone, since at a size chosen to make the forbidden tensor large its full
    run costs the grader as much as the learner's (FlashAttention's: 0.16 s). Only for a call whose rows are
    independent (no causal alignment): its masking argument is then drawn in the per-batch form (one set of keys per
    batch row), and which rows is never sent to the worker: code wrong on a fraction f of the rows fails with probability
    about 1 - (1 - f)^rows."""

    dims: dict
    args: dict
    allowed: Callable
    resident_kb: int
    held_kb: int
    rows: int = 0


@dataclass(frozen=True)
class MemoryOptions:
    """The memory check's options (a spec's options["memory"]): `calls(cfg, args)` -> [({arg: value}, elements
    allowed)], the calls whose forward is measured; `fit(cfg)`, their dims (large enough that the tensor to avoid
    exceeds the bound); a backstop call besides, where wanted; the words of its messages. The calls are required even
    with a backstop: a worker sets its heap to follow its tensors from the hooks of its first batch, from which a
    backstop is held back (run/heap.py)."""

    words: Words
    calls: Callable
    fit: Callable = lambda cfg: cfg
    backstop: Backstop | None = None

    def __post_init__(self):
        if isinstance(self.words, dict):
            object.__setattr__(self, "words", Words(**self.words))
        if isinstance(self.backstop, dict):
            object.__setattr__(self, "backstop", Backstop(**self.backstop))


def group_memory(problem, seed):
    """Configs 0 and 3, fitted by the spec's memory_fit, with its memory settings; each call's forward records its
    largest allocation. A call measured already (the same shapes and settings, from another config or variant the
    fit made alike) is not measured again. The first is measured once more with inputs that require grad (as in a
    training step; no backward): code that takes another path when it sees them is measured there too."""
    opts = options(problem, "memory")
    cases, measured_already = [], set()
    for vi, variant, ci, cfg, gen in each_case(problem, seed):
        if ci not in (0, 3):
            continue
        cfg = opts.fit(cfg)
        call = base_call(problem, cfg, variant, gen("memory"), make_mask(problem, "query", cfg, gen("memory", "lens")))
        for i, (overrides, allowed) in enumerate(opts.calls(cfg, call["args"])):
            measured = with_args(problem, call, overrides)
            if (sig := (_layout(measured), allowed)) in measured_already:
                continue
            measured_already.add(sig)
            measured["hooks"] = {"measure": True}
            cases.append(Case(case_key("memory", vi, ci, i), "memory", variant, cfg, measured,
                              lens=form(problem, "query"), meta={"allowed": allowed}))
            if len(cases) == 1:  # the first once more with inputs that require grad: the bound holds in training too
                cases.append(Case(case_key("memory", vi, ci, i, "leaves"), "memory", variant, cfg,
                                  dict(measured, leaves=True), lens=form(problem, "query"), meta={"allowed": allowed}))
    backstop = opts.backstop
    if backstop:
        dims = backstop.dims  # exactly these dims, whatever the first variant's fit would make of them
        cfg, gen = {**problem.fit(dict(dims), problem.variants[0]), **dims}, generator(seed, problem.id, "backstop")
        kind = "batch" if backstop.rows else "query"  # sampled rows: one set of keys per batch row, not per query
        call = base_call(problem, cfg, problem.variants[0], gen, make_mask(problem, kind, cfg, gen), dtype="float32")
        # measured alone, in a window the grader opens and reads from outside the worker (run/cgroup.py); no dispatch
        # mode (the small memory calls name the operation and shape), only the worker's own resident count as fallback
        call = dict(with_args(problem, call, backstop.args), hooks={"measure": "resident"}, window=True)
        meta = {"allowed": backstop.allowed(cfg, call["args"]), "resident_kb": backstop.resident_kb,
                "held_kb": backstop.held_kb}
        if backstop.rows:
            picked = torch.randperm(cfg["Tq"], generator=generator(seed, problem.id, "backstop", "rows"))
            meta["rows"] = sorted(picked[:backstop.rows].tolist())
        cases.append(Case("memory/backstop", "memory", problem.variants[0], cfg, call, lens=form(problem, kind),
                          meta=meta, reference="rows" not in meta))
    return cases


def _layout(value):
    """What a memory measurement depends on, as a hashable value: every setting of the call, each floating-point
    tensor by its dtype and shape (its values change no allocation of a correct solution), every other tensor (lengths,
    masks, tables) by its values too, since code may size what it builds by them."""
    if isinstance(value, torch.Tensor):
        floats = value.is_floating_point()
        return ("tensor", str(value.dtype), tuple(value.shape), None if floats else tuple(value.flatten().tolist()))
    if isinstance(value, dict):
        return tuple(sorted((k, _layout(v)) for k, v in value.items() if k != "seed"))
    if isinstance(value, (list, tuple)):
        return tuple(_layout(v) for v in value)
    return repr(value)


def axis(shape: str, dim: str = "Tq") -> int | None:
    """The axis, counted from the end, that a declared shape ("(..., Tq, d)", "(..., Tq), -inf on ...") names `dim`."""
    found = re.match(r"\(([^)]*)\)", shape)
    names = [n.strip() for n in found.group(1).split(",")] if found else []
    return names.index(dim) - len(names) if dim in names else None


def pick_rows(shapes, values: list, rows: list) -> list:
    """Those query rows of each tensor whose declared shape has a Tq axis (the others as they are)."""
    index = torch.tensor(rows)
    return [v.index_select(a, index.to(v.device)) if (a := axis(s)) is not None and isinstance(v, torch.Tensor) else v
            for s, v in zip(shapes, values)]


def _rows_reference(problem, cases, target, refs) -> None:
    """The reference's values on the sampled rows of a backstop call that compares only those (Backstop.rows)."""
    for k, c in cases.items():
        if "rows" in c.meta:
            sub = dict(c.call, args=pick_rows([a.doc for a in problem.args], c.call["args"], c.meta["rows"]))
            refs[k] = execute(for_reference(expected_call(sub)), target)


def check_memory(ctx):
    words = options(ctx.problem, "memory").words
    for case in ctx.of("memory"):
        res = ctx.result(case)
        if "held_kb" in case.meta:  # the backstop: no dispatch mode runs there
            _outside(ctx, case, res, words)
            compare_all(ctx, case, _backstop_outputs(ctx, case), ctx.expected(case), tolerance(case.call["dtype"]))
            continue
        peak, allowed = res.extra["peak"], case.meta["allowed"]
        if not peak["ops"]:
            ctx.fail(case, "the allocation measurement saw no operator during the forward: it was switched off "
                     "(a disabled dispatch mode); the memory bound cannot be checked, so it is not met")
        if peak["elements"] > allowed:
            ctx.fail(case, f"the forward allocated a tensor of {peak['elements']} elements ({peak['op']}); "
                     f"allowed at most {allowed} = {words.bound}. {words.advice}")
        compare_all(ctx, case, ctx.outputs(case), ctx.expected(case), tolerance(case.call["dtype"]))


def _backstop_outputs(ctx, case) -> list:
    """What the backstop returned (its shapes checked), the sampled rows only where it compares those."""
    if "rows" not in case.meta:
        return ctx.outputs(case)
    got = ctx.raw_outputs(case)
    for name, g, shape in zip(ctx.problem.outputs, got, output_shapes(ctx.problem, case.cfg)):
        if tuple(g.shape) != shape:
            ctx.fail(case, f"{name} has shape {tuple(g.shape)}, expected {shape}")
    return pick_rows([o.doc for o in ctx.problem.returns], got, case.meta["rows"])


def _outside(ctx, case, res, words) -> None:
    """The backstop call: the grader's own measurement of the worker's cgroup, else the worker's resident count."""
    outside, limit, held_limit = res.extra.get("outside"), case.meta["resident_kb"], case.meta["held_kb"]
    if outside is not None:
        if outside["held_kb"] > held_limit:
            ctx.fail(case, f"the worker already held {outside['held_kb'] / 1024:.0f} MB when this call began (the "
                     f"kernel's count, read by the grader outside your process); {words.tensor} here takes about "
                     f"{held_limit * 4 / 3 / 1024:.0f} MB: memory allocated in advance (at import, or kept from an "
                     f"earlier call) counts too")
        if outside["peak_kb"] > limit:
            ctx.fail(case, f"the worker's memory grew by {outside['peak_kb'] / 1024:.0f} MB during the forward (the "
                     f"kernel's count, read by the grader outside your process, including NumPy arrays and any "
                     f"process you start); a solution within the bound needs well under {limit / 1024:.0f} MB "
                     f"here: {words.tensor}, or a large part of it, was built")
        return
    resident = (res.extra.get("peak") or {}).get("resident_kb")
    if resident is None and "outside" in res.extra:  # a window was opened (so the worker did not count) and read nothing:
        raise GraderError("the grader could not measure the memory of this call, neither from outside the worker nor "
                          "inside it")  # not judged: once learner code has run, that fails the check
    if resident is not None and resident > limit:
        ctx.fail(case, f"the process's resident memory grew by {resident / 1024:.1f} MB during the forward; "
                 f"a solution within the bound needs well under {limit / 1024:.0f} MB here: "
                 f"{words.tensor}, or a large part of it, was built")


register(Check("memory", "largest allocation within the problem's bound", {"memory": group_memory}, check_memory,
               options=MemoryOptions, enforces="a memory bound", expected=_rows_reference,
               needs=lambda p: None if "memory" in (p.options or {}) else "options['memory'] (calls and their words)", concepts=(("memory", None),)))
