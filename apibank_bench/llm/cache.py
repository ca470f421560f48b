"""On-disk response cache: one small JSON file per request, written atomically.

The key is a SHA-256 of the whole request (model, messages, sampling parameters,
seed, extra_body) in canonical JSON. Files are written to a temporary name in
the same folder and renamed, so a reader never sees half a file: an interrupted
run resumes from what is on disk and concurrent processes (xdist workers) can
share one folder. The base URL is not part of the key: replicas of one model
are interchangeable.

The cache is best-effort: a folder that cannot be read or written, or an entry
that is not a complete answer, is a miss (with one warning per process), never
a failed request; the next answer overwrites a bad entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import warnings
from pathlib import Path
from typing import Any, Required, TypedDict

from apibank_bench.core.files import write_atomic

_warned = threading.Event()


def warn_once(message: str) -> None:
    """One warning per process that the cache is not working (the run goes on without it)."""
    if not _warned.is_set():
        _warned.set()
        warnings.warn(f"response cache: {message}; answers are not cached", RuntimeWarning, stacklevel=3)


def request_key(request: dict[str, Any]) -> str:
    canonical = json.dumps(request, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    # surrogatepass: a lone surrogate (a model may send one) must not make the key fail
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def _is_answer(entry: Any, key: str) -> bool:
    """A usable entry: this key's, with an answer (text or tool calls) and whole-number token counts."""
    return (
        isinstance(entry, dict)
        and entry.get("key") == key
        and isinstance(entry.get("text"), str)
        and (entry["text"] != "" or bool(entry.get("tool_calls")))
        and all(isinstance(entry.get(name, 0), int) for name in ("prompt_tokens", "completion_tokens"))
    )


class CachedAnswer(TypedDict, total=False):
    """An entry: one request (the body as sent) and its answer (`completion.Completion` writes and reads it)."""

    key: str  #: added when written
    request: dict[str, Any]
    text: Required[str]
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    base_url: str
    finish_reason: str | None
    tool_calls: list[dict[str, str]]


class ResponseCache:
    def __init__(self, directory: str | os.PathLike[str]):
        self.directory = Path(directory)

    def path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> CachedAnswer | None:
        """The stored entry, or None: missing, unreadable and malformed entries are all misses."""
        try:
            with open(self.path(key), encoding="utf-8") as f:
                entry = json.load(f)
        except FileNotFoundError:
            return None
        except ValueError:
            return None  # torn or not JSON: asked again, then overwritten
        except OSError as exc:
            warn_once(f"cannot read {self.directory} ({type(exc).__name__}: {exc})")
            return None
        return entry if _is_answer(entry, key) else None

    def put(self, key: str, entry: CachedAnswer) -> bool:
        """Store an entry (replacing any old one); False, with a warning, if the disk refused."""
        try:
            self._write(key, entry)
        except (OSError, ValueError) as exc:
            warn_once(f"cannot write {self.directory} ({type(exc).__name__}: {exc})")
            return False
        return True

    def _write(self, key: str, entry: CachedAnswer) -> None:
        target = self.path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        # ASCII escapes: a lone surrogate in an answer cannot be written as UTF-8.
        write_atomic(target, json.dumps({**entry, "key": key}, ensure_ascii=True))
