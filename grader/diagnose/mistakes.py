"""Turning a catalogued mistake into source: the reference with the mistake's patch applied."""
from __future__ import annotations

from ..model.spec import Mistake, Problem


def apply(source: str, mistake: Mistake) -> str:
    for old, new in mistake.patch:
        count = source.count(old)
        if count != 1:
            raise ValueError(f"mistake {mistake.id}: {old!r} occurs {count} times in the reference, expected once")
        source = source.replace(old, new)
    return source


def wrong_source(problem: Problem, mistake: Mistake) -> str:
    from .. import solution_path

    return apply(solution_path(problem.id).read_text(), mistake)
