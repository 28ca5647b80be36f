"""Torch functions and aten operators the learner's code may not reach: refused below Python's modes for the worker's
whole life (run/intercept.py), and by a function mode during each call. Options: the banned names."""
from __future__ import annotations

from . import Hook, register
from .. import intercept, no_autograd


def _refusals() -> dict:
    return {op: no_autograd.refusal for op in no_autograd.FORWARD_OPS}


class Ban(Hook):
    name = "ban"
    order = 10  # outermost
    reference = False  # the trusted reference may use them

    def setup(self, banned) -> None:
        intercept.ban_kernels(banned, _refusals())
        intercept.guard_functions(banned, _refusals())

    def around(self, banned):
        return intercept.Banned(banned, _refusals())


register(Ban())
