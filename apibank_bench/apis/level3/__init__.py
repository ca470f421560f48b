"""Level 3: upstream's `lv3_apis/` folder."""

import importlib
import pkgutil

# Import every module so each class registers itself with LEVEL3.
for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
