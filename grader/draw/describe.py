"""Say what was called, in the learner's terms: names, dtypes, shapes with named dims, lengths."""
from __future__ import annotations

import torch

from ..model.spec import Problem
from . import conventions


def called(call: dict) -> tuple[str | None, str | None]:
    """(the function a call runs where it is not the problem's own: None, or its name; how it runs it, in words)."""
    return call.get("symbol"), call.get("how")


def arg_names(problem: Problem, call: dict) -> list[str]:
    """The names of the arguments of the function the call runs (a side effect is reported by argument position)."""
    return [a.name for a in problem.method(called(call)[0]).args]


def arg_name(problem: Problem, call: dict, at: int) -> str:
    """The name of argument `at` of the function the call runs (its position where the spec names no such one)."""
    names = arg_names(problem, call)
    return names[at] if 0 <= at < len(names) else f"argument {at}"


def call_text(problem: Problem, case) -> str:
    call = case.call
    symbol, how = called(call)
    forward = problem.method(symbol)
    parts = [f"{arg.name}={_value(a, arg.doc)}" for arg, a in zip(forward.args, call.get("args", []))]
    where = ("" if call.get("device", "cpu") == "cpu" else f" on {call['device']}") + conventions.words(call)
    if how:
        return f"{symbol or problem.symbol} {how}, over ({', '.join(parts)}){where}"
    if not problem.is_module:
        return f"{symbol or problem.symbol}({', '.join(parts)}){where}"
    mode = "train()" if call.get("train") else "eval()"
    return f"{ctor_text(problem, call['ctor'])}.{mode}({', '.join(parts)}){where}"


def ctor_text(problem: Problem, ctor: dict) -> str:
    args = [repr(a) for a in ctor["args"]] + [f"{k}={v!r}" for k, v in ctor["kwargs"].items()]
    return f"{problem.symbol}({', '.join(args)})"


def _value(a, dims: str = "") -> str:
    if a is None:
        return "None"
    if isinstance(a, (tuple, list)):  # a cache: "(k, v), each (B, Hkv, P, d)" names each part's dims
        each = dims.split("each ", 1)[1] if "each " in dims else ""
        return "(" + ", ".join(_value(t, each) for t in a) + ")"
    if not isinstance(a, torch.Tensor):
        return repr(a)
    if a.is_floating_point():
        return f"<{str(a.dtype).replace('torch.', '')} {_shape(a.shape, dims)}>"
    return f"{a.tolist()}" if a.numel() <= 12 else f"<{a.dtype} {tuple(a.shape)}>"


def _shape(shape, dims: str) -> str:
    """(2, 3, 5) as (B=2, Tq=3, dq=5) when the documented dims, e.g. "(B, Tq, dq)", name every axis."""
    names = dims.split(")")[0].lstrip("(").replace(" ", "").split(",") if dims.startswith("(") else []
    if names[:1] == ["..."] and len(shape) >= len(names) - 1:  # leading dims: shown as plain sizes
        names = ["1"] * (len(shape) - len(names) + 1) + names[1:]
    if len(names) != len(shape):
        return str(tuple(shape))
    return "(" + ", ".join(str(s) if n.isdigit() else f"{n}={s}" for n, s in zip(names, shape)) + ")"


def error_text(result) -> str:
    """What a call raised, as shown to the learner (a run/answer.Answer's error)."""
    return result.error.text
