"""Another function of the learner's file: the call runs `symbol`, defined beside the problem's own function (its
module's globals: a file's, or a notebook's namespace), instead of that function (alibi_slopes beside
alibi_attention). Options: {"symbol"}."""
from __future__ import annotations

import sys

from . import Hook, register


def beside(fn, symbol: str):
    """The function `symbol` of the module that defines `fn` (an AttributeError naming it where there is none)."""
    scope = getattr(fn, "__globals__", None)
    if not isinstance(scope, dict):  # not a plain function: the module it names
        scope = vars(sys.modules.get(getattr(fn, "__module__", None) or "", sys))
    if not callable(scope.get(symbol)):
        raise AttributeError(f"the file defines no function `{symbol}` (the contract asks for one beside the others)")
    return scope[symbol]


class Companion(Hook):
    name = "companion"

    def run(self, options, fn, args, once):
        return once(beside(fn, options["symbol"]), args)


register(Companion())
