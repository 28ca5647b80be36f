"""Watching what a learner's forward does, from inside torch: banned calls and the largest allocation.

`Banned` is a torch function mode: every torch function the code calls (torch.*, F.*, tensor
methods, torch.ops.aten.*) passes through it, so a banned one raises BannedCall naming it,
however it was reached (an nn.MultiheadAttention inside the module included).
`Peak` is a torch dispatch mode: every operator that runs below autograd passes through it,
and it records the largest tensor an operator allocates. Views and in-place results alias
an existing tensor (their schema says so) and are not counted.
"""
from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves


class BannedCall(RuntimeError):
    """The learner's code called a function the problem bans."""


def _name(func) -> str:
    return getattr(func, "__name__", "") or ""


def _matches(name: str, banned) -> bool:
    return any(name == b or (b.endswith("*") and name.startswith(b[:-1])) for b in banned)


class Banned(TorchFunctionMode):
    """Raise BannedCall on a call to any of `banned` (function names; a trailing * matches a prefix)."""

    def __init__(self, banned):
        super().__init__()
        self.banned = tuple(banned)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = _name(func)
        if _matches(name, self.banned):
            module = getattr(func, "__module__", "") or "torch"
            raise BannedCall(f"called {module.replace('torch._C._nn', 'torch.nn.functional')}.{name}, which this "
                             "problem bans: compute the scores, softmax and weighted sum yourself")
        return func(*args, **(kwargs or {}))


class Peak(TorchDispatchMode):
    """Record the largest number of elements of any tensor an operator allocates, and which operator."""

    def __init__(self):
        super().__init__()
        self.elements, self.op = 0, None

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # no torch.compile here: skipping it would import torch._dynamo (~1 s, 800 modules)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not any(r.alias_info is not None for r in func._schema.returns):
            for t in tree_leaves(out):
                if isinstance(t, torch.Tensor) and t.numel() > self.elements:
                    self.elements, self.op = t.numel(), f"{func.__name__} -> {tuple(t.shape)}"
        return out
