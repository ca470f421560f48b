"""Levels 1-2: upstream's `apis/` folder, grouped by domain."""

import importlib
import pkgutil

# Import every module so each class registers itself with LEVEL12.
for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
