"""The submissions of a folder that grade-batch and similarity read: each directory and .zip in it (hidden names left
out); anything else is skipped with one line. Light (no torch): the commands check the folder before anything starts."""
from __future__ import annotations

import sys
from pathlib import Path

from ..errors import BadInput
from ..run.inbox import one_line


def submissions(folder: Path, say: bool = True) -> list[Path]:
    """The folder's submissions, in name order; BadInput where it is no directory or holds none. `say`: print a line
    for each entry skipped (False where the folder is only checked, so that each is said once; said anyway where
    nothing else is found, as the command then stops)."""
    if not folder.is_dir():
        raise BadInput(f"{folder}: not a directory of submissions")
    entries = [p for p in sorted(folder.iterdir()) if not p.name.startswith(".")]
    found = [p for p in entries if p.is_dir() or p.suffix.lower() == ".zip"]
    others = [p for p in entries if p not in found]
    for p in others if say or not found else ():
        print(f"skipped {one_line(repr(p.name), 120)}: not a directory or a .zip", file=sys.stderr)
    if not found:
        raise BadInput(f"{folder}: no submissions in it (directories or .zip files)")
    return found
