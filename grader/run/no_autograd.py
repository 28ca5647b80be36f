"""Refusing automatic differentiation while a call runs (attention_backward computes its gradients by hand).

Every reverse-mode entry point (Tensor.backward, torch.autograd.backward/grad, torch.autograd.functional,
torch.func.grad/vjp/jacrev/hessian) ends in the autograd engine, `Variable._execution_engine.run_backward`,
read at call time: `NoAutograd` swaps that engine for one that raises, so a function imported under any
name is caught; and in a worker, `disable_engine` replaces the engine type's own method for the worker's whole life,
so an engine saved at import or built anew is refused too. Forward mode (torch.autograd.forward_ad.make_dual, torch.func.jvp/jacfwd) makes dual tensors
through the aten operator `_make_dual`, which such a spec bans (FORWARD_OPS; intercept.ban_kernels replaces its
kernel in the worker, with `refusal` as its message).
The message names the public function the learner's code called: the outermost torch frame on the stack.
"""
from __future__ import annotations

import sys

import torch
from torch.autograd.variable import Variable

from .intercept import BannedCall

FORWARD_OPS = ("_make_dual",)
"""aten operators of forward-mode AD: a spec that refuses autograd bans them; their message is `refusal`."""

_TORCH = torch.__file__.rsplit("/", 1)[0] + "/"
_OURS = __file__.rsplit("/", 2)[0] + "/"  # the grader's own frames (its torch function mode) are looked through
_PUBLIC = {  # (file under torch/, function) -> what the learner wrote
    ("_tensor.py", "Tensor.backward"): "Tensor.backward",
    ("autograd/__init__.py", "backward"): "torch.autograd.backward",
    ("autograd/__init__.py", "grad"): "torch.autograd.grad",
}


def called() -> str:
    """The public torch function the learner's code called, read from the stack: the outermost frame inside torch
    (the grader's own frames in between are looked through)."""
    frame, outer = sys._getframe(1), None
    while frame is not None:
        name, code = frame.f_code.co_filename, frame.f_code
        if name.startswith(_TORCH):
            outer = (name[len(_TORCH):], getattr(code, "co_qualname", code.co_name).split(".<locals>")[0])
        elif outer is not None and not name.startswith(_OURS):
            break
        frame = frame.f_back
    if outer is None:
        return "automatic differentiation"
    path, func = outer
    if outer in _PUBLIC:
        return _PUBLIC[outer]
    module = "torch." + path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
    if module.startswith("torch._functorch"):  # torch.func's transforms: grad, vjp (its _vjp_with_argnums), jacrev, ...
        module, func = "torch.func", func.strip("_").removesuffix("_with_argnums")
    return f"{module}.{func}"


def refusal() -> str:
    return (f"called {called()}, which this problem bans: automatic differentiation of any kind is off during the call; "
            "compute the gradients by hand (dV = P^T dO, dP = dO V^T, dS = P * (dP - rowsum(dO * O)), dQ = dS K / sqrt(d), "
            "dK = dS^T Q / sqrt(d))")


class _RefusingEngine:
    def run_backward(self, *args, **kwargs):
        raise BannedCall(refusal())

    def __getattr__(self, name):
        raise BannedCall(refusal())


def disable_engine() -> None:
    """For the rest of this process (a worker of a problem that refuses autograd, before any learner code runs):
    the engine type's own `run_backward`, in the type's dictionary, replaced by a refusal. Every engine object, the
    one saved at import and any built anew (`torch._C._ImperativeEngine()`), reaches it; the original C method is
    released, so nothing in the process can put it back."""
    import ctypes
    import gc

    engine_type = type(Variable._execution_engine)
    slots = gc.get_referents(engine_type.__dict__)[0]  # the mapping behind the read-only proxy
    for name in ("run_backward", "queue_callback"):
        if name in slots:
            slots[name] = _refuse
    ctypes.pythonapi.PyType_Modified(ctypes.py_object(engine_type))  # no cached lookup keeps the old method


def _refuse(*args, **kwargs):
    raise BannedCall(refusal())


class NoAutograd:
    """While active, the autograd engine raises BannedCall naming the function that reached it."""

    def __enter__(self):
        self._engine = Variable._execution_engine
        Variable._execution_engine = _RefusingEngine()
        return self

    def __exit__(self, *exc):
        Variable._execution_engine = self._engine
        return False
