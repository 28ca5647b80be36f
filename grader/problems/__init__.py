"""The problem registry: one module per problem, in track order."""
from __future__ import annotations

import functools
import importlib
import pkgutil
from pathlib import Path

from .. import masks  # noqa: F401 - the mask rules' roles are known before any spec is validated
from ..errors import BadInput, SpecError
from ..extensions import modules
from ..model.i18n import LANGS, ambient, check, localize, read_catalogue
from ..model.spec import Problem
from ..model.tracks import TRACKS
from ..model.validate import validate, validate_translation

CATALOGUES = Path(__file__).parent
"""The folder of the translations' catalogues: <lang>/<id>.json beside the specs (grader/model/i18n.py)."""


def _modules() -> list[str]:
    """The spec modules' names: the kit's, then those of extensions (grader/extensions.py); none imported."""
    return [f"{__name__}.{m.name}" for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")] + \
        modules("problems")


def ids() -> tuple[str, ...]:
    """Every problem id, sorted, from the spec modules' names alone (no spec imported, so no torch): for the checks
    that only need the ids, such as a command line's paths."""
    return tuple(sorted(name.rsplit(".", 1)[1] for name in _modules()))


@functools.lru_cache(maxsize=1)
def _specs() -> dict:
    """Problem id -> its spec, or the error its module raised on import (named when it is asked for). Loaded on
    first use, not when this package is imported: the pytest plugin imports the kit in every project, and specs
    import torch."""
    specs = {}
    for name in _modules():
        try:
            specs[name.rsplit(".", 1)[1]] = importlib.import_module(name).PROBLEM
        except Exception as exc:  # noqa: BLE001 - a broken spec is reported as a SpecError by get()
            specs[name.rsplit(".", 1)[1]] = exc
    return specs


@functools.lru_cache(maxsize=None)
def _home(pid: str) -> Path | None:
    """The folder of an extension's spec, where its translations are (None: a spec of the kit's, CATALOGUES)."""
    for name in modules("problems"):
        if name.rsplit(".", 1)[1] == pid:
            return Path(importlib.import_module(name).__file__).parent
    return None


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


def __getattr__(name: str):
    """ORDER: every problem id (one spec module each in this package), in track order, computed on first use."""
    if name == "ORDER":
        return _order()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.lru_cache(maxsize=1)
def _order() -> tuple[str, ...]:
    return _track_order(_specs())


def all_problems(lang: str | None = None) -> list[Problem]:
    return [get(pid, lang) for pid in _order()]


def unavailable(problem: Problem) -> str | None:
    """Why the problem cannot be graded here, in one line (a package its grading needs is not installed), or None."""
    import importlib.util

    missing = []
    for module, extra in problem.needs:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # a module set to None in sys.modules, a broken parent package
            found = False
        if not found:
            missing.append((module, extra))
    if not missing:
        return None
    names = ", ".join(m for m, _ in missing)
    extras = ",".join(sorted({e for _, e in missing}))
    return f"not available: needs {names}, not installed (pip install -e \".[{extras}]\" in the kit's folder)"


SKIP_STAGES = "ATTNKIT_SKIP_STAGES"
"""Stages (tracks) a full grading leaves out, comma-separated (`ATTNKIT_SKIP_STAGES=kernels pytest`): their problems
are graded only when named (`--problems`). The kit's own tests set it for the kernels stage, which its own tests grade."""


def left_out(problem: Problem) -> str | None:
    """Why a full grading leaves the problem out (its stage named in $ATTNKIT_SKIP_STAGES), or None."""
    import os

    stages = {s.strip() for s in os.environ.get(SKIP_STAGES, "").split(",") if s.strip()}
    return f"left out: {SKIP_STAGES} names its stage ({problem.track})" if problem.track in stages else None


def available(lang: str | None = None) -> list[Problem]:
    """The problems a full grading grades here: all_problems without those `unavailable` or `left_out`."""
    return [p for p in all_problems(lang) if unavailable(p) is None and left_out(p) is None]


def get(pid: str, lang: str | None = None) -> Problem:
    """The spec of `pid`, its texts in `lang` ("en": the spec itself). The spec and every language's catalogue
    entry are validated at its first load. None: the ambient language (grader/model/i18n.py `ambient`), for
    the callers that pass none (grading.py and the integrations that take no language yet)."""
    if pid not in _order():
        raise KeyError(f"unknown problem {pid!r}; choose from: {', '.join(_order())}")
    return _localized(pid, check(lang) if lang else ambient(), _home(pid) or CATALOGUES)


@functools.lru_cache(maxsize=None)
def _localized(pid: str, lang: str, folder: Path) -> Problem:
    problem = _validated(pid, folder)
    return localize(problem, lang, _translation(pid, lang, folder)) if lang != "en" else problem


@functools.lru_cache(maxsize=None)
def _validated(pid: str, folder: Path) -> Problem:
    """The spec, once it and its translations in every language passed validation (a failure is not cached:
    it is raised again on each call)."""
    problem = _specs()[pid]
    if not isinstance(problem, Problem):
        raise SpecError(f"spec grader/problems/{pid}.py does not load: {type(problem).__name__}: {problem}")
    validate(problem, pid, _order())
    for lang in LANGS:
        if lang != "en":
            _translation(pid, lang, folder)
    return problem


@functools.lru_cache(maxsize=None)
def _translation(pid: str, lang: str, folder: Path) -> dict:
    """The catalogue entry of `pid` in `lang`, checked against its spec."""
    shown = "grader/problems" if folder == Path(__file__).parent else str(folder)
    entry = read_catalogue(folder, pid, lang, shown)
    validate_translation(_specs()[pid], entry, f"translations {shown}/{lang}/{pid}.json")
    return entry


def resolve(name: str) -> str:
    """A problem id from its name or a unique prefix (`additive` -> additive_attention)."""
    if name in _order():
        return name
    matches = [pid for pid in _order() if pid.startswith(name)]
    if len(matches) == 1:
        return matches[0]
    raise BadInput(f"unknown problem {name!r}; choose from: {', '.join(_order())}")
