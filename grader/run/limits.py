"""A worker's resource limits and their command-line flags: a leaf that the pytest plugin reads when it declares
its options (in every pytest run: nothing heavy here) and the sandbox applies (bound into bubblewrap with it)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """Per-worker limits; the flags of `attnkit grade` and `grade-batch` set them."""

    cpu_seconds: int = 60
    memory_mb: int = 4096
    output_kb: int = 1024
    processes: int = 64
    submission_mb: int = 20


# (Limits field, command-line flag, metavar, meaning): `attnkit grade`, `grade-batch` and the pytest plugin
FLAGS = (("cpu_seconds", "--cpu-limit", "SECONDS", "CPU seconds per problem's worker"),
         ("memory_mb", "--memory-limit", "MB", "memory per worker"),
         ("output_kb", "--output-limit", "KB", "what a worker may print"))
