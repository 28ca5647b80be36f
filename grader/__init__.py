"""attnkit's autograder: specs, hidden checks, isolated workers, reports."""
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
"""The kit's checkout (exercises/, solutions/, README.md live here), when it runs from one."""

REFERENCE_DIR = next((d for d in (Path(__file__).resolve().parent / "solutions", ROOT / "solutions") if d.is_dir()),
                     ROOT / "solutions")
"""The reference solutions: inside the installed package (a wheel: attnkit/solutions), else the checkout's."""
