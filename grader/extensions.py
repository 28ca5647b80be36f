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


def worker_files() -> dict[str, list[Path]]:
    """{package: its files a worker needs}: each extension's __init__.py and hook modules (hooks/*.py), which the
    OS sandbox binds beside the kit's worker modules (run/jail.py)."""
    out = {}
    for package in packages():
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            continue
        root = Path(list(spec.submodule_search_locations)[0])
        hooks = sorted((root / "hooks").glob("*.py"))
        if hooks:
            out[package] = [root / "__init__.py", *hooks]
    return out


def solution_dirs() -> list[Path]:
    """Every extension's `solutions` folder (beside its package's __init__.py)."""
    out = []
    for package in packages():
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.submodule_search_locations:
            out += [Path(p) / "solutions" for p in spec.submodule_search_locations if (Path(p) / "solutions").is_dir()]
    return out
