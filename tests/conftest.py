"""Helpers for the kit's own tests: build implementation directories and grade them."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from grader import ROOT
from grader.grading import grade

SOLUTIONS = ROOT / "solutions"


def make_impl(directory: Path, files: dict[str, str] | None = None, base: Path | None = SOLUTIONS) -> Path:
    """A directory holding `base`'s modules, with `files` ({name.py: source}) written over them."""
    directory.mkdir(parents=True, exist_ok=True)
    if base is not None:
        for f in base.glob("*.py"):
            shutil.copy(f, directory / f.name)
    for name, text in (files or {}).items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text(text)
    return directory


def snapshot(directory: Path) -> dict:
    """Every file below `directory` with its bytes: to prove grading wrote nothing there."""
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.fixture(scope="session")
def solutions_report():
    return grade(SOLUTIONS)
