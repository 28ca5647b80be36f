"""Triton kernels run through Triton's interpreter, watched: each element a kernel loads or stores is counted and held
against the extent of the argument it falls in, and each launch is recorded (kernel, arguments, grid, options).

Each tensor a launch passes reaches the kernel as a copy placed between two guard regions at least as large as the
tensor, so that an access past the end of one argument can never land inside another; an access outside every
argument is counted and its lane masked off (the interpreter would read or write there silently, or crash the
worker): kernel_launch.py. What a call's kernels did is its Watch: kernel_watch.py. Imports triton only when used: a
worker of any other problem never loads it.
"""
from __future__ import annotations

import contextlib
import inspect
import os

import torch

from .kernel_launch import count, guarded_args, restore_args
from .kernel_watch import ACTIVE, Launch, Watch, storage_bytes, unwritten

__all__ = ["INTERPRET", "NO_ALLOCATOR", "Launch", "Watch", "environment", "interpreting", "unwritten", "watching"]

INTERPRET = "TRITON_INTERPRET"


@contextlib.contextmanager
def environment(**values):
    """os.environ with `values` set (None: removed) within, restored after."""
    old = {k: os.environ.get(k) for k in values}
    try:
        for k, v in values.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
        yield
    finally:
        for k, v in old.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)


_TWINS: dict = {}
"""id of one of triton.language's own jit functions -> its interpreted twin (made once per process)."""


@contextlib.contextmanager
def interpreting():
    """Within, @triton.jit makes the interpreter's functions (a module imported here runs on any machine), and
    triton.language's own jit functions (tl.zeros, ...) are the interpreter's too. Triton makes those once, when it is
    first imported, interpreted or compiled by the environment then: a worker imports it before its sandbox (whose
    uid may not reach Triton's files) with the interpreter off, so that a process of its own may still compile."""
    import sys

    swaps = []
    if "triton.language" in sys.modules:
        from triton.runtime.interpreter import InterpretedFunction
        from triton.runtime.jit import JITFunction

        for name, module in list(sys.modules.items()):
            if name.startswith("triton.language") and module is not None:
                for attr, value in list(vars(module).items()):
                    if isinstance(value, JITFunction):
                        twin = _TWINS.setdefault(id(value), InterpretedFunction(value.fn))
                        swaps.append((module, attr, value))
                        setattr(module, attr, twin)
    try:
        with environment(**{INTERPRET: "1"}), _allocator_asked():
            yield
    finally:
        for module, attr, value in swaps:
            setattr(module, attr, value)


@contextlib.contextmanager
def _allocator_asked():
    """Within, the interpreter's make_tensor_descriptor refuses where no allocator is set, as a GPU launch would."""
    from triton.runtime import _allocation
    from triton.runtime import interpreter as it

    builder = it.interpreter_builder
    before = vars(builder).get("create_make_tensor_descriptor")
    make = type(builder).create_make_tensor_descriptor

    def create(*args, **kwargs):
        if _allocation._allocator.get() is _allocation._NULL_ALLOCATOR:
            raise RuntimeError(NO_ALLOCATOR)
        return make(builder, *args, **kwargs)

    builder.create_make_tensor_descriptor = create
    try:
        yield
    finally:
        vars(builder).pop("create_make_tensor_descriptor", None)
        if before is not None:
            builder.create_make_tensor_descriptor = before


NO_ALLOCATOR = ("a tensor descriptor made inside a kernel (tl.make_tensor_descriptor) needs a global scratch "
                "allocator on a GPU, where the launch raises \"Kernel requires a runtime memory allocation, but no "
                "allocator was set\": the launcher must call triton.set_allocator(...) before launching (Triton's "
                "interpreter runs without one, so the grader asks for it)")


@contextlib.contextmanager
def watching(inputs=()):
    """Within, every interpreted launch is recorded and its memory accesses counted into the Watch yielded. `inputs`:
    the call's input tensors: loads from any other memory are counted as foreign, and an input whose bytes differ from
    these at a launch is named as tampered with (what a kernel reads must be the call's inputs, as given)."""
    from triton.runtime import interpreter as it

    watch = Watch()
    for t in inputs:
        if isinstance(t, torch.Tensor) and t.device.type == "cpu":
            watch.inputs[t.untyped_storage().data_ptr()] = storage_bytes(t).clone()
    saved = (it.GridExecutor._init_args_hst, it.GridExecutor._restore_args_dev, it.InterpretedFunction.run,
             dict(vars(it.interpreter_builder)))
    it.GridExecutor._init_args_hst = guarded_args
    it.GridExecutor._restore_args_dev = restore_args
    it.InterpretedFunction.run = _recorded_run(saved[2])
    builder = it.interpreter_builder
    count(builder, watch)
    ACTIVE.append(watch)
    try:
        yield watch
    finally:
        ACTIVE.pop()
        it.GridExecutor._init_args_hst, it.GridExecutor._restore_args_dev, it.InterpretedFunction.run = saved[:3]
        for name in ("create_masked_load", "create_masked_store", "create_atomic_rmw", "create_atomic_cas"):
            vars(builder).pop(name, None)
        vars(builder).update({k: v for k, v in saved[3].items() if k.startswith("create_")})


def _recorded_run(original):
    def run(self, *args, grid, warmup, **kwargs):
        if ACTIVE and not warmup:
            bound = inspect.signature(self.fn).bind_partial(*args, **{k: v for k, v in kwargs.items()
                                                                   if k in self.arg_names})
            bound.apply_defaults()
            options = {k: v for k, v in kwargs.items() if k not in self.arg_names}
            ACTIVE[-1].launches.append(Launch(self, dict(bound.arguments), tuple(grid) if not callable(grid)
                                               else grid, options))
        return original(self, *args, grid=grid, warmup=warmup, **kwargs)
    return run
