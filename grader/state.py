"""The learner's state file: hint levels and solutions shown by force. Written by attnkit only."""
from __future__ import annotations

import json
import os
import sys
from datetime import datetime
from pathlib import Path

from . import ROOT

NOTE = ("Written by attnkit to remember your hint levels and the solutions you revealed. "
        "Do not edit it: use `attnkit hint`, `attnkit solution` and `attnkit reset`.")


def state_path() -> Path:
    return Path(os.environ.get("ATTNKIT_STATE", ROOT / ".attnkit" / "state.json"))


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
    except FileNotFoundError:
        why = "was missing"
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
    path = state_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"_": NOTE, **{k: v for k, v in data.items() if k != "_"}}, indent=2) + "\n")
    tmp.replace(path)


def now() -> str:
    return datetime.now().strftime("%Y-%m-%dT%H:%M:%S")
