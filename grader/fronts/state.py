"""The learner's state file: hint levels and solutions shown by force. Written by attnkit only."""
from __future__ import annotations

import json
import os
import sys
from datetime import datetime
from pathlib import Path

from .. import ROOT
from ..files import atomic_write
from ..errors import BadInput

NOTE = ("Written by attnkit to remember your hint levels and the solutions you revealed. "
        "Do not edit it: use `attnkit hint`, `attnkit solution` and `attnkit reset`.")


DEFAULT = ROOT / ".attnkit" / "state.json"


def state_path() -> Path:
    """The state file: $ATTNKIT_STATE, else .attnkit/state.json in the kit. A path that names a directory, or
    whose folder does not exist (only the default folder is created), is refused with one line."""
    given = os.environ.get("ATTNKIT_STATE")
    if not given:
        return DEFAULT
    path = Path(given).expanduser()
    if path.is_dir():
        raise BadInput(f"ATTNKIT_STATE={given} is a directory; point it at a file (it is created if missing)")
    if not path.parent.is_dir():
        raise BadInput(f"ATTNKIT_STATE={given}: the folder {path.parent} does not exist; create it first")
    return path


def backup_dir() -> Path:
    return state_path().parent / "backups"


def load() -> dict:
    """The state; a missing or unreadable file is recreated, with a warning on stderr."""
    path = state_path()
    fresh = {"_": NOTE, "version": 1, "hints": {}, "forced_solutions": {}}
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or not isinstance(data.get("hints"), dict) \
                or not isinstance(data.get("forced_solutions"), dict):
            raise ValueError("unexpected content")
        return data
    except FileNotFoundError:  # the first command in a fresh clone: nothing to warn about
        save(fresh)
        return fresh
    except (OSError, ValueError) as exc:
        why = f"was unreadable ({exc.__class__.__name__}), so it starts over"
    sys.stderr.write(f"attnkit: warning: state file {path} {why}; created a new one\n")
    save(fresh)
    return fresh


def peek() -> dict:
    """The state as it is, without creating or warning (for displays)."""
    try:
        data = json.loads(state_path().read_text())
        return data if isinstance(data, dict) and isinstance(data.get("hints"), dict) else {"hints": {}}
    except (OSError, ValueError):
        return {"hints": {}}


def save(data: dict) -> None:
    """Atomically, through a fresh temporary file of its own (two commands saving at once never share one)."""
    path = state_path()
    if path == DEFAULT:
        path.parent.mkdir(parents=True, exist_ok=True)
    try:
        atomic_write(path, json.dumps({"_": NOTE, **{k: v for k, v in data.items() if k != "_"}}, indent=2) + "\n")
    except OSError as exc:
        raise BadInput(f"cannot write the state file {path} ({exc.strerror or exc})") from None


def now() -> str:
    return datetime.now().strftime("%Y-%m-%dT%H:%M:%S")
