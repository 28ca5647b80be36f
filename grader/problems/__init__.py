"""The problem registry: one module per problem, in track order."""
from __future__ import annotations

import importlib

from ..errors import BadInput
from ..model.i18n import current, localize
from ..model.spec import Problem
from ..model.validate import validate

ORDER = (
    "numpy_additive_attention", "masked_softmax", "additive_attention", "luong_attention",
    "scaled_dot_product_attention", "multihead_additive_attention", "multihead_attention", "chunked_additive_attention",
)


def all_problems() -> list[Problem]:
    return [get(pid) for pid in ORDER]


_LOCALIZED: dict = {}
_VALID: set = set()


def get(pid: str) -> Problem:
    """The spec of `pid`, its texts in the chosen language (grader/i18n.py)."""
    if pid not in ORDER:
        raise KeyError(f"unknown problem {pid!r}; choose from: {', '.join(ORDER)}")
    problem = importlib.import_module(f"{__name__}.{pid}").PROBLEM
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
