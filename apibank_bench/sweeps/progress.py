"""What a person sees of a sweep (`SweepProgress`).

Before anything runs, one warning per (topology, team setting) for an axis that a topology does not
read (its cells are repeats); a line per cell event (started, submitted, finished, skipped); and one
progress line (core/progress.py: redrawn in place on a terminal, a plain line every
`PROGRESS_EVERY_S` and after each cell otherwise) with the cells done, the cells running or queued
(a running cell's rows counted in its results.jsonl) and an ETA. A local cell's own output goes to
its run.log, so nothing else writes to the sweep's screen.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from apibank_bench.core.progress import ProgressLine, duration, eta
from apibank_bench.data.manifests import select
from apibank_bench.runs.epochs import row_key, run_cases
from apibank_bench.runs.results import RESULTS
from apibank_bench.sweeps.cell_job import status
from apibank_bench.sweeps.grid import Cell

PROGRESS_EVERY_S = 30.0  #: a plain progress line (not a terminal) at most this often: a sweep runs for hours
SHOWN_CELLS = 2  #: running or queued cells the progress line names; the rest it counts


def cell_cases(cfg: Any) -> int | None:
    """How many rows the cell's run writes: its selection's cases (as BenchmarkRun selects them)."""
    try:
        return len(run_cases(select(cfg.level, cfg.limit, cfg.offset, cfg.only or None), cfg.epochs, cfg.shard))
    except (OSError, ValueError):
        return None  # the cell's run names the problem


class RowCount:
    """The (instance, epoch) rows in a cell's results.jsonl, read on from where the last look stopped."""

    def __init__(self, folder: Path) -> None:
        self.path, self.offset = folder / RESULTS, 0
        self.keys: set[tuple[str, int]] = set()

    def __call__(self) -> int:
        try:
            with open(self.path, "rb") as handle:
                if os.fstat(handle.fileno()).st_size < self.offset:  # cut (a torn line dropped) or emptied
                    self.offset, self.keys = 0, set()
                handle.seek(self.offset)
                for raw in handle:
                    if not raw.endswith(b"\n"):
                        break  # a line still being written: the next look reads it whole
                    self.offset += len(raw)
                    try:
                        self.keys.add(row_key(json.loads(raw)))
                    except (ValueError, KeyError, TypeError):
                        continue
        except OSError:
            pass  # no results yet
        return len(self.keys)


class SweepProgress:
    """What a person sees of a sweep: its own lines (`say`), never tangled with one progress line
    (`render`) of the cells done, those running or queued, and the time left."""

    def __init__(self, cells: list[Cell], stream: TextIO | None = None, live: bool | None = None) -> None:
        self.cells = cells
        self.names = {cell.path.name: f"cell {index}/{len(cells)} [{cell.label}]"
                      for index, cell in enumerate(cells, start=1)}
        self.todo: set[str] = set()  #: the cells this sweep runs or waits for
        self.here: set[str] = set()  #: of them, the one running in this process (the local executor)
        self.done: set[str] = set()  #: of them, the ones whose run or job has ended
        self.rows: dict[str, RowCount] = {}
        self.cases: dict[str, int | None] = {}
        self.seen: dict[str, int] = {}  #: each cell's rows at the last look
        self.first: dict[str, int] = {}  #: its rows when the sweep began (what an earlier run left)
        self.started = time.time()
        self._lock = threading.RLock()
        self.line = ProgressLine(self.render, stream, live, every_s=PROGRESS_EVERY_S)
        self.watching = False

    def head(self, cell: Cell) -> str:
        return f"sweep: {self.names[cell.path.name]}"

    def say(self, text: str) -> None:
        if self.watching:
            self.line.say(text)
        else:  # no progress line yet: nothing to keep clear of
            self.line.stream.write(text + "\n")
            self.line.stream.flush()

    def start(self, claimed: list[Cell]) -> None:
        """Follow the claimed cells and those that earlier jobs hold; the line from now on."""
        with self._lock:
            self.todo = {cell.path.name for cell in claimed} | {cell.path.name for cell in self.cells if cell.job}
            for cell in self.cells:
                if cell.path.name in self.todo:
                    self.rows[cell.path.name] = RowCount(cell.path)
                    self.cases[cell.path.name] = cell_cases(cell.cfg)
                    self.first[cell.path.name] = self.look(cell)
            self.started = time.time()
        self.watching = True
        self.line.start()

    def stop(self) -> None:
        self.watching = False
        self.line.stop()

    def running_here(self, cell: Cell, text: str) -> None:
        with self._lock:
            self.here.add(cell.path.name)
        self.say(text)

    def ended(self, cell: Cell, text: str) -> None:
        with self._lock:
            self.here.discard(cell.path.name)
            self.done.add(cell.path.name)
            if cell.path.name in self.rows:
                self.look(cell)
        self.say(text)
        self.line.update(force=True)  # also into a log: where the sweep is after each cell

    def look(self, cell: Cell) -> int:
        self.seen[cell.path.name] = self.rows[cell.path.name]()
        return self.seen[cell.path.name]

    def share(self, name: str, rows: int) -> float:
        """The share of a cell's rows written (0 where its size is unknown)."""
        total = self.cases.get(name)
        return min(rows / total, 1.0) if total else 0.0

    def render(self) -> str:
        with self._lock:
            finished = [cell for cell in self.cells if cell.path.name not in self.todo or cell.path.name in self.done]
            complete = sum(status(cell) == "complete" for cell in finished)
            running, queued, waiting = [], [], 0
            for cell in self.cells:
                name = cell.path.name
                if name not in self.todo or name in self.done:
                    continue
                if name in self.here or status(cell) == "running":
                    self.look(cell)
                    running.append(cell)
                elif cell.job:
                    queued.append(cell)
                else:
                    waiting += 1
            elapsed = time.time() - self.started
            left = self.time_left(elapsed)
            parts = [f"{len(finished)}/{len(self.cells)} cells done ({complete} complete, "
                     f"{len(finished) - complete} incomplete)",
                     f"elapsed {duration(elapsed)}" + ("" if left is None else f", ETA {left}")]
            if running:  # the long parts last: a terminal's line is cut to its width
                parts.append("running " + self.listed(running, rows=True))
            if queued:
                parts.append("queued " + self.listed(queued))
            if waiting:
                parts.append(f"{waiting} to run")
            return "sweep: " + " · ".join(parts)

    def listed(self, cells: list[Cell], rows: bool = False) -> str:
        shown = []
        for cell in cells[:SHOWN_CELLS]:
            name, total = cell.path.name, self.cases.get(cell.path.name)
            unit = "instances" if cell.cfg.epochs == 1 else "cases"
            count = f" {min(self.seen.get(name, 0), total)}/{total} {unit}" if rows and total else ""
            shown.append(self.names[name] + count)
        more = f" and {len(cells) - SHOWN_CELLS} more" if len(cells) > SHOWN_CELLS else ""
        return ", ".join(shown) + more

    def time_left(self, elapsed: float) -> str | None:
        """At this sweep's rate so far, in cells (a running cell counts by its share of rows written;
        rows an earlier run left are not this sweep's work)."""
        gone = left = 0.0
        for name in self.todo:
            now = 1.0 if name in self.done else self.share(name, self.seen.get(name, 0))
            gone += now - self.share(name, self.first.get(name, 0))
            left += 0.0 if name in self.done else 1.0 - now
        return eta(gone, gone + left, elapsed) if gone > 0 and left > 0 else None