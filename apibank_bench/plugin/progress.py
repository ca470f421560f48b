"""The run's progress on pytest's screen: a live line under `apibank-bench run` (redrawn in place on a
terminal, a plain line every 10 s otherwise), plain lines between pytest's per-test characters, and the
warnings a run gives once."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from apibank_bench.core.progress import ProgressLine, eta
from apibank_bench.runs.benchmark_run import BenchmarkRun
from apibank_bench.runs.row import ResultRow

PROGRESS_EVERY_S = 10.0  #: plain progress lines (not a terminal, or pytest's own per-test characters)


class Progress:
    """Where `run` is, said on `config`'s terminal; `quiet`: pytest prints nothing per test (`run` without -v)."""

    def __init__(self, config: pytest.Config, run: BenchmarkRun, quiet: bool) -> None:
        self.config, self.run, self.quiet = config, run, quiet
        self.line: ProgressLine | None = None  #: the live line, under `apibank-bench run`
        self.line_started = False
        self.last_progress = time.monotonic()
        self.said: set[str] = set()  #: the warnings given (each is given once)

    def start_line(self) -> None:
        """Once: at the end of collection, or (an xdist controller collects nothing) at the first result."""
        if self.line_started or not self.run.selection.total or not self.quiet:
            return
        self.line_started = True
        stream = terminal_stream(self.config)
        if stream is not None:
            self.line = ProgressLine(self.text, stream, every_s=PROGRESS_EVERY_S).start()

    def stop_line(self) -> None:
        if self.line is not None:
            self.line.stop()
            self.line.stream.close()  # our own handle on the terminal (terminal_stream)
            self.line = None

    def added(self, row: ResultRow) -> None:
        """A row was written: warn if due, redraw the line."""
        # the first line comes PROGRESS_EVERY_S after the first instance, not after start-up
        if self.run.tally.done == 1:
            self.last_progress = time.monotonic()
        self.start_line()
        self.warn_once(row)
        if self.line is not None:
            self.line.update()

    def warn_once(self, row: ResultRow | None = None) -> None:
        for kind, text in self.run.warnings(row):
            if kind not in self.said:
                self.said.add(kind)
                self.say(text)

    def say(self, text: str) -> None:
        """A line of its own: above the progress line, or among pytest's output."""
        if self.line is not None:
            self.line.say(text)
            return
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.ensure_newline()
            reporter.write_line(text, yellow=True)

    def test_finished(self) -> None:
        """A plain progress line once a test is over (so after its character), every PROGRESS_EVERY_S."""
        due = time.monotonic() - self.last_progress >= PROGRESS_EVERY_S
        if self.line is None and 0 < self.run.tally.done < self.run.selection.total and due:
            self.plain()

    def text(self) -> str:
        """Where the run is, in one line: done/total, running accuracy, errors, the model's activity, rate, ETA."""
        tally, total = self.run.tally, self.run.selection.total
        elapsed = time.time() - self.run.running_since
        completed = tally.done - tally.errors
        parts = [f"{tally.done}/{total} instances",
                 f"accuracy {tally.correct / completed:.1%} of {completed}" if completed else "none completed yet",
                 f"{tally.errors} errors"]
        activity = model_activity(self.run.parts.built_models)
        if "in_flight" in activity:
            parts.append(f"{activity['in_flight']} requests in flight"
                         + (f" (limit {activity['limit']})" if "limit" in activity else "")
                         + (f", {activity['waiting']} waiting to retry" if "waiting" in activity else ""))
        parts.append(f"{activity.get('cache_hits', tally.cache_hits)} cache hits")
        parts.append(f"{tally.done / max(elapsed, 1e-9):.2f}/s")
        left = eta(tally.done, total, elapsed)
        if left is not None and tally.done < total:
            parts.append(f"ETA {left}")
        return "apibank: " + " · ".join(parts)

    def plain(self) -> None:
        """A plain progress line between pytest's per-test characters, never inside their line."""
        self.last_progress = time.monotonic()
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        reporter.ensure_newline()
        reporter.write(self.text(), flush=True)
        reporter.currentfspath = None  # pytest ends this line, and starts its next character under its file name


def model_activity(client: Any) -> dict:
    """What this process's model client is doing now: requests in flight, waiting to retry, cache hits.

    Only what the model layer counts is shown (none under xdist, where the clients live in the workers).
    """
    if client is None:
        return {}
    activity: dict[str, int] = {}
    limiters: list[Any] = [getattr(one, "limiter", None) for one in getattr(client, "clients", [client])]  # per role
    if limiters and None not in limiters:
        activity["in_flight"] = sum(int(limiter.active) for limiter in limiters)
        limits = [getattr(limiter, "limit", None) for limiter in limiters]
        if all(isinstance(limit, int) for limit in limits):  # learned from the endpoints (llm/limit.py)
            activity["limit"] = sum(limit for limit in limits if isinstance(limit, int))
    if isinstance(getattr(client, "waiting", None), int):  # the model layer's count of requests between retries
        activity["waiting"] = client.waiting
    stats = client.stats.snapshot() if hasattr(client, "stats") else {}
    if stats.get("cache_hits") is not None:
        activity["cache_hits"] = stats["cache_hits"]
    return activity


def terminal_stream(config: pytest.Config) -> Any:
    """A handle on the real standard output, which pytest's output capture (dup2 of fd 1 during each
    test) does not reach: the progress line is drawn from a background thread while tests wait."""
    try:
        return os.fdopen(os.dup(config.get_terminal_writer()._file.fileno()), "w", encoding="utf-8",
                         errors="replace", closefd=True)
    except (AttributeError, OSError, ValueError):
        return None
