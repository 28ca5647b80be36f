"""A problem's file that is still the kit's stub, told from its text alone: graded as not started without a worker,
drawn calls or expected values. On a learner's first runs every problem but one is a stub; running each of them
(a worker, a few hundred calls that all raise NotImplementedError, the reference on the same inputs) cost 20 of the
25 seconds a first `attnkit grade` took.

Only the kit's own stub qualifies, up to docstrings, comments and layout (any language, any front's header): the
same statements, so the same behaviour. A file with one statement more (`LuongAttention = Mine` after the stub's
class, a module-level import) is run and judged as any other.
"""
from __future__ import annotations

import ast
from pathlib import Path

from .scan import read_source

NOT_STARTED = "{id}.py raises NotImplementedError: still a stub, fill it in"
"""The reason a stub is not started, in the words a worker's run of it gives (grading._not_started)."""


def untouched(impl: Path, problem) -> bool:
    """Whether `impl/<id>.py` is the problem's stub: its statements those of `model.stubs.render(problem)`."""
    source, _ = read_source(impl / f"{problem.id}.py", impl)
    return source is not None and _skeleton(source) == _stub_skeleton(problem)


_STUBS: dict[str, str | None] = {}


def _stub_skeleton(problem) -> str | None:
    """The stub's skeleton, the same in every language (only docstrings are translated): computed once per id."""
    from ..model.stubs import render

    if problem.id not in _STUBS:
        _STUBS[problem.id] = _skeleton(render(problem))
    return _STUBS[problem.id]


def _skeleton(source: bytes | str) -> str | None:
    """The module's statements without its docstrings (module, classes, functions), or None where it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, MemoryError, RecursionError, OverflowError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    try:
        return ast.dump(tree, include_attributes=False)
    except RecursionError:
        return None
