"""A launch run by the interpreter, watched (kernel_watch.py): each tensor it passes reaches the kernel as a copy placed
between two guard regions at least as large as the tensor, copied back after the launch, and the interpreter's memory
operations count every element into the open watch and mask off the lanes outside every argument."""
from __future__ import annotations

import inspect

import numpy as np
import torch

from .kernel_watch import ACTIVE, Watch, storage_bytes


def guarded_args(self, args_dev, kwargs):
    """The launch's tensors as guarded host copies (one per storage), and the watch's regions for them."""
    watch = ACTIVE[-1]
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
        if key in watch.inputs and not watch.tampered and not torch.equal(storage_bytes(arg), watch.inputs[key]):
            watch.tampered = name  # the launcher wrote into an input before launching
        stored = watch.written.get(key)
        if stored is not None and stored[1] is not None and not watch.tampered and key not in copies:
            mask = torch.from_numpy(stored[0])  # what kernels stored, as the last launch left it
            if not torch.equal(storage_bytes(arg)[mask], stored[1][mask]):
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


def restore_args(self, args_dev, args_hst, kwargs, kwargs_hst):
    """Each storage's bytes back from its guarded copy; what each holds now is kept, to compare with what the launcher
    returns."""
    watch = ACTIVE[-1]
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


def count(builder, watch: Watch) -> None:
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
