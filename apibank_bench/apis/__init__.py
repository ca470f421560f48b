"""Our implementations of API-Bank's APIs, by API set (upstream's folder name)."""

from __future__ import annotations

from functools import cache

from apibank_bench.data import specs
from apibank_bench.apis.base import LEVEL3, LEVEL12, Api, ApiSet

_SETS = {specs.LEVEL12: LEVEL12, specs.LEVEL3: LEVEL3}


@cache
def _loaded() -> None:
    # Importing the packages registers every class with its ApiSet.
    from apibank_bench.apis import level3, level12  # noqa: F401


def api_classes(api_set: str) -> dict[str, type[Api]]:
    _loaded()
    return _SETS[api_set].classes


__all__ = ["Api", "ApiSet", "api_classes"]
