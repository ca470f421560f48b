"""Read-only JSON values: tasks are immutable, yet compare equal to plain dicts and lists.

`FrozenDict` and `FrozenList` subclass dict and list so that recorded results
compare, serialize and copy exactly like the JSON they came from; every
mutating method raises instead.
"""

from __future__ import annotations

from typing import Any


def _refuse(self, *args, **kwargs):
    raise TypeError(f"{type(self).__name__} is read-only; copy it first (apibank_bench.core.frozen.thaw)")


class FrozenDict(dict):
    __slots__ = ()
    __setitem__ = __delitem__ = __ior__ = _refuse
    pop = popitem = clear = update = setdefault = _refuse

    def __hash__(self):
        return hash(tuple(sorted(self.items(), key=repr)))

    def __reduce__(self):
        return FrozenDict, (dict(self),)

    def __deepcopy__(self, memo):
        return thaw(self)


class FrozenList(list):
    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse

    def __hash__(self):
        return hash(tuple(self))

    def __reduce__(self):
        return FrozenList, (list(self),)

    def __deepcopy__(self, memo):
        return thaw(self)


def freeze(value: Any) -> Any:
    """Recursively freeze JSON-shaped data."""
    if isinstance(value, dict):
        return FrozenDict({key: freeze(item) for key, item in value.items()})
    if isinstance(value, list):
        return FrozenList(freeze(item) for item in value)
    return value


def thaw(value: Any) -> Any:
    """A plain, mutable deep copy of JSON-shaped data (frozen or not); faster than copy.deepcopy."""
    if isinstance(value, dict):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, list):
        return [thaw(item) for item in value]
    return value
