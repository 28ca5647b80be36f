"""attnkit's autograder: specs, hidden checks, isolated workers, reports."""
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
"""The kit's checkout (exercises/, solutions/, README.md live here)."""
