"""Torch functions and aten operators the learner's code may not reach: refused below Python's modes for the worker's
whole life (run/intercept.py). Options: the banned names.

In a worker no function mode watches each call besides: the dispatcher's refusal and the replaced module functions hold
whatever mode is active or switched off, and a mode doubled the time of every operation the learner's code ran
(measured: 0.13 s of the workers' CPU over all thirteen problems, a quarter of FlashAttention's). The source read
(judge/scan/) refuses code that looks for the originals. Where no worker set the refusal up (the grader's own runs of a
catalogued mistake, whose patched reference must raise as the learner's code did to reproduce it), the function mode
`intercept.Banned` refuses the calls instead: the grader's oracles elsewhere in that process keep the kernels."""
from __future__ import annotations

import contextlib

from . import Hook, register
from .. import intercept, no_autograd


def _refusals() -> dict:
    return {op: no_autograd.refusal for op in no_autograd.FORWARD_OPS}


class Ban(Hook):
    name = "ban"
    order = 10  # outermost
    reference = False  # the trusted reference may use them

    installed = False  # set up below Python in this process (a worker)

    def setup(self, banned) -> None:
        intercept.ban_kernels(banned, _refusals())
        intercept.guard_functions(banned, _refusals())
        Ban.installed = True

    def around(self, banned):
        return contextlib.nullcontext() if Ban.installed else intercept.Banned(banned, _refusals())


register(Ban())
