"""Writing the kit's outputs atomically, through a fresh, exclusively created temporary file.

A reader never sees half a report, and nothing planted beside the target (a link named like
our temporary file, say) can redirect the write: mkstemp picks an unused random name.
"""
from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path


def atomic_write(path, text: str) -> None:
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def remove_tree(path) -> None:
    """Remove a directory a worker used, whatever it left there (files it made read-only or unreadable)."""
    def retry(func, target, _exc):
        try:
            os.chmod(os.path.dirname(target), stat.S_IRWXU)
            os.chmod(target, stat.S_IRWXU)
            func(target)
        except OSError:
            pass

    shutil.rmtree(path, onerror=retry) if os.path.lexists(path) else None
