"""Arguments that differ from the gold call's only in JSON type (`amount='100'` for `amount=100`).

A function-calling model's arguments carry JSON types, and API-Bank's own checks compare results
that a type changes. Such an answer stays wrong (the API's verdict is never changed); this only
names it, so a type mismatch can be told from a wrong value (`score:argument_type`).

Values of one JSON type must be equal; values of two types agree when they are the same once written
as text: a number as its shortest form (`100`, `100.0` and `"100"` agree), a boolean or null as JSON
spells it, in any case (`True` and `"true"`). Containers agree element by element, keys as they are.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

_WORDS = {"true": "true", "false": "false", "null": "null", "none": "null"}


def _kind(value: Any) -> str:
    """The JSON type of a Python value (`1` and `1.0` are both numbers; `True` is a boolean)."""
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, (list, tuple, set, frozenset)):
        return "array"
    return type(value).__name__


def _number_text(value: float) -> str:
    if math.isfinite(value) and value == int(value):
        return str(int(value))
    return repr(float(value))


def _scalar_text(value: Any) -> str | None:
    """A scalar as loose text (see the module); None for a container."""
    kind = _kind(value)
    if kind in ("boolean", "null"):
        return "null" if value is None else ("true" if value else "false")
    if kind == "number":
        return _number_text(value)
    if kind == "string":
        text = value.strip()
        if text.lower() in _WORDS:
            return _WORDS[text.lower()]
        try:
            return _number_text(float(text)) if text[:1] in tuple("+-.0123456789") else value
        except (ValueError, OverflowError):
            return value
    return None


def _compare(predicted: Any, gold: Any) -> tuple[bool, bool]:
    """(the two agree but for JSON types, some type differs): values of one type must be equal."""
    kind = _kind(predicted)
    if kind != _kind(gold):
        text = _scalar_text(predicted)
        return text is not None and text == _scalar_text(gold), True
    if kind == "object":
        if set(predicted) != set(gold):
            return False, False
        pairs = [_compare(predicted[key], gold[key]) for key in predicted]
    elif kind == "array":
        if len(predicted) != len(gold) or isinstance(predicted, (set, frozenset)):
            return predicted == gold, False
        pairs = [_compare(p, g) for p, g in zip(predicted, gold)]
    else:
        return predicted == gold, False
    return all(agree for agree, _ in pairs), any(changed for _, changed in pairs)


def type_only_difference(predicted: Mapping[str, Any], gold: Mapping[str, Any]) -> bool:
    """Whether `predicted` has the gold call's arguments, one or more in another JSON type, the rest equal."""
    try:
        agree, changed = _compare(dict(predicted), dict(gold))
    except RecursionError:  # arguments nested deeper than any gold call's: not a type slip
        return False
    return agree and changed
