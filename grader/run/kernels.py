"""Triton kernels run through Triton's interpreter, watched: each element a kernel loads or stores is counted and held
against the extent of the argument it falls in, and each launch is recorded (kernel, arguments, grid, options).

Each tensor a launch passes reaches the kernel as a copy placed between two guard regions at least as large as the
tensor, so that an access past the end of one argument can never land inside another; an access outside every
argument is counted and its lane masked off (the interpreter would read or write there silently, or crash the
worker). Imports triton only when used: a worker of any other problem never loads it.
"""
from __future__ import annotations

import contextlib
import inspect
import os
from dataclasses import dataclass, field

import numpy as np
import torch

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


@dataclass
class Launch:
    """One kernel launch: the kernel's name, its arguments by parameter name, the grid and the launch options."""

    kernel: object  # the interpreted function
    args: dict
    grid: tuple
    options: dict


@dataclass
class Watch:
    """What the kernels launched within `watching()` did, in elements."""

    loaded: int = 0
    stored: int = 0
    outside: int = 0  # accesses outside every argument (their lanes masked off)
    first_outside: str = ""  # the first one, in words
    launches: list = field(default_factory=list)
    written: dict = field(default_factory=dict)  # storage address -> (bool array of bytes stored to, bytes after)
    by_arg: dict = field(default_factory=dict)  # argument name -> [elements loaded, stored, its size in elements]
    inputs: dict = field(default_factory=dict)  # storage address -> the call's input bytes as given (watching(inputs))
    foreign: int = 0  # elements loaded from memory that is no input of the call and no kernel stored (what the
    # launcher computed), or updated with atomics where such memory did not hold zero
    updated: dict = field(default_factory=dict)  # storage address -> elements updated with atomics
    restored: dict = field(default_factory=dict)  # storage address -> elements stored over an earlier store's
    tampered: str = ""  # an input whose memory the launcher changed before a launch, by name
    _regions: list = field(default_factory=list)  # this launch's [(start, end, storage address, name)]
    _copies: dict = field(default_factory=dict)  # this launch's storage address -> (guarded host buffer, guard bytes)
    _stored: dict = field(default_factory=dict)  # this launch's storage address -> bool array of bytes stored to
    _alive: list = field(default_factory=list)  # every storage a launch passed, held for the call: an address names one
    _elem: dict = field(default_factory=dict)  # storage address -> the element size of the first tensor passed on it

    def check(self, op: str, addr: np.ndarray, active: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
        """The lanes inside an argument (and the index of its region), the others counted as outside."""
        addr = addr.astype(np.int64).reshape(-1)
        active = np.broadcast_to(active, addr.shape if active.size != addr.size else active.shape).reshape(-1)
        starts = np.array([r[0] for r in self._regions], dtype=np.int64)
        ends = np.array([r[1] for r in self._regions], dtype=np.int64)
        at = np.searchsorted(starts, addr, side="right") - 1 if len(starts) else np.full(addr.shape, -1)
        ok = (at >= 0) & (addr + size <= ends[np.maximum(at, 0)]) if len(starts) else np.zeros(addr.shape, bool)
        bad = active & ~ok
        if bad.any():
            self.outside += int(bad.sum())
            if not self.first_outside:
                self.first_outside = _where(op, int(addr[bad][0]), self._regions, self.launches[-1])
        return active & ok, at

    def elements(self, at, good, size: int) -> int:
        """The lanes of an access in elements of the tensors they fall in: a lane `size` bytes wide moves size /
        element size of them (an int64 pointer over float32 memory moves two per lane)."""
        total = 0.0
        for r, n in zip(*np.unique(at[good], return_counts=True)):
            total += int(n) * size / self._elem[self._regions[r][2]]
        return int(np.ceil(total))

    def tally(self, at, good, size: int, loaded: bool, addr=None) -> None:
        """Per argument: the elements loaded (or stored) here, in the tensor's elements; loads from memory that no
        input of the call holds and no kernel of the call stored, byte for byte (`addr`: the lanes' addresses)."""
        for r, n in zip(*np.unique(at[good], return_counts=True)):
            start, end, key, name = self._regions[r]
            elem = self._elem[key]
            entry = self.by_arg.setdefault(name, [0, 0, (end - start) // elem])
            entry[0 if loaded else 1] += int(np.ceil(int(n) * size / elem))
            if loaded and self.inputs and key not in self.inputs:
                offs = addr.astype(np.int64).reshape(-1)[good & (at == r)] - start
                mine = self.written[key][0][(offs[:, None] + np.arange(size)).reshape(-1)].reshape(-1, size).all(1)
                self.foreign += int((~mine).sum())

    def update(self, addr, good, at, size: int) -> None:
        """Atomic updates: counted per storage; those of memory no input holds and no kernel stored must start from
        zero (else the launcher computed what they add to)."""
        addr = addr.astype(np.int64).reshape(-1)
        for r in np.unique(at[good]):
            start, _, key, _ = self._regions[r]
            offs = addr[good & (at == r)] - start
            self.updated[key] = self.updated.get(key, 0) + len(offs)
            if self.inputs and key not in self.inputs:
                buf, guard = self._copies[key]
                fresh = offs[~self.written[key][0][offs]]
                old = buf[guard:].numpy()[(fresh[:, None] + np.arange(size)).reshape(-1)]
                self.foreign += int(old.reshape(-1, size).any(1).sum())

    def summary(self) -> str:
        """The counts per argument, in a line: loads as a multiple of the argument's size, stores as a count."""
        loads = [f"{n} {e[0] / max(e[2], 1):.1f}x" for n, e in self.by_arg.items() if e[0]]
        stores = [f"{n} {e[1]:,}" for n, e in self.by_arg.items() if e[1]]
        return "; ".join(filter(None, [("loaded " + ", ".join(loads)) if loads else "",
                                       ("stored " + ", ".join(stores)) if stores else ""]))

    def mark(self, addr, good, at, size, plain: bool = False) -> None:
        """Record the bytes a store wrote, per argument storage; `plain` (a store, not an atomic update): count the
        elements stored again over what a store of the same launch wrote (programs racing: the last store wins; a
        later launch may rewrite what an earlier one stored)."""
        addr = addr.astype(np.int64).reshape(-1)
        for r in np.unique(at[good]):
            start, _, key, _ = self._regions[r]
            offs = addr[good & (at == r)] - start
            at_bytes = (offs[:, None] + np.arange(size)).reshape(-1)
            if plain:
                launch = self._stored.setdefault(key, np.zeros_like(self.written[key][0]))
                again = launch[at_bytes].reshape(-1, size).all(1)
                if again.any():
                    self.restored[key] = self.restored.get(key, 0) + int(again.sum())
                launch[at_bytes] = True
            self.written[key][0][at_bytes] = True


def _where(op: str, addr: int, regions, launch) -> str:
    """An access outside every argument, in words: how far past or before the nearest one."""
    name = getattr(launch.kernel, "__name__", "the kernel")
    if not regions:
        return f"{name} {op} memory at address {addr:#x}, outside every argument"
    start, end, _, arg = min(regions, key=lambda r: min(abs(addr - r[0]), abs(addr - r[1])))
    where = f"{addr - end} bytes past the end of" if addr >= end else f"{start - addr} bytes before the start of"
    return f"{name} {op} {where} argument `{arg}`"


_ACTIVE: list[Watch] = []


@contextlib.contextmanager
def watching(inputs=()):
    """Within, every interpreted launch is recorded and its memory accesses counted into the Watch yielded. `inputs`:
    the call's input tensors: loads from any other memory are counted as foreign, and an input whose bytes differ from
    these at a launch is named as tampered with (what a kernel reads must be the call's inputs, as given)."""
    from triton.runtime import interpreter as it

    watch = Watch()
    for t in inputs:
        if isinstance(t, torch.Tensor) and t.device.type == "cpu":
            watch.inputs[t.untyped_storage().data_ptr()] = _bytes(t).clone()
    saved = (it.GridExecutor._init_args_hst, it.GridExecutor._restore_args_dev, it.InterpretedFunction.run,
             dict(vars(it.interpreter_builder)))
    it.GridExecutor._init_args_hst = _guarded_args
    it.GridExecutor._restore_args_dev = _restore_args
    it.InterpretedFunction.run = _recorded_run(saved[2])
    builder = it.interpreter_builder
    _count(builder, watch)
    _ACTIVE.append(watch)
    try:
        yield watch
    finally:
        _ACTIVE.pop()
        it.GridExecutor._init_args_hst, it.GridExecutor._restore_args_dev, it.InterpretedFunction.run = saved[:3]
        for name in ("create_masked_load", "create_masked_store", "create_atomic_rmw", "create_atomic_cas"):
            vars(builder).pop(name, None)
        vars(builder).update({k: v for k, v in saved[3].items() if k.startswith("create_")})


def _recorded_run(original):
    def run(self, *args, grid, warmup, **kwargs):
        if _ACTIVE and not warmup:
            bound = inspect.signature(self.fn).bind_partial(*args, **{k: v for k, v in kwargs.items()
                                                                   if k in self.arg_names})
            bound.apply_defaults()
            options = {k: v for k, v in kwargs.items() if k not in self.arg_names}
            _ACTIVE[-1].launches.append(Launch(self, dict(bound.arguments), tuple(grid) if not callable(grid)
                                               else grid, options))
        return original(self, *args, grid=grid, warmup=warmup, **kwargs)
    return run


def _guarded_args(self, args_dev, kwargs):
    """The launch's tensors as guarded host copies (one per storage), and the watch's regions for them."""
    watch = _ACTIVE[-1]
    copies, regions = {}, []
    names = list(inspect.signature(self.fn).parameters)

    def host(arg, name):
        if isinstance(arg, tuple):
            return type(arg)(host(a, name) for a in arg)
        if not isinstance(arg, torch.Tensor):
            return arg
        storage = arg.untyped_storage()
        key = storage.data_ptr()
        watch._alive.append(storage)  # not freed while the call runs: no later tensor takes its address
        watch._elem.setdefault(key, arg.element_size())
        if key in watch.inputs and not watch.tampered and not torch.equal(_bytes(arg), watch.inputs[key]):
            watch.tampered = name  # the launcher wrote into an input before launching
        stored = watch.written.get(key)
        if stored is not None and stored[1] is not None and not watch.tampered and key not in copies:
            mask = torch.from_numpy(stored[0])  # what kernels stored, as the last launch left it
            if not torch.equal(_bytes(arg)[mask], stored[1][mask]):
                watch.tampered = name  # the launcher changed what a kernel stored, between launches
        if key not in copies:
            n = storage.nbytes()
            guard = max(4096, -(-n // 4096) * 4096)
            buf = torch.full((guard + n + guard,), 0xFF, dtype=torch.uint8)  # all ones: NaN in every float dtype
            if n:
                buf[guard:guard + n].copy_(torch.empty(0, dtype=torch.uint8).set_(storage.cpu(), 0, (n,), (1,)))
            copies[key] = (buf, guard)
            start = buf.data_ptr() + guard
            regions.append((start, start + n, key, name))
            watch.written.setdefault(key, (np.zeros(n, dtype=bool), None))
        buf, guard = copies[key]
        out = torch.empty(0, dtype=arg.dtype)
        return out.set_(buf.untyped_storage(), guard // arg.element_size() + arg.storage_offset(), arg.size(),
                        arg.stride())

    hst = [host(a, names[i] if i < len(names) else str(i)) for i, a in enumerate(args_dev)]
    kw = {k: host(v, k) for k, v in kwargs.items()}
    watch._regions = sorted(regions)
    watch._copies = copies
    watch._stored = {}
    return hst, kw


def _bytes(t: torch.Tensor) -> torch.Tensor:
    """The whole storage of `t`, as bytes."""
    storage = t.untyped_storage()
    return torch.empty(0, dtype=torch.uint8).set_(storage, 0, (storage.nbytes(),), (1,))


def _restore_args(self, args_dev, args_hst, kwargs, kwargs_hst):
    """Each storage's bytes back from its guarded copy; what each holds now is kept, to compare with what the launcher
    returns."""
    watch = _ACTIVE[-1]
    done = set()
    for arg in [*args_dev, *kwargs.values()]:
        for t in (arg if isinstance(arg, tuple) else (arg,)):
            if not isinstance(t, torch.Tensor) or t.untyped_storage().data_ptr() in done:
                continue
            key = t.untyped_storage().data_ptr()
            done.add(key)
            buf, guard = watch._copies[key]
            n = t.untyped_storage().nbytes()
            if n:
                torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage(), 0, (n,), (1,)).copy_(
                    buf[guard:guard + n])
            written = watch.written[key][0]
            watch.written[key] = (written, buf[guard:guard + n].clone())
    watch._regions, watch._copies = [], {}


def _count(builder, watch: Watch) -> None:
    """The builder's memory operations counted and bounded (instance attributes over its class's methods)."""
    from triton.runtime.interpreter import TensorHandle, _get_np_dtype
    import triton.language as tl

    cls = type(builder)

    def size(ptrs):
        return np.dtype(_get_np_dtype(ptrs.get_element_ty())).itemsize

    def load(ptrs, mask, other, cache_policy, is_volatile):
        good, at = watch.check("loads", ptrs.data, mask.data, size(ptrs))
        watch.loaded += watch.elements(at, good, size(ptrs))
        watch.tally(at, good, size(ptrs), True, ptrs.data)
        return cls.create_masked_load(builder, ptrs, TensorHandle(good.reshape(ptrs.data.shape), tl.int1), other,
                                      cache_policy, is_volatile)

    def store(ptrs, value, mask, cache_policy):
        good, at = watch.check("stores to", ptrs.data, mask.data, size(ptrs))
        watch.stored += watch.elements(at, good, size(ptrs))
        watch.tally(at, good, size(ptrs), False)
        watch.mark(ptrs.data, good, at, size(ptrs), plain=True)
        return cls.create_masked_store(builder, ptrs, value, TensorHandle(good.reshape(ptrs.data.shape), tl.int1),
                                       cache_policy)

    def rmw(op, ptr, val, mask, sem, scope):
        good, at = watch.check("updates", ptr.data, mask.data, size(ptr))
        watch.loaded += watch.elements(at, good, size(ptr))
        watch.stored += watch.elements(at, good, size(ptr))
        watch.update(ptr.data, good, at, size(ptr))
        watch.mark(ptr.data, good, at, size(ptr))
        return cls.create_atomic_rmw(builder, op, ptr, val, TensorHandle(good.reshape(ptr.data.shape), tl.int1),
                                     sem, scope)

    def cas(ptr, cmp, val, sem, scope):
        good, at = watch.check("updates", ptr.data, np.ones(ptr.data.shape, bool), size(ptr))
        if not good.all():
            raise RuntimeError("an atomic compare-and-swap outside every argument (refused)")
        watch.loaded += watch.elements(at, good, size(ptr))
        watch.stored += watch.elements(at, good, size(ptr))
        watch.update(ptr.data, good, at, size(ptr))
        watch.mark(ptr.data, good, at, size(ptr))
        return cls.create_atomic_cas(builder, ptr, cmp, val, sem, scope)

    builder.create_masked_load, builder.create_masked_store = load, store
    builder.create_atomic_rmw, builder.create_atomic_cas = rmw, cas


def unwritten(watch: Watch, outputs, names) -> list[str]:
    """The outputs that are not wholly what the kernels stored: no kernel stored every element, or the launcher changed
    them after the last launch (each an output name, with why)."""
    out = []
    for name, o in zip(names, outputs):
        if not isinstance(o, torch.Tensor) or o.device.type != "cpu":
            continue
        key = o.untyped_storage().data_ptr()
        if key not in watch.written or watch.written[key][1] is None:
            out.append(f"{name}: no kernel stored to its memory")
            continue
        written, after = watch.written[key]
        size = o.element_size()
        index = torch.arange(o.untyped_storage().nbytes() // size).as_strided(o.shape, o.stride(), o.storage_offset())
        bytes_at = (index.reshape(-1, 1).numpy() * size + np.arange(size)).reshape(-1)
        if key in watch.updated:  # a zeroed buffer the kernels add to: where no update landed, it keeps its zeros
            written = written | (after.numpy() == 0)
        if not written[bytes_at].all():
            out.append(f"{name}: {int((~written[bytes_at]).sum()) // size} of its elements were never stored by a "
                       "kernel")
        elif not torch.equal(after[torch.from_numpy(bytes_at)],
                             torch.empty(0, dtype=torch.uint8).set_(o.untyped_storage(), 0,
                                                                    (o.untyped_storage().nbytes(),), (1,))[
                                 torch.from_numpy(bytes_at)]):
            out.append(f"{name}: changed after the last kernel stored it")
    return out

