"""Validating a spec when it is loaded: every field the rest of the kit relies on, with a message naming the
spec and the field. (Check ids are validated against the checks' registry by judge/registry.py.)"""
from __future__ import annotations

from .. import solution_path
from ..errors import SpecError
from .roles import ARG_ROLES, MASK_ROLES, OUT_ROLES
from .spec import DIMS, VISIBILITIES, Problem
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
    unknown = sorted(set(problem.visibility or {}) - set(problem.points))
    if unknown or any(v not in VISIBILITIES for v in (problem.visibility or {}).values()):
        raise SpecError(f"{where}: field visibility must map checks of field points to one of {', '.join(VISIBILITIES)}"
                        + (f" (unknown checks: {', '.join(unknown)})" if unknown else ""))
    ids = [m.id for m in problem.mistakes]
    if len(set(ids)) != len(ids):
        raise SpecError(f"{where}: field mistakes repeats an id ({sorted(i for i in ids if ids.count(i) > 1)[0]})")
    _roles(problem, where)
    _patches(problem, where)


def texts(problem: Problem) -> dict[str, str]:
    """Every text of the spec that a catalogue translates, by its catalogue key: "title", "summary", "class_doc"
    (module problems), "hints[i]", "statements[i]" (one per method), "mistakes.<id>.name" / ".explain" / ".hint"
    (those the spec writes)."""
    out = {"title": problem.title, "summary": problem.summary}
    if problem.class_doc:
        out["class_doc"] = problem.class_doc
    out.update({f"hints[{i}]": h for i, h in enumerate(problem.hints)})
    out.update({f"statements[{i}]": m.statement for i, m in enumerate(problem.methods)})
    for m in problem.mistakes:
        out.update({f"mistakes.{m.id}.{part}": getattr(m, part) for part in ("name", "explain", "hint")
                    if getattr(m, part)})
    return out


def _keys(entry, prefix: str = "") -> dict:
    """A catalogue entry flattened to the keys of `texts`: lists by index, objects by dotted name."""
    if isinstance(entry, dict):
        return {k: v for key, value in entry.items() for k, v in _keys(value, f"{prefix}.{key}" if prefix else key).items()}
    if isinstance(entry, list) and prefix in ("hints", "statements"):
        return {f"{prefix}[{i}]": v for i, v in enumerate(entry)}
    return {prefix: entry}


def validate_translation(problem: Problem, entry: dict, where: str) -> None:
    """A catalogue entry (grader/model/i18n.py) holds exactly the texts its spec has, each a non-empty string:
    the first missing one, else the first key that translates nothing in the spec, fails naming `where` (the
    catalogue file) and the key."""
    spec = f"spec grader/problems/{problem.id}.py"
    has, got = texts(problem), _keys(entry)
    missing = [k for k in has if not (isinstance(got.get(k), str) and got[k].strip())]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise SpecError(f"{where}: missing translation {missing[0]!r}{more}: {spec} has it")
    unknown = [k for k in got if k not in has]
    if unknown:
        raise SpecError(f"{where}: unknown key {unknown[0]!r}: {spec} has no such text")


def _patches(problem: Problem, where: str) -> None:
    path = solution_path(problem.id)
    if not path.is_file():
        raise SpecError(f"{where}: no reference solution {path}")
    source = path.read_text()
    for m in problem.mistakes:
        for old, _ in m.patch:
            if source.count(old) != 1:
                raise SpecError(f"{where}: mistake {m.id!r}: its patch no longer applies to the reference "
                                f"({old[:60]!r} occurs {source.count(old)} times in {path.name}, expected once)")


def _roles(problem: Problem, where: str) -> None:
    """The call's arguments and outputs each declare a known role; at most one argument decides masking and at
    most one output is the weights; every output's dims are named dims."""
    method = f"methods[{len(problem.methods) - 1}]"
    if not problem.is_module and problem.methods[-1].name != problem.symbol:
        raise SpecError(f"{where}: field {method}: a function problem's last function is the graded one, "
                        f"{problem.symbol!r}, not {problem.methods[-1].name!r}")
    for a in problem.args:
        if a.role not in ARG_ROLES or a.role == "config":
            raise SpecError(f"{where}: field {method}.args: argument {a.name!r} has role {a.role!r} "
                            f"(known: {', '.join(r for r in ARG_ROLES if r != 'config')})")
    if len(problem.arg_index(*MASK_ROLES)) > 1:
        raise SpecError(f"{where}: field {method}.args: more than one argument with a masking role {tuple(MASK_ROLES)}")
    if not problem.returns:
        raise SpecError(f"{where}: field {method}.returns: the call returns nothing")
    for o in problem.returns:
        if o.role not in OUT_ROLES:
            raise SpecError(f"{where}: field {method}.returns: output {o.name!r} has role {o.role!r} "
                            f"(known: {', '.join(OUT_ROLES)})")
        unknown = [d for d in o.dims.split() if d not in DIMS]
        if not o.dims or unknown:
            raise SpecError(f"{where}: field {method}.returns: output {o.name!r} needs named dims such as "
                            f"\"(B, Tq, dv)\" first in its doc" + (f" ({unknown[0]!r} is not one)" if unknown else ""))
    if [o.role for o in problem.returns].count("weights") > 1:
        raise SpecError(f"{where}: field {method}.returns: more than one output with role 'weights'")
