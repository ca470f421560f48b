"""log.jsonl and the progress line: one record per event, running totals of requests and tokens."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any, TextIO

from apibank_bench.runs.results import to_json, write_atomic

#: Fields of a record that add to the run's totals.
_COUNTED = ("requests", "prompt_tokens", "completion_tokens")


class EventLog:
    """Appends records to `path` (thread-safe) and prints a progress line per record.

    Every record carries `event` and `phase`; records with `requests` /
    `prompt_tokens` / `completion_tokens` add to the totals the progress line
    shows, and a `best` field updates the best score so far.
    """

    def __init__(self, path: Path, stream: TextIO | None = sys.stderr) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.stream = stream
        self.phase = "setup"
        self.best: float | None = None
        self.totals = {key: 0 for key in _COUNTED}
        self._lock = threading.Lock()

    def log(self, event: str, **fields: Any) -> None:
        record = {"event": event, "phase": fields.pop("phase", self.phase), **fields}
        with self._lock:
            for key in _COUNTED:
                self.totals[key] += int(record.get(key) or 0)
            if isinstance(record.get("best"), (int, float)):
                self.best = float(record["best"])
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write(to_json(record) + "\n")
            if self.stream is not None:
                self.stream.write(self._progress(record) + "\n")
                self.stream.flush()

    def _progress(self, record: dict) -> str:
        step = f" step {record['step']}" if record.get("step") is not None else ""
        best = "-" if self.best is None else f"{self.best:.3f}"
        tokens = self.totals["prompt_tokens"] + self.totals["completion_tokens"]
        return (f"optimize: [{record['phase']}] {record['event']}{step}  best {best}  "
                f"requests {self.totals['requests']}  tokens {tokens}")


def dump(path: Path, payload: Any) -> None:
    """A JSON output file, written whole (a reader never sees half of it)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    write_atomic(Path(path), json.dumps(payload, indent=1, ensure_ascii=False, default=str) + "\n")
