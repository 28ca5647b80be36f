"""The third of attnkit's nbgrader defences (integrity.py says all three): from the step's start on, every module
nbgrader's process imports is compiled from its source, never from a bytecode cache, and only once the bytes read are
shown, on the very file descriptor they were read from, to be the file the Snapshot recorded."""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import os
import sys

from .integrity import Snapshot


class _VerifiedSource(importlib.machinery.SourceFileLoader):
    """A module compiled from its source only, once the bytes read are shown to be those of the recorded file."""

    snapshot: Snapshot

    def get_data(self, path):
        if path != self.path and path.endswith(tuple(importlib.machinery.BYTECODE_SUFFIXES)):
            raise FileNotFoundError(path)  # never a bytecode cache, wherever it lies
        return _read(self.snapshot, self.name, path)

    def set_data(self, path, data, *, _mode=0o666):
        return None  # and none is written


class _VerifiedBytecode(importlib.machinery.SourcelessFileLoader):
    """A module shipped as bytecode only (a .pyc on sys.path), read the same verified way."""

    snapshot: Snapshot

    def get_data(self, path):
        return _read(self.snapshot, self.name, path)


def _read(snapshot: Snapshot, name: str, path: str) -> bytes:
    with open(path, "rb") as f:
        data = f.read()
        st = os.fstat(f.fileno())  # the file these bytes came from, whatever the path names now
    why = snapshot.check(path, st)
    if why:
        raise ImportError(f"attnkit refuses to import {name}: {why} (a student's notebook may have written it; "
                          f"see docs/nbgrader.md)", name=name, path=path)
    return data


class Guard(importlib.abc.MetaPathFinder):
    """First on sys.meta_path: asks the other finders, then loads what they found only through a verified loader."""

    def __init__(self, snapshot: Snapshot):
        self.snapshot = snapshot
        self.source = type("VerifiedSource", (_VerifiedSource,), {"snapshot": snapshot})
        self.bytecode = type("VerifiedBytecode", (_VerifiedBytecode,), {"snapshot": snapshot})

    def find_spec(self, name, path=None, target=None):
        spec = None
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if isinstance(finder, Guard) or find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                break
        if spec is None:
            return None
        loader = spec.loader
        if isinstance(loader, importlib.machinery.SourceFileLoader):
            spec.loader = self.source(loader.name, loader.path)
        elif isinstance(loader, importlib.machinery.SourcelessFileLoader):
            spec.loader = self.bytecode(loader.name, loader.path)
        elif isinstance(loader, importlib.machinery.ExtensionFileLoader):
            try:
                why = self.snapshot.check(loader.path, os.stat(loader.path))
            except OSError as exc:
                why = str(exc)
            if why:
                raise ImportError(f"attnkit refuses to load {name}: {why} (see docs/nbgrader.md)", name=name,
                                  path=loader.path)
        return spec

    def invalidate_caches(self):
        return None


def guard(snapshot: Snapshot) -> None:
    """From now on, every import of this process goes through a Guard of `snapshot` (once)."""
    if not any(isinstance(f, Guard) for f in sys.meta_path):
        sys.meta_path.insert(0, Guard(snapshot))
    sys.dont_write_bytecode = True
