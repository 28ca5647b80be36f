"""Errors every layer may raise: leaf module, importing nothing of the kit."""


class BadInput(Exception):
    """Shown to the user as one line; the command exits non-zero."""


class SpecError(Exception):
    """A problem's spec is invalid: the message names the spec and the field. The kit's own fault (exit 3)."""
