"""Check no_torch: a NumPy problem imports no torch, directly or through another module."""
from __future__ import annotations

from ..context import Failed
from ..registry import Check, register
from ...draw.groups import group_imports


def check_no_torch(ctx):
    for case in ctx.of("imports"):
        modules = ctx.result(case)["modules"]
        if modules:
            raise Failed(f"importing {ctx.problem.id}.py in a fresh Python imports {', '.join(modules[:3])}: this "
                         "problem is NumPy only; remove every torch import (also those of modules it imports)",
                         symptom="imports_torch")


register(Check("no_torch", "imports no torch (checked in a fresh Python)", {"imports": group_imports}, check_no_torch,
               needs=lambda p: None if p.arrays == "numpy" else "a NumPy problem (arrays='numpy')"))
