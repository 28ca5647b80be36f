"""Checks shapes, weight_sums and side_effects: what comes back, before its values are compared."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from ..compare import argmax_index, same_values, tolerance
from ..context import returns_arrays, valid_mask
from ..registry import Check, options, register
from ...draw.describe import arg_name
from ...draw.groups import NEGATIVE, carried_cases, case_key, each_case, form, negative_cases, pairwise, with_args
from .device import group_cuda
from ...draw.conventions import convention_cases, inference_carried
from ...draw.long import FARTHEST, long_cases
from ...draw.tied import tied_cases
from ...draw.scenarios import Case, base_call, dim_names, make_mask, mask_kinds, output_shapes


@dataclass(frozen=True)
class PartialBlocks:
    """The general calls' options (a spec's options["parity_float64"], the check that owns them): `blocks(cfg)` ->
    ({arg: value}, ...), block settings for extra general calls, so that blocks along every axis a learner may chunk
    leave a partial last block (block_invariance reads them too); `conventions`, the ways of calling drawn."""

    blocks: Callable = lambda cfg: ()
    long: dict | None = None  # the long calls' sizes where not draw/long.py's LONG (a kernel interpreted: smaller)
    far: bool = False  # also a call at far positions (draw/long.py's FARTHEST), where code may size a table of positions
    conventions: tuple = ("strided", "kw", "alias", "inference", "train")  # the calling conventions drawn (draw/conventions.py): a kernel's
    # launcher reads the memory it is given, so the kernels stage leaves non-contiguous inputs out


def block_settings(problem, cfg) -> tuple:
    """The problem's block settings for dims `cfg` (none where its spec gives none)."""
    return tuple(options(problem, "parity_float64").blocks(cfg))


def group_base(problem, seed):
    """Float64, eval(): every pair of variant and config, of variant and masking kind and of config and masking
    kind at least once (pairwise: each factor's interactions with each other factor, not their full product); the
    same for block settings, where the problem has them; on config 0, also every valid score far below 0 (about
    NEGATIVE) next to masked keys, where the spec can arrange it, and the masking forms that two equal sizes make
    ambiguous, with those sizes equal (draw/tied.py), one long call per variant (and one at far positions where the
    spec asks: draw/long.py), and the calls a model's code makes (draw/conventions.py: strided, by keyword, aliased)."""
    cells = list(each_case(problem, seed))
    kinds = {(vi, ci): mask_kinds(problem, cfg) for vi, _, ci, cfg, _ in cells}
    chosen = pairwise(kinds)
    cases = [
        Case(case_key("base", vi, ci, kind), "base", variant, cfg,
             base_call(problem, cfg, variant, gen(), make_mask(problem, kind, cfg, gen("lens", kind))), lens=kind)
        for vi, variant, ci, cfg, gen in cells for kind in kinds[(vi, ci)] if (vi, ci, kind) in chosen
    ]
    settings = {(vi, ci): block_settings(problem, cfg) for vi, _, ci, cfg, _ in cells}
    blocks = {cell: tuple(range(len(s))) for cell, s in settings.items()}
    chosen = pairwise(blocks)
    for vi, variant, ci, cfg, gen in cells:
        for bi, overrides in enumerate(settings[(vi, ci)]):
            if (vi, ci, bi) not in chosen:
                continue
            kind = form(problem, "query")
            call = base_call(problem, cfg, variant, gen("block", bi), make_mask(problem, kind, cfg, gen("block", bi, "lens")))
            cases.append(Case(case_key("base", vi, ci, f"block{bi}"), "base", variant, cfg, with_args(problem, call, overrides),
                              lens=kind, tags=frozenset({"block"})))
    block_args = {name for drawn in settings.values() for overrides in drawn for name in overrides}
    return (cases + negative_cases(problem, seed, "base", NEGATIVE, "float64") + tied_cases(problem, seed, "base")
            + convention_cases(problem, seed, "base", options(problem, "parity_float64").conventions)
            + long_cases(problem, seed, "base", block_args, options(problem, "parity_float64").long)
            + (long_cases(problem, seed, "base", block_args, FARTHEST, "far", after_short=True) if options(problem, "parity_float64").far else []))


def group_float32(problem, seed):
    return [
        Case(case_key("f32", vi, ci), "f32", variant, cfg,
             base_call(problem, cfg, variant, gen(), make_mask(problem, "query", cfg, gen("lens", "query")),
                       dtype="float32"), lens=form(problem, "query"))
        for vi, variant, ci, cfg, gen in each_case(problem, seed)
    ]


def check_shapes(ctx):
    for case in ctx.of("base"):
        got = ctx.raw_outputs(case)
        for name, g, shape in zip(ctx.problem.outputs, got, output_shapes(ctx.problem, case.cfg)):
            if tuple(g.shape) != shape:
                dims = dim_names(ctx.problem.dims[ctx.problem.outputs.index(name)], case.cfg)
                ctx.fail(case, f"{name} has shape {tuple(g.shape)}, expected {shape} = ({', '.join(dims)})")


