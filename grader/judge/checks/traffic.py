"""Checks traffic and bounds: what a Triton kernel moves between global memory and the chip, counted element by element
while Triton's interpreter runs it (run/kernels.py, run/hooks/triton.py).

traffic: on calls with partial last blocks, causal and not (the spec's shapes: square, more queries than keys), the elements the launched kernels load stay within the
tiled algorithm's IO (the spec's `io(cfg, args)`: each query tile once, each key and value tile once per query block
that needs it), they store exactly the outputs' elements, and what the launcher returns is what the kernels stored;
the kernels load only the call's inputs, as given (nothing the launcher computed), from a few launches.
bounds: on every call, no load or store falls outside the tensors the launch passed (the interpreter reads and
writes there silently: a GPU reads another tensor, or faults); a catalogued mistake explains it on the traffic calls.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..compare import tolerance
from ..context import compare_all
from ..registry import Check, options, register
from ..scan import refused
from ...draw.groups import case_key, defaults_left_out, each_case, with_args
from ...draw.scenarios import Case, base_call, make_mask, mask_kinds


@dataclass(frozen=True)
class TrafficOptions:
    """`io(cfg, args)` -> (most elements loaded, elements stored) for a call's arguments (spelled out to the last);
    `calls(cfg)` -> [{argument: value}], the settings of the measured calls; `dims(cfg)` -> [{dim: size}], more
    shapes than config 0's (before the spec's fit: where causal blocks can be skipped, where rows have no key, a
    long one), each with its own arguments under "args" where it has some;
    `words`: the IO bound in words; `designs`: where the contract allows several designs, {the outputs the kernels
    accumulate with atomics, comma-joined ("" for none): the design in words}, and `io` returns {that key: (loads,
    stores)}: the bound is the design the kernels used."""

    io: Callable
    calls: Callable
    words: str
    dims: Callable = lambda cfg: ()
    designs: dict | None = None


def _hooks(problem, _options):
    return {"interpret": True, "traffic": {"names": list(problem.outputs)}}


def group_traffic(problem, seed):
    """Config 0 of each variant as drawn and with each of the spec's `dims`, with each masking kind, under each of
    the spec's settings."""
    opts = options(problem, "traffic")
    cases = []
    for vi, variant, ci, cfg, gen in each_case(problem, seed):
        if ci != 0:
            continue
        for di, dims in enumerate([{}, *opts.dims(cfg)]):
            dims = dict(dims)
            given = dims.pop("args", {})  # arguments of this shape's calls (blocks sized to it)
            fitted = problem.fit({**cfg, **dims}, variant) if dims else cfg
            for kind in mask_kinds(problem, fitted):
                g = gen("traffic", di, kind)
                call = base_call(problem, fitted, variant, g, make_mask(problem, kind, fitted, g), dtype="float32")
                for i, overrides in enumerate(opts.calls(fitted)):
                    measured = defaults_left_out(problem, with_args(problem, call, {**overrides, **given}))
                    args = measured["args"] + [problem.call_defaults[n]
                                               for n in problem.arg_names[len(measured["args"]):]]
                    bound = opts.io(fitted, args)
                    bounds = bound if isinstance(bound, dict) else {None: bound}
                    cases.append(Case(case_key("traffic", vi, ci, di, kind, i), "traffic", variant, fitted, measured,
                                      lens=kind, meta={"bounds": bounds}))
    return cases


def _design(case, seen) -> tuple[str | None, tuple[int, int] | None]:
    """The design the kernels used (the outputs they accumulated with atomics, comma-joined; None where the contract
    has one design) and its bound (loads, stores), None where the contract allows no such design."""
    bounds = case.meta["bounds"]
    if None in bounds:
        return None, tuple(bounds[None])
    key = seen.get("atomic") or ""
    return key, tuple(bounds[key]) if key in bounds else None


def check_traffic(ctx):
    opts = options(ctx.problem, "traffic")
    for case in ctx.of("traffic"):
        seen = _seen(ctx, case)
        _data_flow(ctx, case, seen)
        if seen.get("restored"):
            ctx.fail(case, f"the kernels stored output elements more than once, each store replacing the last "
                     f"({seen['restored']} elements stored again): where several blocks add to the same element "
                     "(a share of a gradient), they must add with tl.atomic_add, or one program must own the element "
                     "and sum its shares on the chip")
        design, bound = _design(case, seen)
        if bound is None:
            ctx.fail(case, f"the kernels accumulated {design[:80] or 'no output'} with atomics: the contract's designs "
                     "accumulate " + " or ".join(k or "nothing" for k in opts.designs) + " with atomics")
        loads, stores = bound
        words = opts.designs[design] if design is not None else opts.words
        if seen["loaded"] > loads or seen["stored"] > stores:
            ctx.fail(case, f"the kernels ({seen['launches']} launch{'es' if seen['launches'] != 1 else ''}) loaded "
                     f"{seen['loaded']:,} elements and stored {seen['stored']:,}; the tiled algorithm loads at most "
                     f"{loads:,} ({words}) and stores at most {stores:,}. By your kernels' "
                     f"arguments: {seen.get('by_arg') or '?'}. "
                     + ("Something more than the outputs was written to global memory (a score matrix, a scratch "
                        "buffer, or an output zeroed by a kernel where the launcher may allocate it with torch.zeros)."
                        if seen["stored"] > stores else "A tile loaded more often than once per block "
                        "that needs it (a tile reloaded inside the loop), or blocks that see none of the other's "
                        "keys (causal: those wholly above the diagonal) were loaded."))
        compare_all(ctx, case, ctx.outputs(case), ctx.expected(case), tolerance(case.call["dtype"]))


