"""The problem registry: one module per problem, in track order."""
from __future__ import annotations

import importlib
import pkgutil

from ..errors import BadInput, SpecError
from ..model.i18n import current, localize
from ..model.spec import Problem
from ..model.tracks import TRACKS
from ..model.validate import validate

_SPECS: dict = {}  # problem id -> its spec, or the error its module raised on import (named when it is asked for)
for _m in pkgutil.iter_modules(__path__):
    if not _m.name.startswith("_"):
        try:
            _SPECS[_m.name] = importlib.import_module(f"{__name__}.{_m.name}").PROBLEM
        except Exception as exc:  # noqa: BLE001 - a broken spec is reported as a SpecError by get()
            _SPECS[_m.name] = exc


def _track_order(specs: dict) -> tuple[str, ...]:
    """Problem ids in track order; within a track, each after the problems it names in `requires` and `after`
    (then by id). A spec whose track is unknown, or that failed to load, comes last (get() names its error)."""
    tracks = [name for name, _ in TRACKS]
    rank = {pid: tracks.index(p.track) if isinstance(p, Problem) and p.track in tracks else len(tracks)
            for pid, p in specs.items()}
    placed: list[str] = []
    waiting = sorted(specs, key=lambda pid: (rank[pid], pid))
    while waiting:
        ready = next((pid for pid in waiting if not isinstance(specs[pid], Problem) or all(
            d in placed or d not in specs for d in specs[pid].requires + specs[pid].after)), waiting[0])
        placed.append(ready)
        waiting.remove(ready)
    return tuple(placed)


ORDER = _track_order(_SPECS)
"""Every problem id (one spec module each in this package), in track order."""


def all_problems() -> list[Problem]:
    return [get(pid) for pid in ORDER]


_LOCALIZED: dict = {}
_VALID: set = set()


def get(pid: str) -> Problem:
    """The spec of `pid`, its texts in the chosen language (grader/i18n.py)."""
    if pid not in ORDER:
        raise KeyError(f"unknown problem {pid!r}; choose from: {', '.join(ORDER)}")
    problem = _SPECS[pid]
    if not isinstance(problem, Problem):
        raise SpecError(f"spec grader/problems/{pid}.py does not load: {type(problem).__name__}: {problem}")
    if pid not in _VALID:
        validate(problem, pid, ORDER)  # once per spec, at its first load
        _VALID.add(pid)
    lang = current()
    if lang == "en":
        return problem
    if (pid, lang) not in _LOCALIZED:
        _LOCALIZED[(pid, lang)] = localize(problem, lang)
    return _LOCALIZED[(pid, lang)]


def resolve(name: str) -> str:
    """A problem id from its name or a unique prefix (`additive` -> additive_attention)."""
    if name in ORDER:
        return name
    matches = [pid for pid in ORDER if pid.startswith(name)]
    if len(matches) == 1:
        return matches[0]
    raise BadInput(f"unknown problem {name!r}; choose from: {', '.join(ORDER)}")
