"""Render a problem's stub (exercises/<id>.py) from its spec, and tell a stub from a learner's work."""
from __future__ import annotations

import ast

from .spec import DIMS, Method, Problem

HEADER = '"""{title}: a stub for you to fill in.\n\nGenerated from grader/problems/{id}.py; grade it with `pytest -k {id}`.\n"""\n'


def docstring(method: Method, indent: str) -> str:
    lines = [*method.statement.splitlines()]
    if method.args:
        lines += ["", "Args:"] + [f"    {a.name}: {a.doc}" for a in method.args]
    if method.returns:
        lines += ["", "Returns:"] + [f"    {o.name}: {o.doc}" for o in method.returns]
    dims = [d for d in DIMS if any(_mentions(a.doc, d) for a in method.args + method.returns)]
    if dims:
        lines += ["", "Dims:"] + [f"    {d}: {DIMS[d]}" for d in dims]
    body = "\n".join((indent + line).rstrip() for line in lines)
    return f'{indent}"""{body.lstrip()}\n{indent}"""\n'


def _mentions(text: str, dim: str) -> bool:
    return dim in text.replace("(", " ").replace(")", " ").replace(",", " ").replace("*", " ").split()


def _method(method: Method, indent: str, name: str) -> str:
    return (
        f"{indent}{method.signature}\n{docstring(method, indent + '    ')}"
        f'{indent}    raise NotImplementedError("{name}")\n'
    )


def render(problem: Problem, header: str = HEADER) -> str:
    """The stub; `header`: its module docstring, formatted with the problem's title and id (a candidate bundle's
    tells the bundle's own commands)."""
    out = header.format(title=problem.title, id=problem.id) + "\n" + problem.imports
    if not problem.is_module:  # the graded function last, each function it builds on before it
        return out + "".join("\n\n" + _method(m, "", f"{problem.id}: not started" if m is problem.methods[-1]
                                             else f"{problem.id}.{m.name}: not started") for m in problem.methods)
    out += f"\n\nclass {problem.symbol}(nn.Module):\n    \"\"\"{problem.class_doc}\"\"\"\n"
    for method in problem.methods:
        out += "\n" + _method(method, "    ", f"{problem.symbol}.{method.name}: not started")
    return out


def is_untouched_stub(source: str) -> bool:
    """True when every function body is only a docstring and `raise NotImplementedError(...)`."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    funcs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if not funcs:
        return False
    for f in funcs:
        body = f.body[1:] if ast.get_docstring(f) is not None else f.body
        if len(body) != 1 or not isinstance(body[0], ast.Raise):
            return False
        exc = body[0].exc
        name = exc.func if isinstance(exc, ast.Call) else exc
        if not (isinstance(name, ast.Name) and name.id == "NotImplementedError"):
            return False
    return True

