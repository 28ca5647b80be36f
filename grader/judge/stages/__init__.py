"""Every check stage: each module here registers its checks with judge/registry.py when imported, so a
new check is a new module and touches no other."""
from __future__ import annotations

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
