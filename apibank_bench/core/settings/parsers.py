"""The parsers of setting values: each takes what a flag, an ini key or the environment gives (or
a value already parsed) and returns the typed value, or raises ValueError saying what it expected."""

from __future__ import annotations

import json
import re
from typing import Any, Callable

_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


def parse_bool(text: Any) -> bool:
    if isinstance(text, bool):
        return text
    value = str(text).strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"expected a boolean (1/0, true/false, yes/no, on/off), got {text!r}")


def parse_list(text: Any) -> list[str]:
    """"a, b c" or ["a,b", "c"] -> ["a", "b", "c"]."""
    if isinstance(text, (list, tuple)):
        return [item for part in text for item in parse_list(part)]
    return [item for item in str(text).replace(",", " ").split() if item]


def parse_urls(text: Any) -> list[str]:
    return [url.rstrip("/") for url in parse_list(text)]


def parse_shard(text: Any) -> tuple[int, int]:
    index, sep, count = str(text).partition("/")
    try:
        shard = (int(index), int(count))
    except ValueError:
        shard = None
    if not sep or shard is None or not 1 <= shard[0] <= shard[1]:
        raise ValueError(f"expected i/n with 1 <= i <= n, got {text!r}")
    return shard


def parse_json_object(text: Any) -> dict[str, Any]:
    if isinstance(text, dict):
        return text
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ValueError("expected a JSON object")
    return value


#: `ROLE=MODEL` or `ROLE=MODEL@BASE_URL` (the URL starts at the first `@http`; a model name may hold `@`).
_MODEL_ROLE = re.compile(r"^(?P<role>[A-Za-z_][\w#]*)=(?P<model>[^@\s]+(?:@(?!https?://)[^@\s]+)*)(?:@(?P<url>https?://\S+))?$")
#: An alternative of a sweep's `--model-role` axis that assigns no role a model of its own.
NO_ROLE_MODELS = "-"


def parse_model_roles(text: Any) -> list[str]:
    """`--model-role ROLE=MODEL[@BASE_URL]`, repeatable (or several in one value, comma or space separated):
    the assignments, checked for form (which roles exist is the topology's business: agents/team_models.py).
    `-` alone is no assignment (a sweep axis's all-`--model` alternative)."""
    items = [item for item in parse_list(text) if item != NO_ROLE_MODELS]
    roles = []
    for item in items:
        match = _MODEL_ROLE.match(item)
        if not match:
            raise ValueError(f"expected ROLE=MODEL or ROLE=MODEL@BASE_URL, got {item!r}")
        roles.append(match["role"])
    repeated = sorted({role for role in roles if roles.count(role) > 1})
    if repeated:
        raise ValueError(f"a role is given two models: {', '.join(repeated)}")
    return [item.rstrip("/") for item in items]


def model_role_parts(item: str) -> tuple[str, str, str | None]:
    """One checked assignment as (role, model, base URL or None: `--base-url`'s)."""
    match = _MODEL_ROLE.match(item)
    assert match, item
    return match["role"], match["model"], match["url"]


def parse_prices(text: Any) -> list[str]:
    """`--price MODEL=INPUT/OUTPUT` (per million tokens), repeatable: checked for form, kept as given."""
    items = parse_list(text)
    for item in items:
        model, _, pair = item.rpartition("=")
        prices = pair.split("/")
        try:
            ok = bool(model) and len(prices) == 2 and all(float(price) >= 0 for price in prices)
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(f"expected MODEL=INPUT/OUTPUT (prices per million tokens), got {item!r}")
    return items


def at_least(minimum: int, kind: Callable[[Any], Any] = int) -> Callable[[Any], Any]:
    """`kind`'s parser that refuses values below `minimum`."""
    def parse(text: Any) -> Any:
        value = kind(text)
        if value < minimum:
            raise ValueError(f"must be >= {minimum}, got {text!r}")
        return value
    parse.__name__ = kind.__name__
    parse.__annotations__["return"] = kind  # what it gives, for the check that the table and RunConfig agree
    return parse


def above(bound: float, kind: Callable[[Any], Any] = float) -> Callable[[Any], Any]:
    """`kind`'s parser that takes only values above `bound`."""
    def parse(text: Any) -> Any:
        value = kind(text)
        if not value > bound:
            raise ValueError(f"must be > {bound:g}, got {text!r}")
        return value
    parse.__name__ = kind.__name__
    parse.__annotations__["return"] = kind
    return parse


def parse_alpha(text: Any) -> float:
    value = float(text)
    if not 0 < value < 1:
        raise ValueError(f"a significance level must be between 0 and 1, got {text!r}")
    return value

