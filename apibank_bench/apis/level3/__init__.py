"""Level 3: upstream's `lv3_apis/` folder."""

from apibank_bench.core.registry import import_submodules

# Import every module so each class registers itself with LEVEL3.
import_submodules(__name__, __path__)
