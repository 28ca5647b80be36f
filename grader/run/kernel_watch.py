"""What the kernels of one call did, as the interpreter ran them (kernels.py): each launch, and every element loaded,
stored or updated with atomics, held against the extent of the argument it falls in."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch


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


ACTIVE: list[Watch] = []
"""The watches open now (kernels.watching), the innermost last: the interpreter's patched functions count into it."""


def storage_bytes(t: torch.Tensor) -> torch.Tensor:
    """The whole storage of `t`, as bytes."""
    storage = t.untyped_storage()
    return torch.empty(0, dtype=torch.uint8).set_(storage, 0, (storage.nbytes(),), (1,))


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
