"""Our implementations of API-Bank's APIs, by API set (upstream's folder name)."""

from __future__ import annotations

from functools import cache

from apibank_bench.data import specs
from apibank_bench.apis.base import LEVEL3, LEVEL12, Api, ApiSet

_SETS = {specs.LEVEL12: LEVEL12, specs.LEVEL3: LEVEL3}


@cache
def _loaded(api_set: str) -> None:
    # Importing a set's package registers its classes with its ApiSet (Levels 1-2 need
    # not import Level 3's modules).
    if api_set == specs.LEVEL3:
        from apibank_bench.apis import level3  # noqa: F401
    else:
        from apibank_bench.apis import level12  # noqa: F401


def api_classes(api_set: str) -> dict[str, type[Api]]:
    _loaded(api_set)
    return _SETS[api_set].classes


__all__ = ["Api", "ApiSet", "api_classes"]