def check_weight_sums(ctx):
    tol = tolerance("float64")
    for case in ctx.of("base"):
        at_w = ctx.problem.weights_index
        w = ctx.outputs(case)[at_w].to(torch.float64)
        shape = output_shapes(ctx.problem, case.cfg)[at_w]
        if tuple(w.shape) != shape:
            ctx.fail(case, f"weights have shape {tuple(w.shape)}, expected {shape}")
        mask = valid_mask(ctx.problem, case).expand(shape)
        if not torch.isfinite(w).all():  # NaN compares false: it must fail here, never slip through a sum
            at = tuple((~torch.isfinite(w)).nonzero()[0].tolist())
            where = "a row with no allowed key must be all zeros" if not mask[at[:-1]].any() else "weights must be finite"
            ctx.fail(case, f"weights{list(at)} = {w[at].item()}: {where}")
        leaked = (w != 0) & ~mask
        if leaked.any():
            at = tuple(leaked.nonzero()[0].tolist())
            what = ("a row with no allowed key must be all zeros (not NaN, not uniform)" if not mask[at[:-1]].any()
                    else "masked keys must get weight exactly 0")
            ctx.fail(case, f"weights{list(at)} = {w[at].item():.6g}: {what}")
        sums = w.sum(-1)
        off = (sums - 1).abs() * mask.any(-1)
        if (off > 10 * tol.atol).any():
            at = argmax_index(off)
            ctx.fail(case, f"weights{list(at)} sum to {float(sums[at])!r} (off by {float(off[at]):.3g}); a row with a valid "
                     "key must sum to 1")


def group_inference_carried(problem, seed):
    """float64 calls under no_grad given a random cache or state, after an earlier call (draw/conventions.py)."""
    return inference_carried(problem, seed, "inference_carried")


def group_carried32(problem, seed):
    """float32 calls given a random cache or state, where the spec's own draws never carry one."""
    return carried_cases(problem, seed, "f32_carried", dtype="float32")


HALF = ("float16", "bfloat16")


def group_half_cpu(problem, seed):
    """Config 0 of each variant in float16 and bfloat16 on the CPU, for a problem whose contract has them (it has the
    cuda_half check): the outputs' dtype is judged here; the values are the cuda_half check's, on a GPU. A call the
    CPU cannot run in half (an operation with no Half kernel there) is not held against the learner."""
    if "cuda_half" not in problem.points or returns_arrays(problem):
        return []
    return group_cuda(problem, seed, HALF, "half_cpu", options(problem, "cuda_half").within, "cpu", reference=False)


def _overwritten(case, res) -> int | None:
    """The first output of an inference call's earlier run (draw/conventions.py) that changed by the end of the call,
    unless it is now one of the call's own input tensors, which the grader refilled (a given cache returned as is)."""
    if not res.earlier:  # decoded (judge/context.py): two runs of the call's outputs
        return None
    inputs = [t for a in case.call["args"] for t in (a if isinstance(a, (tuple, list)) else (a,))
              if isinstance(t, torch.Tensor)]
    for i, (then, now) in enumerate(zip(*res.earlier)):
        if not same_values(then, now) and not any(same_values(now, t) for t in inputs):
            return i
    return None


def check_side_effects(ctx):
    for case, res in _answered(ctx):  # every call the worker answered, whichever check drew it
        if res.changed:
            name = arg_name(ctx.problem, case.call, res.changed[0])
            ctx.fail(case, f"the call modified its input `{name}` in place; work on a "
                     "copy (masked_fill, not masked_fill_; x = x + 1, not x += 1)")
        overwritten = _overwritten(case, res)
        if overwritten is not None:
            ctx.fail(case, f"{ctx.problem.outputs[overwritten]} returned by an earlier call changed when the same "
                     f"{'module' if ctx.problem.is_module else 'function'} was called again: a caller keeps what a "
                     "call returned (a beam, a second conversation), so return new tensors (torch.cat, .clone()), "
                     "never views of a buffer that a later call writes again")
    for case in ctx.of("base") + ctx.of("f32") + ctx.of("f32_carried") + ctx.of("half_cpu"):
        raised = ctx.got.get(case.key)
        if case.group == "half_cpu" and raised is not None and not (raised.ok or raised.rejected or raised.grader_error):
            continue  # a half call that raised on the CPU (no Half kernel there): the GPU's check judges it
        res = ctx.result(case)
        for name, g in zip(ctx.problem.outputs, res.outputs):
            want = getattr(torch, case.call["dtype"])
            if g.dtype != want:
                how = ("no float64 constants: np.exp, @ and sums keep float32 when every operand is float32"
                       if returns_arrays(ctx.problem) else "use dtype=x.dtype or torch.*_like")
                ctx.fail(case, f"{name} came back as {str(g.dtype).replace('torch.', '')}, expected "
                         f"{str(want).replace('torch.', '')} (the inputs' dtype): create nothing with a fixed dtype ({how})")
        if any(d != "cpu" for d in res.devices):
            ctx.fail(case, f"outputs came back on {res.devices}, expected the inputs' device (cpu)")


register(Check("shapes", "output shapes (B=1, Tk=1, Tq != Tk, ...)", {"base": group_base}, check_shapes,
               concepts=(("shapes and heads", None),)))
register(Check("weight_sums", "rows sum to 1, masked weights exactly 0", {"base": group_base}, check_weight_sums,
               needs=lambda p: None if p.weights_index is not None else "an output with role 'weights'", concepts=(("masking", None),),
               rows_sum_to_one=True))


def _answered(ctx):
    """(case, result) of every call of the problem that the worker answered without raising, in key order."""
    for key in sorted(ctx.cases):
        res = ctx.got.get(key)
        if res is not None and res.ok and not res.rejected:
            yield ctx.cases[key], res


register(Check("side_effects", "inputs untouched, dtype and device kept",
               {"base": group_base, "f32": group_float32, "f32_carried": group_carried32, "half_cpu": group_half_cpu,
                "inference_carried": group_inference_carried}, check_side_effects))
