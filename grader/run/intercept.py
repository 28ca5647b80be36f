"""Watching what a learner's forward does, from inside torch: banned calls and the largest allocation.

Banned calls are refused below Python's modes, which the code they watch could switch off
(torch._C.DisableTorchFunction, torch.utils._python_dispatch._disable_current_modes):
`ban_kernels` replaces the banned aten operators' kernels in the dispatcher itself (whatever
path reaches them: F.*, torch.ops.aten.*, an OpOverload or its packet, with modes off), through a
registration no Python object holds, and `guard_functions` replaces banned Python functions in every
loaded torch module (F.multi_head_attention_forward, which nn.MultiheadAttention reaches by name;
flex_attention's modules and operator) by ones that raise BannedCall naming the call.
`Peak` is a torch dispatch mode: every operator that runs below autograd passes through it,
and it records the largest tensor an operator allocates. Views and in-place results alias
an existing tensor (their schema says so) and are not counted.
`ResidentPeak` reads the process's own peak resident memory: a fallback only, for machines where
the grader cannot measure the worker from outside (run/cgroup.py), since the process can reset it.
"""
from __future__ import annotations

import contextlib
import re

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves


class BannedCall(RuntimeError):
    """The learner's code called a function the problem bans."""


def _name(func) -> str:
    """A function's name; for an aten OpOverload (`...default`) or packet, the operator's base name."""
    packet = getattr(func, "overloadpacket", None) or func
    return (getattr(packet, "__name__", "") or "").split("::")[-1].split(".")[0]


def _message(name: str, module: str = "torch") -> str:
    return (f"called {module.replace('torch._C._nn', 'torch.nn.functional')}.{name}, which this problem bans: "
            "compute the scores, softmax and weighted sum yourself")


def _matches(name: str, banned) -> bool:
    return any(name == b or (b.endswith("*") and name.startswith(b[:-1])) for b in banned)


class Banned(TorchFunctionMode):
    """Raise BannedCall on a call to any of `banned` (function names; a trailing * matches a prefix): the refusal where
    no worker set up `ban_kernels` (the grader's runs of a catalogued mistake, run/hooks/ban.py)."""

    def __init__(self, banned, messages: dict | None = None):
        super().__init__()
        self.banned, self.messages = tuple(banned), messages or {}
        self.verdicts = _VERDICTS.setdefault(self.banned, {})

    def __torch_function__(self, func, types, args=(), kwargs=None):
        try:
            refused = self.verdicts.get(func)
        except TypeError:  # an unhashable callable: decided each time
            refused = None
        if refused is None:
            refused = _matches(_name(func), self.banned)
            with contextlib.suppress(TypeError):
                self.verdicts[func] = refused
        if refused:
            name = _name(func)
            if name in self.messages:
                raise BannedCall(self.messages[name]())
            raise BannedCall(_message(name, getattr(func, "__module__", "") or "torch"))
        return func(*args, **(kwargs or {}))


_VERDICTS: dict[tuple, dict] = {}
"""{banned names: {function: whether it is banned}}: Banned decides each function once per process (a catalogued
mistake's run passes hundreds of thousands of calls through the mode: names matched each time cost 40% of a
diagnosis)."""


def ban_kernels(banned, messages: dict | None = None) -> list[str]:
    """Replace, in this process's dispatcher, the kernels of every aten operator whose base name matches
    `banned` by one that raises BannedCall (its message from `messages[op]()` where given). Only for a worker:
    the grader's own oracles call them. The registrations are held by a dispatcher module no Python object
    references (`_unreachable`): the learner's code cannot destroy them to get the kernels back."""
    if not banned:
        return []
    import warnings

    module = torch._C._dispatch_library("IMPL", "aten", "", __file__, 0)
    done = []
    for full in torch._C._dispatch_get_all_op_names():
        namespace, _, op = full.partition("::")
        if namespace != "aten" or not _matches(op.split(".")[0], banned):
            continue
        keys = [k for k in ("CompositeImplicitAutograd", "CompositeExplicitAutograd", "CPU", "CUDA")
                if torch._C._dispatch_has_kernel_for_dispatch_key(full, k)]
        for key in keys[:1] if keys[:1] == ["CompositeImplicitAutograd"] else keys:
            with warnings.catch_warnings():  # "overriding a previously registered kernel": that is the point
                warnings.simplefilter("ignore")
                module.impl(op, key, _raiser(f"torch.ops.aten.{op}", messages or {}), False)
        done.append(op)
    _unreachable(module)
    return done


def _unreachable(obj) -> None:
    """Keep `obj` alive with no Python reference to it: one reference count taken at the C level and never given
    back. A pybind object is not tracked by the garbage collector, so no walk of Python's objects finds it."""
    import ctypes

    ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))


def _raiser(name: str, messages: dict):
    def banned_kernel(*args, **kwargs):
        op = name.split(".", 3)[-1].split(".")[0]
        raise BannedCall(messages[op]() if op in messages else _message(op, "torch.ops.aten"))

    return banned_kernel


FLEX_MODULES = ("torch.nn.attention.flex_attention", "torch._higher_order_ops.flex_attention")
"""Modules of flex_attention: a higher-order operator whose eager path is Python (no banned aten kernel runs), so
where `flex_attention` is banned every function of these modules, and the operator's kernels, are replaced."""


