"""attnkit's autograder: specs, hidden checks, isolated workers, reports."""
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
"""The kit's checkout (exercises/, solutions/, README.md live here), when it runs from one."""

REFERENCE_DIR = next((d for d in (Path(__file__).resolve().parent / "solutions", ROOT / "solutions") if d.is_dir()),
                     ROOT / "solutions")
"""The reference solutions: inside the installed package (a wheel: attnkit/solutions), else the checkout's."""


def solution_path(pid: str) -> Path:
    """The reference solution of problem `pid`: the kit's, else an extension's (grader/extensions.py)."""
    from .extensions import solution_dirs

    for folder in (REFERENCE_DIR, *solution_dirs()):
        if (folder / f"{pid}.py").is_file():
            return folder / f"{pid}.py"
    return REFERENCE_DIR / f"{pid}.py"
