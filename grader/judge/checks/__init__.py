"""The check units: each module here (or in an extension's `checks` package, grader/extensions.py) is one check, or
a few that share their calls, and registers itself with judge/registry.py when imported. A unit declares in one
place its groups of calls, the worker hooks its calls need, extra expected values, its typed options, its judge and
the symptoms it may name; a new check is a new module and touches no other."""
from __future__ import annotations

import importlib
import pkgutil

from ...extensions import modules
from ..registry import CHECKS, Check, register, validate_checks

for _name in [f"{__name__}.{m.name}" for m in pkgutil.iter_modules(__path__)] + modules("checks"):
    importlib.import_module(_name)

__all__ = ["CHECKS", "Check", "register", "validate_checks"]
