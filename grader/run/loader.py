"""Load an implementation directory as a package, so siblings import each other relatively."""
from __future__ import annotations

import errno
import importlib
import sys
import traceback
import types
from pathlib import Path


class NotStarted(Exception):
    """The problem cannot be graded at all: file or symbol missing, import failed."""


def load_package(directory: Path, name: str) -> types.ModuleType:
    """Register `directory` as package `name` (its __init__.py, if any, is not run)."""
    for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
        del sys.modules[key]
    package = types.ModuleType(name)
    package.__path__ = [str(directory)]
    package.__file__ = None
    sys.modules[name] = package
    return package


def load_symbol(directory: Path, module: str, symbol: str, package: str):
    """Import `<directory>/<module>.py` and return its `symbol`; raises NotStarted with the reason."""
    directory = Path(directory)
    path = directory / f"{module}.py"
    if not path.is_file():
        raise NotStarted(f"{path.name} not found in the submission")
    if package not in sys.modules:
        load_package(directory, package)
    dont_write = sys.dont_write_bytecode
    sys.dont_write_bytecode = True  # never write __pycache__ into the graded directory
    try:
        mod = importlib.import_module(f"{package}.{module}")
    except BaseException as exc:  # noqa: BLE001 - a learner's module may raise anything, even SystemExit
        raise NotStarted(f"importing {path.name} failed: {describe_exception(exc, directory)}") from None
    finally:
        sys.dont_write_bytecode = dont_write
    if not hasattr(mod, symbol):
        raise NotStarted(f"{path.name} defines no `{symbol}`")
    return getattr(mod, symbol)


def describe_exception(exc: BaseException, directory: Path | None = None) -> str:
    """`Type: message (file.py:line)`, pointing at the deepest frame inside `directory`."""
    if isinstance(exc, OSError) and exc.errno == errno.EFBIG:  # RLIMIT_FSIZE on the worker's output
        return "it printed more than the output limit allows (--output-limit)"
    text = f"{type(exc).__name__}: {exc}".rstrip(": ")
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{text} ({Path(exc.filename).name}:{exc.lineno})"
    if directory is not None:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if _inside(f.filename, directory)]
        if frames:
            f = frames[-1]
            return f"{text} ({Path(f.filename).name}:{f.lineno}, in {f.name}: {(f.line or '').strip()})"
    return text


def _inside(filename: str, directory: Path) -> bool:
    try:
        return Path(filename).resolve().is_relative_to(Path(directory).resolve())
    except (OSError, ValueError):
        return False
