"""Defaults shared by the commands; no heavy imports here (the pytest plugin reads them early)."""
from dataclasses import dataclass

DEFAULT_SEED = 20261122  # seed of the hidden inputs
DEFAULT_TIMEOUT = 30.0  # wall-clock seconds for one problem's worker: importing and running every call


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


def variant_seed(name: str) -> int:
    """The hidden inputs' seed of a named variant (`--variant NAME`): a hash of the name, so that candidates given
    different names never share expected numbers, and one name always grades alike."""
    import hashlib

    return int.from_bytes(hashlib.sha256(b"attnkit variant\0" + name.encode()).digest()[:4], "big") & 0x7FFFFFFF
