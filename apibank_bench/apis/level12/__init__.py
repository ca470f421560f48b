"""Levels 1-2: upstream's `apis/` folder, grouped by domain."""

from apibank_bench.core.registry import import_submodules

# Import every module so each class registers itself with LEVEL12.
import_submodules(__name__, __path__)
