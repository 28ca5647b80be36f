"""Errors every layer may raise: leaf module, importing nothing of the kit."""


class BadInput(Exception):
    """Shown to the user as one line; the command exits non-zero."""
