"""Automatic differentiation refused: for the worker's whole life (the engine's method replaced before the learner's
import) and, within each call, the engine object swapped for a refusal (run/no_autograd.py). Options: True."""
from __future__ import annotations

from . import Hook, register
from .. import no_autograd


class NoAutograd(Hook):
    name = "no_autograd"
    order = 20

    def setup(self, options) -> None:
        no_autograd.disable_engine()

    def around(self, options):
        return no_autograd.NoAutograd()


register(NoAutograd())
