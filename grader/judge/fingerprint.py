"""The kit's fingerprint: everything a problem's expected values depend on besides the problem and the seed.

The code that draws the inputs and computes the values (every file of the kit's package, the reference solutions,
each extension's package and solutions), and the environment that runs it (Python, torch, NumPy, the machine's
architecture). Two runs with one fingerprint draw the same inputs and compute the same values (judge/stored.py).
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import platform
import sys
from pathlib import Path

from .. import REFERENCE_DIR
from ..extensions import packages, solution_dirs

SUFFIXES = (".py", ".json")


@functools.lru_cache(maxsize=1)
def fingerprint() -> str:
    """A hex digest of the kit's code and environment (computed once per process: about 200 files, milliseconds)."""
    import numpy
    import torch

    digest = hashlib.sha256()
    for part in (sys.version, torch.__version__, numpy.__version__, platform.machine(), platform.system()):
        digest.update(part.encode() + b"\0")
    for folder in _folders():
        for path in sorted(p for p in folder.rglob("*") if p.suffix in SUFFIXES and "__pycache__" not in p.parts):
            digest.update(path.relative_to(folder).as_posix().encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:40]


def _folders() -> list[Path]:
    """The kit's package, its references, and each extension's package folders and solutions."""
    found = [Path(__file__).resolve().parent.parent, REFERENCE_DIR]
    for package in packages():
        spec = importlib.util.find_spec(package)
        found += [Path(p) for p in (spec.submodule_search_locations or [])] if spec is not None else []
    return list(dict.fromkeys([*found, *solution_dirs()]))
