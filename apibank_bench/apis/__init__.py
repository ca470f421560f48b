"""Our implementations of API-Bank's APIs, by API set (upstream's folder name)."""

from __future__ import annotations

from functools import cache

from apibank_bench.data import specs
from apibank_bench.apis.base import LEVEL3, LEVEL12, Api, ApiSet

_SETS = {specs.LEVEL12: LEVEL12, specs.LEVEL3: LEVEL3}


# Importing a set's package registers its classes with its ApiSet, when the set is first read
# (Levels 1-2 need not import Level 3's modules).
def _load_level12() -> None:
    from apibank_bench.apis import level12  # noqa: F401


def _load_level3() -> None:
    from apibank_bench.apis import level3  # noqa: F401


LEVEL12.load_with(_load_level12)
LEVEL3.load_with(_load_level3)


@cache
def api_classes(api_set: str) -> dict[str, type[Api]]:
    """The set's classes by name (one dict a set, shared)."""
    return _SETS[api_set].classes()


__all__ = ["Api", "ApiSet", "api_classes"]
