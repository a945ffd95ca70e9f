"""The search modes, one module each: each registers its function (registry.searches), and
importing this package loads them all, so a new mode's module here is found without a
list to extend."""

from __future__ import annotations

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
