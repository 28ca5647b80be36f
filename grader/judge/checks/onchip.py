"""Check onchip: the kernels fit a GPU's on-chip budget, measured without a GPU.

One call in float16 at GPU-sized tiles (the spec's `call(cfg)`): the kernels it launches are compiled by Triton for
each CUDA arch of the spec (run/hooks/triton.py's `onchip`), and each compiled kernel's shared memory and registers
must fit the arch: shared memory per block at most the arch's opt-in maximum, registers per thread at most 255 and
registers per block (threads x registers) at most the 65,536 of one multiprocessor, and nothing spilled from the
registers to local memory (cuobjdump's stack frame, where the registers reached the cap of 255: a small frame
beside fewer registers is the compiler's own). The message shows the numbers."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..context import GraderError
from ..registry import Check, options, register
from .traffic import trusted
from ...run.kernel_compile import unreachable
from ...draw.groups import each_case, with_args
from ...draw.scenarios import Case, base_call, make_mask

SHARED = {80: 166_912, 86: 101_376, 89: 101_376, 90: 232_448}
"""Shared memory one block may use, in bytes (the opt-in maximum: CUDA's programming guide, compute capabilities)."""
REGISTERS = 65_536  # per multiprocessor, every arch above
MAX_PER_THREAD = 255


@dataclass(frozen=True)
class OnchipOptions:
    """`call(cfg)` -> (dims, {argument: value}, dtype): the compiled call; `arches`: the CUDA archs (80: sm_80);
    `dtypes(args)` -> each output's dtype as the contract gives it for the call's arguments: that call is the one in
    half precision, where a float32 working buffer returned as it is goes wrong."""

    call: Callable
    arches: tuple = (80, 90)
    dtypes: Callable | None = None


def group_onchip(problem, seed):
    opts = options(problem, "onchip")
    vi, variant, ci, cfg, gen = next(iter(each_case(problem, seed)))
    dims, args, dtype = opts.call(cfg)
    cfg = {**cfg, **dims}
    call = base_call(problem, cfg, variant, gen("onchip"), make_mask(problem, "none", cfg, gen("onchip")), dtype=dtype)
    call = dict(with_args(problem, call, args), hooks={"onchip": {"arches": list(opts.arches)}})
    return [Case("onchip", "onchip", variant, cfg, call, reference=False)]


def check_onchip(ctx):
    arches = options(ctx.problem, "onchip").arches
    for case in ctx.of("onchip"):
        trusted(ctx, case)  # measured in the learner's sandbox, as the traffic is
        seen = ctx.result(case).extra.get("onchip")
        if seen is None:
            ctx.fail(case, "the grader's compilation of the kernels is missing: it was switched off")
        if seen.get("fault"):
            raise GraderError(f"the grader could not compile the kernels for a GPU: {seen['fault']}")
        if seen.get("error"):
            ctx.fail(case, f"Triton could not compile the kernels for a GPU: {seen['error']}")
        if not seen["launches"]:
            ctx.fail(case, "no Triton kernel was launched: there is nothing to compile")
        _dtypes(ctx, case)
        for arch in arches:
            shared, regs = seen[f"shared_{arch}"], seen[f"regs_{arch}"]
            threads = 32 * seen[f"warps_{arch}"]
            where = f"compiled for sm_{arch}, kernel `{seen[f'kernel_{arch}']}` uses {shared:,} bytes of shared " \
                    f"memory and {regs} registers per thread ({threads} threads: {regs * threads:,} per block)"
            if shared > SHARED[arch]:
                ctx.fail(case, f"{where}; sm_{arch} gives a block at most {SHARED[arch]:,} bytes: smaller tiles, or "
                         "fewer of them held at once")
            # a stack frame is a spill where the registers ran out (at the cap): a small frame beside fewer registers
            # is the compiler's own (a local array, a call), which a correct kernel may have
            spill = seen[f"spill_{arch}"] if regs >= MAX_PER_THREAD else 0
            if spill:
                ctx.fail(case, f"{where}, and {spill:,} bytes per thread that did not fit the registers spill to "
                         "local memory (slow, off the chip): smaller tiles, fewer values live at once, or more warps "
                         "to hold them (num_warps=8 at the launch)")
            if regs > MAX_PER_THREAD or regs * threads > REGISTERS:
                ctx.fail(case, f"{where}; sm_{arch} gives a thread at most {MAX_PER_THREAD} and a block at most "
                         f"{REGISTERS:,}")


def _dtypes(ctx, case) -> None:
    """The call's outputs in the contract's dtypes (a float16 call: float32 buffers converted back where due)."""
    rule = options(ctx.problem, "onchip").dtypes
    if rule is None:
        return
    # their dtypes only, unvouched: the contract lets a float32 atomics buffer be converted to the inputs' dtype, a
    # copy no kernel stored (in float32 the conversion returns the buffer itself, which the other checks' calls use)
    for name, got, want in zip(ctx.problem.outputs, ctx.raw_outputs(case), rule(case.call["args"])):
        if got.dtype != want:
            ctx.fail(case, f"returned {name} as {str(got.dtype).removeprefix('torch.')} for "
                     f"{str(case.call['args'][0].dtype).removeprefix('torch.')} inputs; the contract: "
                     f"{str(want).removeprefix('torch.')} (convert a float32 working buffer to it before returning)")


def _unavailable(jailed: bool) -> str | None:
    from ...run.hooks import HOOKS

    return unreachable(jailed, HOOKS["interpret"].preload)


def _contract(problem, opts):
    dims, args, dtype = opts.call({})
    call = ", ".join([f"{n} = {dims[n]}" for n in ("Tq", "Tk", "d") if n in dims] + [f"{n} = {v}" for n, v in args.items()])
    return [f"Compiled for {', '.join(f'sm_{a}' for a in opts.arches)} without a GPU (the kernels one {dtype} call "
            f"launches, {call}), the kernels' shared memory per "
            f"block and registers fit each arch ({', '.join(f'sm_{a}: {SHARED[a]:,} bytes' for a in opts.arches)}; "
            f"at most {MAX_PER_THREAD} registers per thread and {REGISTERS:,} per block, none spilled to local memory)"
            + ("; that call's outputs come back in the dtypes the table gives" if opts.dtypes else "") + ".", ""]


register(Check("onchip", "fits the on-chip budget of sm_80 and sm_90 (compiled without a GPU)", {"onchip": group_onchip},
               check_onchip, options=OnchipOptions, contract=_contract, diagnose=False, unavailable=_unavailable,
               needs=lambda p: None if "onchip" in (p.options or {}) else "options['onchip'] (the compiled call)"))
