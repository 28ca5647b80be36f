"""Say what was called, in the learner's terms: names, dtypes, shapes with named dims, lengths."""
from __future__ import annotations

import torch

from .spec import Problem


def call_text(problem: Problem, case) -> str:
    call = case.call
    forward = problem.methods[-1]
    names = [n for n, _ in forward.args]
    parts = [f"{n}={_value(a)}" for n, a in zip(names, call.get("args", []))]
    where = "" if call.get("device", "cpu") == "cpu" else f" on {call['device']}"
    if not problem.is_module:
        return f"{problem.symbol}({', '.join(parts)}){where}"
    mode = "train()" if call.get("train") else "eval()"
    return f"{ctor_text(problem, call['ctor'])}.{mode}({', '.join(parts)}){where}"


def ctor_text(problem: Problem, ctor: dict) -> str:
    args = [repr(a) for a in ctor["args"]] + [f"{k}={v!r}" for k, v in ctor["kwargs"].items()]
    return f"{problem.symbol}({', '.join(args)})"


def _value(a) -> str:
    if a is None:
        return "None"
    if not isinstance(a, torch.Tensor):
        return repr(a)
    if a.is_floating_point():
        return f"<{str(a.dtype).replace('torch.', '')} {tuple(a.shape)}>"
    return f"{a.tolist()}" if a.numel() <= 12 else f"<{a.dtype} {tuple(a.shape)}>"


def error_text(result: dict) -> str:
    return result["error"]["text"]
