"""The optimizer methods. Each is a module with `optimize(ctx) -> {role: prompt}`, `HYPERPARAMETERS`
(name -> (type, default, help), turned into `--name` flags) and optionally `DEFAULT_BUDGET`.

The registry holds each method's module path, not the module: listing the names (`--help`, the
settings' choices) imports nothing, and a module is imported when its method is used; it imports its
heavy libraries (gepa, dspy) inside `optimize`.
"""

from __future__ import annotations

import importlib
from argparse import Namespace
from types import ModuleType

from apibank_bench.core.registry import Registry

METHODS: Registry[str] = Registry("method", "--method")
METHODS.add("gepa", "apibank_bench.optimize.gepa_method", "GEPA: reflective prompt evolution (the gepa library)")
METHODS.add("mipro", "apibank_bench.optimize.mipro", "MIPROv2: instructions proposed and searched (DSPy)")
METHODS.add("maspo", "apibank_bench.optimize.maspo", "MASPO: multi-agent prompt optimization, role by role")
#: The budget when a method does not name its own (GEPA's metric calls, MASPO's rollouts).
FALLBACK_BUDGET = 600


def load(name: str) -> ModuleType:
    return importlib.import_module(METHODS.get(name))  # an unknown name: ValueError naming the known ones


def available() -> dict[str, ModuleType]:
    """The methods that import (for the command line's flags); `load` reports why one does not."""
    found = {}
    for entry in METHODS:
        try:
            found[entry.name] = importlib.import_module(entry.value)
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
