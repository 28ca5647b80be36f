"""Defaults shared by the commands; no heavy imports here (the pytest plugin reads them early)."""

DEFAULT_SEED = 20261122  # seed of the hidden inputs
DEFAULT_TIMEOUT = 30.0  # wall-clock seconds for one problem's worker: importing and running every call
