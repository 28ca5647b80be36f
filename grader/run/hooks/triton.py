"""Triton kernels on any machine: `interpret` runs a problem's kernels through Triton's interpreter (set up for the
worker's whole life before the learner's module loads, and around each of the grader's own runs); `traffic` counts
what the kernels launched by one call load and store (run/kernels.py), result {"traffic": {...}}; `onchip` compiles
the kernels a call launched for CUDA targets, without a GPU, result {"onchip": {...}}."""
from __future__ import annotations

import contextlib

from . import Hook, register
from ..kernel_compile import COMPILE_SECONDS, LearnerCompileError, compile_launches  # imported before the sandbox hides the kit
from ..kernels import interpreting, unwritten, watching


class Interpret(Hook):
    name = "interpret"
    order = 5  # outermost: every other hook's work runs interpreted too
    heavy = True  # every call of the problem: its worker goes first, its expected values wait for its code to run
    # Triton, and what the interpreter imports while it runs a kernel (measured: sys.modules before and after)
    preload = ("triton", "triton.language", "triton.runtime.interpreter", "triton.compiler.code_generator",
               "triton.experimental.gluon", "numpy.ma")

    def setup(self, options) -> None:
        Interpret.whole_life = interpreting()  # a worker of a kernels problem only ever interprets
        Interpret.whole_life.__enter__()

    def importing(self, options):
        return interpreting()

    def around(self, options):
        return interpreting()


class Traffic(Hook):
    name = "traffic"
    launches: list = []  # the last run's launches (run/kernels.Launch), for `onchip`
    order = 85
    fields = {"traffic": ({"loaded": int, "stored": int, "outside": int, "launches": int},
                          {"first_outside": str, "unwritten": str, "by_arg": str, "foreign": int, "tampered": str,
                           "smuggled": str, "atomic": str, "restored": str})}

    @contextlib.contextmanager
    def around(self, options):
        box: dict = {}
        Traffic.current = box
        try:
            yield box
        finally:
            Traffic.current = None

    def run(self, options, fn, args, once):
        with watching(args) as watch:
            outs = once(fn, args)
        Traffic.launches = watch.launches
        Traffic.current.update(loaded=watch.loaded, stored=watch.stored, outside=watch.outside,
                               launches=len(watch.launches), first_outside=watch.first_outside,
                               by_arg=watch.summary()[:200], foreign=watch.foreign, tampered=watch.tampered[:80],
                               smuggled=_smuggled(watch.launches), atomic=_atomic(watch, outs, options),
                               restored=_restored(watch, outs, options),
                               unwritten="; ".join(unwritten(watch, outs, options.get("names") or [])))
        return outs

    def finish(self, options, state, result) -> None:
        result["traffic"] = dict(state)


def _atomic(watch, outs, options) -> str:
    """The outputs (by the spec's names, sorted, comma-joined) whose memory the kernels updated with atomics."""
    names = options.get("names") or []
    return ",".join(sorted(n for n, o in zip(names, outs if isinstance(outs, (tuple, list)) else [outs])
                           if hasattr(o, "untyped_storage") and o.untyped_storage().data_ptr() in watch.updated))


def _restored(watch, outs, options) -> str:
    """The outputs (by the spec's names) whose elements a store replaced after an earlier store of the call, with how
    many: "dk 1,120, dv 1,120"."""
    names = options.get("names") or []
    return ", ".join(f"{n} {watch.restored[o.untyped_storage().data_ptr()]:,}"
                     for n, o in zip(names, outs if isinstance(outs, (tuple, list)) else [outs])
                     if hasattr(o, "untyped_storage") and o.untyped_storage().data_ptr() in watch.restored)[:200]


def _smuggled(launches) -> str:
    """An argument of a launch that could carry values computed outside the kernels in bulk (a tuple, a list), by name
    (the kernels take tensors and scalars only)."""
    for launch in launches:
        for name, value in launch.args.items():
            if isinstance(value, (tuple, list)):
                return name[:80]
    return ""


register(Interpret())
register(Traffic())


class Onchip(Hook):
    """The kernels a call launches, compiled for CUDA targets without a GPU (run/kernels.py): options {"arches":
    [80, 90]}. Result: {"onchip": {"shared_80": bytes, "regs_80": per thread, "spill_80": bytes, "warps_80",
    "kernel_80": the kernel using most shared memory, ...; "error": the compiler's refusal}}."""

    name = "onchip"
    order = 86  # finishes after `traffic`, whose run recorded the launches
    reference = False  # the trusted reference is not compiled
    grace = COMPILE_SECONDS  # the compilation is the grader's work: the call's clock is not the learner's for it
    fields = {"onchip": ({"launches": int}, {"error": str, "fault": str,
                                             **{f"{what}_{arch}": int for what in ("shared", "regs", "spill", "warps")
                                                for arch in (80, 90)},
                                             **{f"kernel_{arch}": str for arch in (80, 90)}})}

    def finish(self, options, state, result) -> None:
        launches = Traffic.launches  # what the call's run launched (every call of a kernels problem is counted)
        box = result["onchip"] = {"launches": len(launches)}
        try:
            compiled = compile_launches(launches, tuple(options["arches"]))
        except LearnerCompileError as exc:
            box["error"] = str(exc)
            return
        except Exception as exc:  # noqa: BLE001 - the compiler or its tools failed: the grader's failure
            box["fault"] = f"{type(exc).__name__}: {exc}"[:300]
            return
        for arch, kernels in compiled.items():
            if kernels:
                name, shared, _, _, warps = max(kernels, key=lambda k: (k[1], k[2]))
                box.update({f"shared_{arch}": shared, f"regs_{arch}": max(k[2] for k in kernels),
                            f"spill_{arch}": max(k[3] for k in kernels), f"warps_{arch}": warps,
                            f"kernel_{arch}": name})


register(Onchip())
