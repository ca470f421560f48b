"""Text: what UTF-8 cannot carry, and shortening a text for a message, a page or a prompt."""

from __future__ import annotations

import re

#: Lone UTF-16 surrogates: a legal JSON escape (`"\ud800"`) that no UTF-8 encoder accepts.
SURROGATES = re.compile("[\ud800-\udfff]")


def shortened(text: str, limit: int, *, end: bool = False, mark: str = "...") -> str:
    """`text` cut to `limit` characters with `mark` where it was cut: its start (`end`: its end, the mark
    before it); unchanged when it fits, or when `limit` is 0 or less (no limit). The one way the package
    shortens a text for a message, a page or an optimizer's prompt."""
    if limit <= 0 or len(text) <= limit:
        return text
    return mark + text[-limit:] if end else text[:limit] + mark
