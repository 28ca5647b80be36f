"""Strings the grader can compute without running anything, and the hatches their text names."""
from __future__ import annotations

import ast
import re

from .capabilities import C
from .names import ATTRIBUTE

STRINGS = (
    ("clear_refs", C.CLEAR_REFS, None),
    ("/proc/", C.PROC_FILES, None),
    ("torch._C", C.PRIVATE_TORCH, "torch._C"),
    ("_python_dispatch", C.PRIVATE_TORCH, "torch.utils._python_dispatch"),
    *((name, cap, name) for name, cap in ATTRIBUTE.items() if len(name) > 8),
)
"""Text in a string literal (not a docstring) that names a hatch: getattr(x, s), attrgetter, open(path, "w")."""
NEEDLES = re.compile("|".join(re.escape(needle) for needle, _, _ in STRINGS))


def const_str(node) -> str | None:
    """The value of a string the grader can compute without running anything: a literal, "a" + "b", an f-string
    of literals, "".join of literals; else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
        v = node.value
        return v if isinstance(v, str) else v.decode("latin-1")
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        a, b = const_str(node.left), const_str(node.right)
        return a + b if a is not None and b is not None else None
    if isinstance(node, ast.JoinedStr):
        parts = [const_str(v.value if isinstance(v, ast.FormattedValue) and v.format_spec is None and v.conversion == -1
                           else v) for v in node.values]
        return "".join(parts) if all(p is not None for p in parts) else None
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join"
            and len(node.args) == 1 and not node.keywords and isinstance(node.args[0], (ast.List, ast.Tuple))):
        sep, parts = const_str(node.func.value), [const_str(e) for e in node.args[0].elts]
        return sep.join(parts) if sep is not None and all(p is not None for p in parts) else None
    return None