MAX_LAUNCHES = 8
"""Kernel launches one call may make: a few kernels (a pre-pass, the main one), never one per row or element, through
whose scalar arguments values computed outside the kernels could reach the outputs."""


NOT_THEIR_WORK = (
    ("foreign", lambda s: f"the kernels loaded {s['foreign']:,} elements from memory that is none of the call's inputs "
     "and that no kernel stored (a tensor the launcher computed)",
     "the kernels must compute the outputs from the call's inputs themselves"),
    ("tampered", lambda s: f"the launcher changed memory before a launch (kernel argument `{s['tampered']}`): an input "
     "of the call, or what an earlier kernel stored", "the kernels must read the call's inputs as given, and what the "
     "kernels stored must reach the outputs unchanged"),
    ("unwritten", lambda s: f"what the call returned is not what its kernels stored ({s['unwritten']})",
     "the kernels must compute the outputs and store each element once"),
)
"""The ways a call's outputs are not its kernels' work, each said once: (the counts' field, the fact, what to do).
The traffic check says both; every other check's values then do not count, and it says the facts (_vouch)."""


def _not_their_work(seen) -> list[tuple[str, str]]:
    return [(fact(seen), advice) for name, fact, advice in NOT_THEIR_WORK if seen.get(name)]


def _data_flow(ctx, case, seen) -> None:
    """What the kernels compute from must be the call's inputs as given, and what comes back what they stored
    (NOT_THEIR_WORK); no bulk values in the launches' arguments; few launches."""
    for fact, advice in _not_their_work(seen):
        ctx.fail(case, f"{fact}: {advice}")
    if seen.get("smuggled"):
        ctx.fail(case, f"a launch passed a tuple or list (kernel argument `{seen['smuggled']}`): the kernels take "
                 "tensors and scalars only")
    if seen["launches"] > MAX_LAUNCHES:
        ctx.fail(case, f"the call made {seen['launches']} kernel launches; at most {MAX_LAUNCHES}: a grid covers the "
                 "work, not one launch per row")


def _vouch(ctx, case) -> None:
    """Any check's values count only where the outputs are the kernels' work (NOT_THEIR_WORK, from the counts of
    every call)."""
    seen = ctx.result(case).extra.get("traffic")
    if not seen or case.must_raise:
        return
    facts = [fact for fact, _ in _not_their_work(seen)]
    if facts:
        ctx.fail(case, "; ".join(facts) + ": the outputs are not the kernels' work, so their values cannot count")


def trusted(ctx, case) -> None:
    """The counts come from the learner's own process: where its source could switch them off or forge them (a
    finding the contract refuses, judge/scan/), they prove nothing, and the check fails."""
    for source in ctx.of("source"):
        got = ctx.got.get(source.key)
        bad = [f for f in (got.extra.get("findings") or []) if refused(ctx.problem, f)] if got and got.ok else []
        if bad:
            ctx.fail(case, f"the kernels' memory accesses are counted inside your process, and the source can reach "
                     f"what counts them ({bad[0].describe()}; the capabilities check lists each): the counts prove "
                     "nothing, so this check is not met")


def _seen(ctx, case) -> dict:
    trusted(ctx, case)
    seen = ctx.result(case).extra.get("traffic")
    if not seen:
        ctx.fail(case, "the grader's count of the kernels' memory traffic is missing: it was switched off, so the "
                 "traffic cannot be checked and is not within the bound")
    if not seen["launches"]:
        ctx.fail(case, "no Triton kernel was launched: the launcher must compute the outputs with its kernels")
    return {"unwritten": "", "first_outside": "", **seen}


def check_bounds(ctx):
    for case in ctx.cases.values():
        if case.must_raise or not case.reference or case.key not in ctx.got:
            continue
        trusted(ctx, case)
        res = ctx.result(case)
        seen = res.extra.get("traffic")
        if seen is None:
            ctx.fail(case, "the grader's count of the kernels' memory accesses is missing: it was switched off")
        if seen["outside"]:
            ctx.fail(case, f"{seen['outside']:,} element accesses fell outside the tensors the launch passed, the "
                     f"first: {seen.get('first_outside') or '?'}. The interpreter lets them through (a GPU reads "
                     "another tensor's memory, or faults): mask every load and store of a partial block "
                     "(mask=offsets < length)")


def _measure(case, answer):
    """What the counts say of a call: (the elements loaded where over the IO bound, those stored where not the
    outputs', whether any access fell outside a tensor, whether the outputs are not what the kernels stored)."""
    seen = answer.extra.get("traffic")
    if not seen:
        return None
    bound = _design(case, seen)[1] if "bounds" in case.meta else None
    over = seen["loaded"] if bound and seen["loaded"] > bound[0] else None
    stores = seen["stored"] if bound and seen["stored"] > bound[1] else None
    return over, stores, seen["outside"] > 0, bool(seen.get("unwritten")), bool(seen.get("foreign")), \
        bool(seen.get("tampered"))


register(Check("traffic", "memory traffic within the tiled algorithm's IO (counted by the interpreter)",
               {"traffic": group_traffic}, check_traffic, options=TrafficOptions, hooks=_hooks,
               enforces="memory traffic counted in the interpreter",
               needs=lambda p: None if "traffic" in (p.options or {}) and "capabilities" in p.points
               else "options['traffic'] (io, calls, words) and the capabilities check (the source read)",
               measure=_measure, vouch=_vouch, concepts=(("memory", None),)))
register(Check("bounds", "no load or store outside the tensors passed", {"traffic": group_traffic}, check_bounds,
               needs=lambda p: None if "traffic" in p.points and "capabilities" in p.points
               else "the traffic and capabilities checks (the counts, and the source read that vouches for them)"))
