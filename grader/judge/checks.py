"""The checks, by id: the registry (judge/registry.py) filled by every stage in judge/stages/.

Each judge reads its groups of seeded calls and either returns (passed) or raises Failed with a message
that says what was called, what came back, what was expected, and by how much and where it differs."""
from __future__ import annotations

from . import stages  # noqa: F401  (importing the stages registers every check)
from .registry import CHECKS, Check, register, validate_checks

__all__ = ["CHECKS", "Check", "register", "validate_checks"]
