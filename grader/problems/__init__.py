"""The problem registry: one module per problem, in track order."""
from __future__ import annotations

import importlib

from ..spec import Problem

ORDER = ("masked_softmax", "additive_attention", "luong_attention", "multihead_additive_attention")


def all_problems() -> list[Problem]:
    return [get(pid) for pid in ORDER]


def get(pid: str) -> Problem:
    if pid not in ORDER:
        raise KeyError(f"unknown problem {pid!r}; choose from: {', '.join(ORDER)}")
    return importlib.import_module(f"{__name__}.{pid}").PROBLEM
