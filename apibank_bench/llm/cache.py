"""On-disk response cache: one small JSON file per request, written atomically.

The key is a SHA-256 of the whole request (model, messages, sampling parameters,
seed, extra_body) in canonical JSON. Files are written to a temporary name in
the same folder and renamed, so a reader never sees half a file: an interrupted
run resumes from what is on disk and concurrent processes (xdist workers) can
share one folder. The base URL is not part of the key: replicas of one model
are interchangeable.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any


def request_key(request: dict[str, Any]) -> str:
    canonical = json.dumps(request, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class ResponseCache:
    def __init__(self, directory: str | os.PathLike[str]):
        self.directory = Path(directory)

    def path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            with open(self.path(key), encoding="utf-8") as f:
                entry = json.load(f)
        except (OSError, ValueError):
            return None  # missing or unreadable: a miss, the request is simply made again
        return entry if isinstance(entry, dict) and entry.get("key") == key else None

    def put(self, key: str, entry: dict[str, Any]) -> None:
        target = self.path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{key[:12]}.", suffix=".tmp", dir=target.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump({**entry, "key": key}, f, ensure_ascii=False)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
