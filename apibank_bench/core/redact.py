"""Secrets out of text: API keys, bearer tokens and URL credentials become `***`.

Applied wherever text from outside (an endpoint's error body, a configured base
URL) reaches an output file or the terminal. An endpoint may echo the key it was
sent, so the configured key is removed wherever it appears, beside anything that
merely looks like a key.
"""

from __future__ import annotations

import re
from typing import Iterable

MASK = "***"
_MIN_SECRET = 4  # shorter "secrets" (a placeholder like "x") would mask ordinary text

_PATTERNS = (
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{6,}"), "sk-" + MASK),  # OpenAI-style keys (sk-..., sk-proj-...)
    (re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/\-]+=*"), r"\1 " + MASK),
    (re.compile(r"(?i)([?&](?:api[_-]?key|key|token|access[_-]?token)=)[^&\s#\"']+"), r"\1" + MASK),
    (re.compile(r"(?i)\b(x-api-key|api[_-]?key|authorization)([\"']?\s*[:=]\s*[\"']?)(?!bearer\b)[^\s\"',}&]+"),
     r"\1\2" + MASK),
    (re.compile(r"(?<=://)[^/\s@]+@"), MASK + "@"),  # user:password@host
)


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """`text` with the given secrets and anything that looks like a credential masked."""
    if not isinstance(text, str):
        text = str(text)
    for secret in sorted({s for s in secrets if s and len(s) >= _MIN_SECRET}, key=len, reverse=True):
        text = text.replace(secret, MASK)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text
