"""The optimizer methods. Each is a module with `optimize(ctx) -> {role: prompt}`, `HYPERPARAMETERS`
(name -> (type, default, help), turned into `--name` flags) and optionally `DEFAULT_BUDGET`.

Modules are imported on demand and import their heavy libraries (gepa, dspy) inside `optimize`.
"""

from __future__ import annotations

import importlib
from argparse import Namespace
from types import ModuleType

METHODS = {
    "gepa": "apibank_bench.optimize.gepa_method",
    "mipro": "apibank_bench.optimize.mipro",
    "maspo": "apibank_bench.optimize.maspo",
}
#: The budget when a method does not name its own (GEPA's metric calls, MASPO's rollouts).
FALLBACK_BUDGET = 600


def load(name: str) -> ModuleType:
    try:
        path = METHODS[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r}; expected one of {', '.join(METHODS)}") from None
    return importlib.import_module(path)


def available() -> dict[str, ModuleType]:
    """The methods that import (for the command line's flags); `load` reports why one does not."""
    found = {}
    for name, path in METHODS.items():
        try:
            found[name] = importlib.import_module(path)
        except ImportError:
            continue
    return found


def default_budget(module: ModuleType) -> int:
    return getattr(module, "DEFAULT_BUDGET", FALLBACK_BUDGET)


def hyperparameters(args: Namespace, method: str, module: ModuleType) -> dict:
    """The method's hyperparameters: the flags given (dest `hp_<name>` or `hp_<method>_<name>`, see
    commands/optimize.py), else its defaults."""
    values = {}
    for name, (kind, default, _) in getattr(module, "HYPERPARAMETERS", {}).items():
        given = getattr(args, f"hp_{method}_{name}", None)
        if given is None:
            given = getattr(args, "hp_" + name, None)
        values[name] = default if given is None else kind(given)
    return values
