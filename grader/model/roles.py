"""The roles an argument or an output of a problem's call can play. Checks find arguments and outputs by role,
never by name; a spec declares each one's role (Arg, Out), and loading validates them (model/validate.py)."""
from __future__ import annotations

import re
from typing import NamedTuple

ARG_ROLES = {
    "query": "a tensor whose rows attend (queries)",
    "key": "a tensor whose rows are attended; axis -2 is the key axis",
    "value": "a tensor whose rows the weights mix; axis -2 is the key axis",
    "scores": "attention scores; the last axis is the key axis",
    "tensor": "any other input tensor (x, grad_output)",
    "parameter": "a weight passed as an argument",
    "positions": "integer positions of the rows",
    "cache": "keys and values of earlier positions",
    "scalar": "a number or a setting (a tensor of settings too: no gradient is asked of it)",
    "flag": "a setting that the mask rule reads beside the masking argument (is_causal next to a mask)",
    "config": "a constructor argument",
}
"""The roles an argument can play: checks find arguments by role, never by name."""

MASK_ROLES: dict[str, str] = {}
"""Roles that decide which keys a query may attend (a call has at most one): one per mask rule (grader/masks/),
added by `register_mask_role` when the rule is loaded."""


def register_mask_role(role: str, doc: str) -> None:
    """A mask rule's argument role: a masking role, and an argument role like the others."""
    MASK_ROLES[role] = ARG_ROLES[role] = doc


OUT_ROLES = {
    "values": "attention output (or any other computed tensor)",
    "weights": "attention weights: rows over the allowed keys sum to 1, zero elsewhere",
    "lse": "log-sum-exp of each row's scaled scores over its allowed keys",
    "gradient": "a gradient of one input",
    "cache": "keys and values to pass to the next call",
}
"""The roles an output can play."""


class Arg(NamedTuple):
    """One documented argument: its name, its dims or description, and its role (ARG_ROLES)."""

    name: str
    doc: str
    role: str = "config"


class Out(NamedTuple):
    """One output: its name, its dims ("(B, Tq, dv)", named dims first) and its role (OUT_ROLES)."""

    name: str
    doc: str
    role: str = "values"

    @property
    def dims(self) -> str:
        """The named dims of the doc's leading parenthesis: "(..., Tq, dv) float" -> "... Tq dv"."""
        return " ".join(leading_dims(self.doc))


def leading_dims(doc: str) -> list[str]:
    """The dims a doc's leading parenthesis names, in order: "(..., Tq, dv) float" -> ["...", "Tq", "dv"]."""
    found = re.match(r"\(([^)]*)\)", doc)
    return [d.strip() for d in found.group(1).split(",") if d.strip()] if found else []


def documented_dims(problem) -> set[str]:
    """The dimensions the problem's statement names in its arguments' and results' shapes ("(B, Hq, d)", a cache's
    "(k, v), each (B, Hkv, P, d)"): the only ones a finding may name (a size the drawing uses inside, as paged
    attention's Tq, means nothing to the learner)."""
    docs = [a.doc for m in problem.methods for a in m.args] + [o.doc for m in problem.methods for o in m.returns]
    return {d for doc in docs for part in (doc, *doc.split("each ")[1:]) for d in leading_dims(part)}
