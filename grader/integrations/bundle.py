"""A bundle's scope: the manifest it carries (submission/bundle.json: its id, problems and clock, which go back with
submission.zip) and the interviewer's record of it (kept on the machine that exported it, never in the bundle).

The record decides: its problems, its variant (which the bundle never names: with the public kit a name gives its
seed) and its start time, taken by the interviewer's clock. The manifest comes back from the candidate and is read as
hostile data; it only names the record (a random id). Where the record is not on the grading machine (or the id was
changed), the manifest's problems are never used alone: `attnkit grade` asks for --problems (fronts/scoped.py), and the
report says the bundle was not verified and that no clock is known.
"""
from __future__ import annotations

import json
import os
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..errors import BadInput
from ..problems import ORDER

MANIFEST = "bundle.json"  # in the bundle's submission/ folder
MAX_BYTES = 16 << 10
ID = re.compile(r"[0-9a-f]{32}")
TIME = "%Y-%m-%dT%H:%M:%SZ"


@dataclass(frozen=True)
class Scope:
    """What a submission was exported for. `verified`: read from the interviewer's record (else from the manifest the
    candidate sent back: its problems only, no variant, no clock)."""

    bundle: str
    problems: tuple[str, ...]
    variant: str | None = None
    started: datetime | None = None  # the interviewer's clock, at export or `interview start`
    minutes: int | None = None  # the time limit of a timed interview
    verified: bool = False
    record: Path | None = None


def records_dir() -> Path:
    """Where the interviewer's records live: $ATTNKIT_HOME/interviews, else $XDG_DATA_HOME/attnkit/interviews, else
    ~/.local/share/attnkit/interviews."""
    home = os.environ.get("ATTNKIT_HOME")
    if home:
        return Path(home).expanduser() / "interviews"
    data = os.environ.get("XDG_DATA_HOME") or str(Path("~/.local/share").expanduser())
    return Path(data) / "attnkit" / "interviews"


def new(problems: list[str], variant: str | None, minutes: int | None) -> tuple[Scope, dict]:
    """A fresh scope (started now, by this machine's clock) and the manifest that the bundle carries."""
    started = datetime.now(timezone.utc).replace(microsecond=0)
    scope = Scope(secrets.token_hex(16), tuple(problems), variant, started, minutes, True)
    manifest = {"kit": "attnkit", "bundle": scope.bundle, "problems": list(problems),
                "started": started.strftime(TIME), "minutes": minutes}
    return scope, manifest


def keep(scope: Scope) -> Path:
    """Write the interviewer's record (0600, in a 0700 folder); its path."""
    folder = records_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = folder / f"{scope.bundle}.json"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump({"bundle": scope.bundle, "problems": list(scope.problems), "variant": scope.variant,
                       "started": scope.started.strftime(TIME), "minutes": scope.minutes}, f, indent=1)
    except OSError as exc:
        raise BadInput(f"cannot keep the interviewer's record in {folder}: {exc.strerror} (set ATTNKIT_HOME to "
                       "a folder you can write)") from None
    return path


def scope_of(impl: Path) -> Scope | None:
    """The scope of the submission in `impl` (None: it carries no manifest, or one not in the form the kit writes)."""
    manifest = _read_json(Path(impl) / MANIFEST)
    if not isinstance(manifest, dict) or not isinstance(manifest.get("bundle"), str) \
            or not ID.fullmatch(manifest["bundle"]):
        return None
    bundle = manifest["bundle"]
    path = records_dir() / f"{bundle}.json"
    record = _read_json(path)
    if isinstance(record, dict) and record.get("bundle") == bundle:
        problems = _problems(record.get("problems"))
        variant = record.get("variant")
        if problems and (variant is None or isinstance(variant, str)):
            return Scope(bundle, problems, variant, _time(record.get("started")), _minutes(record.get("minutes")),
                         True, path)
    problems = _problems(manifest.get("problems"))
    return Scope(bundle, problems, record=path) if problems else None


def _read_json(path: Path):
    """A small JSON file that is not a link, or None."""
    try:
        if path.is_symlink() or not path.is_file():
            return None
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
        return None if len(data) > MAX_BYTES else json.loads(data)
    except (OSError, ValueError):
        return None


def _problems(value) -> tuple[str, ...]:
    """Known problem ids, in track order; () where `value` is not a list of them."""
    if not isinstance(value, list) or not value or not all(isinstance(p, str) and p in ORDER for p in value):
        return ()
    return tuple(p for p in ORDER if p in value)


def _time(value) -> datetime | None:
    try:
        return datetime.strptime(value, TIME).replace(tzinfo=timezone.utc)
    except (TypeError, ValueError):
        return None


def _minutes(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= 24 * 60 else None


def describe(scope: Scope, where: str) -> str:
    """The line `attnkit grade` prints about the scope it applies."""
    names = ", ".join(scope.problems)
    if scope.verified:
        return (f"{where} is bundle {scope.bundle[:8]}: grading its {len(scope.problems)} problem(s) ({names})"
                + (" with its variant" if scope.variant else "") + f", as recorded at export ({scope.record})")
    return (f"{where} names bundle {scope.bundle[:8]}, whose record is not on this machine ({scope.record}): grading "
            f"the {len(scope.problems)} problem(s) its manifest names ({names}), as the candidate sent it back "
            "(unverified; no variant, no clock: give --problems and --variant to override)")
