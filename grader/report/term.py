"""Colour and glyphs on a terminal, plain text elsewhere (pipes, files, CI logs)."""
from __future__ import annotations

import os
import sys

COLOURS = {"passed": "32", "failed": "31", "not_started": "33", "skipped": "90", "error": "35", "bold": "1"}


def fancy(stream=None) -> bool:
    """True on a terminal, unless NO_COLOR is set; FORCE_COLOR forces it."""
    stream = stream or sys.stdout
    if os.environ.get("FORCE_COLOR"):
        return True
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return hasattr(stream, "isatty") and stream.isatty()


def paint(text: str, status: str, on: bool) -> str:
    return f"\033[{COLOURS[status]}m{text}\033[0m" if on and status in COLOURS else text


def bar(done: float, total: float, width: int = 30, on: bool = False) -> str:
    """[#########.............] 14/65 points (plain) or a block bar on a terminal."""
    filled = int(round(width * done / total)) if total else 0
    full, empty = ("█", "░") if on else ("#", ".")
    return f"[{full * filled}{empty * (width - filled)}] {done:g}/{total:g} points"
