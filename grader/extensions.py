"""Extensions: packages outside the kit that add problems, checks, mask rules and worker hooks by adding files.

`ATTNKIT_EXTENSIONS` names importable packages (comma-separated). Each may hold the sub-packages `problems`
(specs), `checks` (check units), `masks` (mask rules) and `hooks` (worker-side hooks), and a `solutions` folder
with the references of its problems. The kit's own registries load them beside their built-ins.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import pkgutil
from pathlib import Path

VARIABLE = "ATTNKIT_EXTENSIONS"


def packages() -> list[str]:
    return [p.strip() for p in os.environ.get(VARIABLE, "").split(",") if p.strip()]


def modules(kind: str) -> list[str]:
    """Module names of every extension's `kind` sub-package (problems, checks, masks, hooks), in order."""
    found = []
    for package in packages():
        name = f"{package}.{kind}"
        if importlib.util.find_spec(package) is None or importlib.util.find_spec(name) is None:
            continue
        sub = importlib.import_module(name)
        found += [f"{name}.{m.name}" for m in pkgutil.iter_modules(sub.__path__) if not m.name.startswith("_")]
    return found


def solution_dirs() -> list[Path]:
    """Every extension's `solutions` folder (beside its package's __init__.py)."""
    out = []
    for package in packages():
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.submodule_search_locations:
            out += [Path(p) / "solutions" for p in spec.submodule_search_locations if (Path(p) / "solutions").is_dir()]
    return out
