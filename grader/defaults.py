"""Defaults shared by the commands; no heavy imports here (the pytest plugin reads them early)."""

DEFAULT_SEED = 20261122  # seed of the hidden inputs
DEFAULT_TIMEOUT = 30.0  # wall-clock seconds for one problem's worker: importing and running every call


def variant_seed(name: str) -> int:
    """The hidden inputs' seed of a named variant (`--variant NAME`): a hash of the name, so that candidates given
    different names never share expected numbers, and one name always grades alike."""
    import hashlib

    return int.from_bytes(hashlib.sha256(b"attnkit variant\0" + name.encode()).digest()[:4], "big") & 0x7FFFFFFF
