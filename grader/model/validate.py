"""Validating a spec when it is loaded: every field the rest of the kit relies on, with a message naming the
spec and the field. (Check ids are validated against the checks' registry by judge/checks.py.)"""
from __future__ import annotations

from .. import REFERENCE_DIR
from ..errors import SpecError
from .spec import Problem
from .tracks import TRACKS


def validate(problem: Problem, module: str, order: tuple[str, ...]) -> None:
    where = f"spec grader/problems/{module}.py"
    if not isinstance(problem, Problem):
        raise SpecError(f"{where}: PROBLEM is a {type(problem).__name__}, not a Problem")
    if problem.id != module:
        raise SpecError(f"{where}: field id is {problem.id!r}, not the file's name {module!r}")
    tracks = [name for name, _ in TRACKS]
    if problem.track not in tracks:
        raise SpecError(f"{where}: field track {problem.track!r} is not a track (known: {', '.join(tracks)})")
    for field in ("requires", "after"):
        unknown = [pid for pid in getattr(problem, field) if pid not in order]
        if unknown:
            raise SpecError(f"{where}: field {field} names unknown problems {unknown}")
    if not problem.points or any(not isinstance(v, int) or v <= 0 for v in problem.points.values()):
        raise SpecError(f"{where}: field points must map each check id to a positive whole number of points")
    ids = [m.id for m in problem.mistakes]
    if len(set(ids)) != len(ids):
        raise SpecError(f"{where}: field mistakes repeats an id ({sorted(i for i in ids if ids.count(i) > 1)[0]})")
    _translations(problem, where)
    _patches(problem, where)


def _translations(problem: Problem, where: str) -> None:
    zh = problem.zh or {}
    for key in ("title", "summary"):
        if not zh.get(key):
            raise SpecError(f"{where}: missing translation zh[{key!r}]")
    if len(zh.get("statements", ())) != len(problem.methods):
        raise SpecError(f"{where}: missing translation zh['statements'] (one per method: {len(problem.methods)})")
    if len(zh.get("hints", ())) != len(problem.hints):
        raise SpecError(f"{where}: missing translation zh['hints'] (one per hint: {len(problem.hints)})")
    missing = [m.id for m in problem.mistakes if m.id not in zh.get("mistakes", {})]
    if missing:
        raise SpecError(f"{where}: missing translation zh['mistakes'][{missing[0]!r}]")


def _patches(problem: Problem, where: str) -> None:
    path = REFERENCE_DIR / f"{problem.id}.py"
    if not path.is_file():
        raise SpecError(f"{where}: no reference solution {path}")
    source = path.read_text()
    for m in problem.mistakes:
        for old, _ in m.patch:
            if source.count(old) != 1:
                raise SpecError(f"{where}: mistake {m.id!r}: its patch no longer applies to the reference "
                                f"({old[:60]!r} occurs {source.count(old)} times in {path.name}, expected once)")
