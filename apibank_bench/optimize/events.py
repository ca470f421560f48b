"""log.jsonl and the progress line: one record per event, running totals of requests and tokens."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any, TextIO

from apibank_bench.core.progress import ProgressLine
from apibank_bench.core.files import write_atomic
from apibank_bench.runs.results import to_json

#: Fields of a record that add to the run's totals.
_COUNTED = ("requests", "cache_hits", "prompt_tokens", "completion_tokens")
#: Events that always get a line of their own (the rest update the progress line).
MILESTONES = frozenset({"resume", "start", "skip", "best", "validation", "final", "done", "ask_error"})


class EventLog:
    """Appends records to `path` (thread-safe) and shows where the job is.

    Every record carries `event` and `phase`; records with `requests` / `cache_hits` /
    `prompt_tokens` / `completion_tokens` add to the totals the progress line
    shows, and a `best` field updates the best score so far. On a terminal the
    line is redrawn in place; elsewhere it is printed every 10 s. Milestones
    (a phase's start and end, the best prompts, the final scores) get a line each.
    """

    def __init__(self, path: Path, stream: TextIO | None = sys.stderr) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.phase = "setup"
        self.best: float | None = None
        self.totals = {key: 0 for key in _COUNTED}
        self.last: dict = {"event": "setup", "phase": "setup"}
        self._lock = threading.Lock()
        self.line = None if stream is None else ProgressLine(lambda: self._progress(self.last), stream)

    def log(self, event: str, **fields: Any) -> None:
        record = {"event": event, "phase": fields.pop("phase", self.phase), **fields}
        with self._lock:
            for key in _COUNTED:
                self.totals[key] += int(record.get(key) or 0)
            if isinstance(record.get("best"), (int, float)):
                self.best = float(record["best"])
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write(to_json(record) + "\n")
            self.last = record
            if self.line is not None:
                if event in MILESTONES:
                    self.line.say(self._progress(record))
                else:
                    self.line.update()

    def close(self) -> None:
        if self.line is not None:
            self.line.clear()

    def _progress(self, record: dict) -> str:
        step = f" step {record['step']}" if record.get("step") is not None else ""
        best = "-" if self.best is None else f"{self.best:.3f}"
        tokens = self.totals["prompt_tokens"] + self.totals["completion_tokens"]
        return (f"optimize: [{record['phase']}] {record['event']}{step} · best {best} · "
                f"requests {self.totals['requests']} · cache hits {self.totals['cache_hits']} · tokens {tokens}")


def dump(path: Path, payload: Any) -> None:
    """A JSON output file, written whole (a reader never sees half of it)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    write_atomic(Path(path), json.dumps(payload, indent=1, ensure_ascii=False, default=str) + "\n")
