"""Mask rules: one object per kind of masking argument (lengths, a boolean mask, a causal flag, ...), each in a
file of this package (or of an extension's `masks` package, grader/extensions.py).

A rule says, for the argument role it serves: how to draw its legal forms, which keys each form allows, how a
message names a form, how to turn key-padding lengths into the argument (where it can), the public example's
argument, and which catalogued mistakes a failure on its forms alone shows. The engines (draw, judge, diagnose,
the public checks) ask the problem's rule and name none.

    allowed(problem, cfg, arg, call): bool (..., Tq, Tk) broadcastable to the scores; True = the query may attend the key
"""
from __future__ import annotations

import importlib
import pkgutil

from ..extensions import modules
from ..model.roles import register_mask_role
from .layout import score_shape

RULES: dict = {}
"""The argument role a rule serves -> the rule (None: problems without a masking argument)."""


class MaskRule:
    """A kind of masking argument. Subclasses set the class attributes and override what their forms need."""

    role: str | None = None  # the argument role it serves (model/roles.py); None: no masking argument
    doc: str = ""  # what the role means, for the roles table
    kinds: tuple[str, ...] = ("none",)  # the forms it draws; "none" = the argument left out (None or its default)
    per_query: str = "query"  # the form used where a call needs every query to have its own allowed keys
    per_batch: str = "batch"  # the form used where a call needs one set of keys per batch row
    long: str = "query"  # the form of the long calls (draw/long.py): the one with the most to get wrong at length
    words: dict = {}  # form -> how a message names calls of that form ("(B,) valid_lens")
    symptoms: dict = {}  # frozenset of the only failing forms -> the catalogued mistake id that explains it
    lengths: bool = False  # can express key-padding lengths (from_lengths)
    spelled_out: str = ""  # what the masking check compares: a form that broadcasts over queries, and spelled out
    omit_default: bool = False  # a last masking argument equal to its default is left out of half the calls
    laid_out: bool = False  # the argument is laid out against the scores by `allowed`, not broadcast from the right
    ambiguous: dict = {}  # form -> two score dims (positions in (..., Tq, Tk)) whose equality makes the form look like
    # another; drawn also with them equal (draw/tied.py), as the form "<form>_tied" (its own words), drawn as the form
    flagged: bool = False  # the allowed keys depend on another argument too (a causal flag beside a mask)

    def forms(self, problem, cfg: dict | None = None) -> tuple[str, ...]:
        """The forms a call of `cfg` can take."""
        return self.kinds

    def make(self, problem, kind: str, cfg: dict, gen, low: int = 0):
        """The argument of form `kind`; with low=0 some query may have no allowed key, where the form allows."""
        return None

    def allowed(self, problem, cfg: dict, arg, call=None):
        """Which keys each query may attend, broadcastable to the scores (..., Tq, Tk); arg None: every key. `call`:
        the whole call (its "args", and a module's "state"), for a rule whose allowed keys depend on the inputs too."""
        import torch

        return torch.ones(score_shape(problem, cfg), dtype=torch.bool)

    def from_lengths(self, problem, cfg: dict, lens, spell_out: bool = False):
        """The argument meaning `lens` ((B,) or (B, Tq) valid lengths), spelled out to its full shape where the form
        could broadcast; only where `lengths` is True."""
        raise NotImplementedError(f"mask rule {self.role!r} cannot express lengths")

    def example(self, problem, cfg: dict):
        """The public example's argument, as plain data (judge/public_checks.py); None: left out."""
        return None


def _load() -> None:
    for name in [f"{__name__}.{m.name}" for m in pkgutil.iter_modules(__path__) if m.name != "layout"] + modules("masks"):
        importlib.import_module(name)


def register(rule: MaskRule) -> MaskRule:
    """Add a rule (at its module's import); its role becomes a masking argument role."""
    if rule.role in RULES:
        raise ValueError(f"mask rule {rule.role!r} is registered twice")
    RULES[rule.role] = rule
    if rule.role is not None:
        register_mask_role(rule.role, rule.doc)
    return rule


def rule(problem) -> MaskRule:
    """The rule of the problem's masking argument (the none rule when it has none)."""
    return RULES[problem.mask_role]


register(MaskRule())  # no masking argument: one form, every key allowed
_load()