def guard_functions(banned, messages: dict | None = None) -> None:
    """Replace banned Python functions, in every torch module loaded (flex_attention's imported first), by ones
    that raise BannedCall whatever mode is active: torch.nn.functional's (reached by name at call time, e.g. by
    nn.MultiheadAttention), and higher-order operators (flex_attention) with everything of their modules."""
    import importlib
    import sys

    flex = _matches("flex_attention", banned)
    for name in FLEX_MODULES if flex else ():
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - an older torch without it: nothing to ban
            pass
    text, indexed = _INDEX if _INDEX is not None else ("", frozenset())
    found = [(m.group(2), m.group(1)) for b in banned for m in re.finditer(_pattern(b), text)]
    for name, module in list(sys.modules.items()):  # the modules loaded since the index, walked whole
        if module is None or not (name == "torch" or name.startswith("torch.")) or (name in indexed and not (
                flex and name in FLEX_MODULES)):
            continue
        whole = flex and name in FLEX_MODULES
        found += [(name, attr) for attr in list(vars(module)) if whole or _matches(attr, banned)]
    for name, attr in found:
        module = sys.modules.get(name)
        value = getattr(module, attr, None)
        if module is None or not callable(value) or isinstance(value, type(sys)) or attr.startswith("__"):
            continue
        _disarm(value)
        try:
            setattr(module, attr, _raiser_for(attr, name, messages or {}))
        except (AttributeError, TypeError):
            pass


_INDEX: tuple[str, frozenset] | None = None
"""(one line "attr<TAB>module" per callable of each torch module, the modules indexed), made by index_functions."""


def index_functions() -> None:
    """In a process that forks workers (the forkserver, the sandbox's server), once everything is imported: the names
    of every torch module's callables as one string, which guard_functions searches in a worker instead of walking
    every module's objects. That walk writes each object's reference count, so a forked worker copied the pages it
    shared with its parent (measured: 6,700 page faults and 0.03 s of CPU per worker that bans a function)."""
    import sys

    global _INDEX
    lines, names = [], []
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "torch" or name.startswith("torch.")):
            continue
        names.append(name)
        lines += [f"{attr}\t{name}" for attr, value in list(vars(module).items())
                  if callable(value) and "\n" not in attr and "\t" not in attr]
    _INDEX = ("\n" + "\n".join(lines) + "\n", frozenset(names))


def _pattern(banned: str) -> str:
    """The index lines of one banned name (a trailing * matches a prefix): (attr, module)."""
    name = re.escape(banned[:-1]) + r"[^\t\n]*" if banned.endswith("*") else re.escape(banned)
    return rf"\n({name})\t([^\n]+)(?=\n)"  # a literal start: re scans for it quickly (a ^ in multiline mode does not)


def _disarm(value) -> None:
    """A higher-order operator: its registered kernels replaced too (it is reachable through other objects)."""
    kernels = None if isinstance(value, type) else getattr(value, "py_kernels", None)
    if isinstance(kernels, dict):
        raiser = _raiser_for(getattr(value, "_name", "flex_attention"), "torch.nn.attention.flex_attention")
        for key in list(kernels):
            kernels[key] = raiser
        for cache in ("_dispatch_cache", "functorch_table", "python_key_table"):
            if isinstance(getattr(value, cache, None), dict):
                getattr(value, cache).clear()


def _raiser_for(name: str, module: str = "torch.nn.functional", messages: dict | None = None):
    def banned_function(*args, **kwargs):
        raise BannedCall(messages[name]() if messages and name in messages else _message(name, module))

    return banned_function


class Peak(TorchDispatchMode):
    """Record the largest number of elements of any tensor an operator allocates, and which operator."""

    def __init__(self):
        super().__init__()
        self.elements, self.op, self.ops = 0, None, 0

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # no torch.compile here: skipping it would import torch._dynamo (~1 s, 800 modules)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.ops += 1
        fresh = _ALLOCATES.get(func)
        if fresh is None:
            fresh = _ALLOCATES[func] = not any(r.alias_info is not None for r in func._schema.returns)
        if fresh:
            for t in (out,) if isinstance(out, torch.Tensor) else tree_leaves(out):
                if isinstance(t, torch.Tensor) and t.numel() > self.elements:
                    self.elements, self.op = t.numel(), f"{func.__name__} -> {tuple(t.shape)}"
        return out


_ALLOCATES: dict = {}
"""{operator: whether its results are new tensors (no view, no in-place result: its schema names no alias)}, read
once per operator."""


class ResidentPeak:
    """The growth of this process's peak resident memory during a block, in kB, from /proc (the kernel's
    count: no Python mode can hide an allocation from it). None where /proc cannot be read or reset."""

    kb: int | None = None

    def __enter__(self):
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # reset the peak (VmHWM) to the current resident size
            self.start = _status("VmRSS")
        except OSError:
            self.start = None
        return self

    def __exit__(self, *exc):
        if self.start is not None:
            try:
                self.kb = _status("VmHWM") - self.start
            except OSError:
                self.kb = None
        return False


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise OSError(f"no {field} in /proc/self/status")
