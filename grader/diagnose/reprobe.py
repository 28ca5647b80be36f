"""Past the first failure: where the learner's code raises on general calls the contract allows, those calls are
drawn again with one pair of related dimensions made equal (dq = dk, Tq = Tk, d = dv, H = Hkv: the shapes a
narrower reading of the contract handles), run in its worker after the verdict, and what the code does where it runs
is diagnosed on its own: a catalogued mistake that reproduces every result there exactly is named, else the stage
trace of one wrong call says where it departs. Nothing here changes a grade."""
from __future__ import annotations

from itertools import combinations

import torch

from ..draw.scenarios import Case, base_call, make_mask
from ..judge.context import decode
from ..judge.reference import reference
from ..judge.registry import general_cases, with_hooks
from ..model.roles import documented_dims
from ..run.answer import Answer
from ..run.harness import execute, flat_positions
from ..run.hooks import for_reference

MOST = 8
"""The most calls drawn again (a few pairs of dimensions, on the first two calls the code raised on)."""


def crashed(ctx) -> list:
    """The general calls the learner's code raised on (not the ones it must refuse, nor a stub's)."""
    return [c for c in general_cases(ctx, ctx.problem) if not c.must_raise and (g := ctx.got.get(c.key)) is not None
            and not g.ok and g.error is not None and g.error.type != "NotImplementedError"]


OUT_OF_MEMORY = ("can't allocate memory", "cannot allocate memory", "out of memory", "not enough memory")
"""What torch's and NumPy's allocators say when an allocation fails (a MemoryError aside)."""


def out_of_memory(error) -> bool:
    """Whether a call's error (run/answer.Raised) is an allocation that failed: the call asked for more memory than
    the worker may use."""
    return error is not None and (error.type == "MemoryError" or
                                  any(s in (error.message or "").lower() for s in OUT_OF_MEMORY))


def cases(problem, ctx) -> list[tuple[str, Case]]:
    """[(the pair made equal, in words; its case)] for the calls the code raised on."""
    out, named = [], documented_dims(problem)
    for n, case in enumerate(crashed(ctx)[:2]):
        dims = [k for k, v in case.cfg.items() if isinstance(v, int) and not isinstance(v, bool)]
        for a, b in combinations(dims, 2):
            if case.cfg[a] == case.cfg[b] or a[0] != b[0] or len(out) >= MOST:  # related: dq/dk/dv, Tq/Tk, H/Hkv
                continue
            words = [_shown(x, named) for x in (a, b)]
            if None in words or words[0] == words[1]:  # a size the statement does not name: nothing to tell
                continue
            cfg = problem.fit({**case.cfg, b: case.cfg[a]}, case.variant)
            if cfg[a] != cfg[b]:
                continue
            seed = ctx.seed * 1009 + 31 * n + len(out)
            call = _drawn(problem, cfg, case, seed)
            if _shapes(call) == _shapes(_drawn(problem, case.cfg, case, seed)):  # a size the problem's inputs do not
                continue  # have (paged attention's Tq): the same shapes again would tell nothing, and the pair mislead
            key = f"reprobe/{case.key}/{a}={b}"
            call.update(key=key, n_out=len(problem.outputs), names=list(problem.outputs))
            new = Case(key, case.group, case.variant, cfg, call, lens=case.lens, builder=case.builder)
            with_hooks(problem, {key: new})
            new.call["hooks"] = {k: v for k, v in (new.call.get("hooks") or {}).items() if k != "measure"}
            out.append((f"{words[0]} = {words[1]}", new))
    return out


def _shown(dim: str, named: set[str]) -> str | None:
    """A drawn size as the problem's statement names it: itself, or "d" for the query and key sizes of a statement
    that calls both d; None where the statement does not name it."""
    if dim in named:
        return dim
    return "d" if dim in ("dq", "dk") and "d" in named else None


def _drawn(problem, cfg: dict, case: Case, seed: int) -> dict:
    """The case's call drawn again at `cfg`, from a generator of `seed` (the same seed, the same draws otherwise)."""
    g = torch.Generator().manual_seed(seed)
    return base_call(problem, cfg, case.variant, g, make_mask(problem, case.lens, cfg, g))


def _shapes(call: dict) -> list:
    """The shapes of every tensor a call sends (its arguments, a cache's parts, the module's weights), in order."""
    sent = [t for _, t in flat_positions(call.get("args", []))] + list((call.get("state") or {}).values())
    return [tuple(t.shape) if isinstance(t, torch.Tensor) else None for t in sent]


def finding(problem, ctx, probe) -> list[str]:
    """Lines for the problem's finding (none where the code raised on no general call)."""
    from .diagnose import _explains, candidates, describe, same
    from . import trace

    drawn = cases(problem, ctx)
    if not drawn:
        return []
    raw = probe([c.call for _, c in drawn])
    got = decode(problem, {c.key: c for _, c in drawn}, {c.key: r for (_, c), r in zip(drawn, raw) if r is not None})
    ran = []
    for words, case in drawn:
        answer = got.get(case.key)
        if answer is not None and answer.ok:
            try:
                expected = Answer.of({"ok": True, **execute(for_reference(case.call), reference(problem))})
            except Exception:  # noqa: BLE001 - a shape the reference refuses too: no evidence either way
                continue
            ctx.got[case.key], ctx.ref[case.key] = answer, expected
            ran.append((words, case))
    if not ran:
        return [f"Drawn again with {', '.join(sorted({w for w, _ in drawn}))}, the calls your code raised on still "
                "raise: the error does not come from those sizes being unequal (read its message above)."]
    where = ", ".join(sorted({w for w, _ in ran}))
    wrong = [c for _, c in ran if not same(c, ctx.got[c.key], ctx.ref[c.key])]
    head = f"Past the calls your code raised on: drawn again with {where}, it runs"
    if not wrong:
        if all(out_of_memory(ctx.got[c.key].error) for c in crashed(ctx)[:2]):
            return [head + " and is right there: what fails is the memory the larger calls asked for (read the "
                    "allocation in the message above), not their shapes. Some intermediate grows faster than the inputs "
                    "and outputs: compute it in parts, or by a formula that never builds it whole."]
        return [head + " and is right there: what fails is only that it refuses shapes the contract allows."]
    cache = ctx.memo.setdefault((problem.id, ctx.seed), {})
    cases_ = [c for _, c in ran]
    for rid, _, target in candidates(problem, ctx.failing_deps):
        found = _explains(ctx, cases_, rid, target, cache)
        if found is not None and found[0]:
            return [head + f", and there its results are exactly those of the mistake below.", describe(problem, rid)]
    lines = trace.finding(problem, ctx, wrong[0], probe([trace.call_for(wrong[0])])[0])
    return [head + " but not right there" + (":" if lines else " either."), *lines]
