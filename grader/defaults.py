"""Defaults shared by the commands; no heavy imports here (the pytest plugin reads them early)."""

DEFAULT_SEED = 20261122  # seed of the hidden inputs
DEFAULT_TIMEOUT = 30.0  # wall-clock seconds for one problem's worker: importing and running every call


def variant_seed(name: str) -> int:
    """The hidden inputs' seed of a named variant (`--variant NAME`): a hash of the name, so that candidates given
    different names never share expected numbers, and one name always grades alike."""
    import hashlib

    return int.from_bytes(hashlib.sha256(b"attnkit variant\0" + name.encode()).digest()[:4], "big") & 0x7FFFFFFF


CACHE_VARIABLE = "ATTNKIT_CACHE"


def cache_root():
    """Where the kit keeps the expected values it computed (judge/stored.py); None when switched off: $ATTNKIT_CACHE
    (a folder, or `off`), else $ATTNKIT_HOME/cache, else $XDG_CACHE_HOME/attnkit, else ~/.cache/attnkit."""
    import os
    from pathlib import Path

    given = os.environ.get(CACHE_VARIABLE)
    if given:
        return None if given.strip().lower() in ("off", "0", "no", "false") else Path(given).expanduser()
    home = os.environ.get("ATTNKIT_HOME")
    if home:
        return Path(home).expanduser() / "cache"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path("~/.cache").expanduser()) / "attnkit"
