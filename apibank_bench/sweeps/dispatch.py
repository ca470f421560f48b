"""A sweep's course: check every cell, claim the unfinished ones, submit them, wait for their jobs.

The executor (`sweeps/executors/`: here, one after another, or a Slurm array job) runs the cell
jobs; the job ledger (`sweeps/ledger.py`, `DIR/jobs.json`) keeps a cell from being submitted while
an earlier job of it is still queued or running. `run_sweep` does all of it; `sweep_status` only
looks.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Mapping, TextIO

from apibank_bench.core import settings
from apibank_bench.core.paths import require_root
from apibank_bench.sweeps.cell_job import CellJob, cell_result, cell_summary, plan
from apibank_bench.sweeps.grid import Cell, SweepError, expand
from apibank_bench.sweeps.ledger import ENDED, SUBMITTING, Ledger, claim_alive, this_process
from apibank_bench.sweeps.progress import SweepProgress

POLL_S = 10.0  #: seconds between looks at queued and running jobs while a sweep waits


def prepare(given: Mapping[str, Any], out: Path, sweep: Any = None) -> tuple[dict[str, list[str]], list[Cell]]:
    """The grid, every cell's settings checked and planned (run, resume or skip)."""
    axes, cells = expand(given, out)
    for cell in cells:
        plan(cell, own_endpoint=bool(getattr(sweep, "endpoint_command", None)))
    for root in {cell.cfg.root for cell in cells}:
        require_root(root)  # a missing data root fails here, not once per cell
    return axes, cells


def make_executor(name: str, sweep: Any, out: Path):
    from apibank_bench.sweeps.executors import EXECUTORS

    try:
        return EXECUTORS.get(name)(sweep, out)
    except ValueError as exc:
        raise SweepError(str(exc)) from None


def held_jobs(records: Mapping[str, dict], sweep: Any, out: Path) -> dict[str, str]:
    """{cell folder: "STATE job-id"} for the cells whose recorded job is still queued or running
    (or which another live sweep is submitting); each engine is asked about its own jobs."""
    me, held = this_process(), {}
    by_engine: dict[str, dict[str, str]] = {}  #: {engine: {cell folder: job ID}}
    for name, entry in records.items():
        job_id, state = entry.get("job_id") or "", entry.get("state") or ""
        if job_id == me or ended(entry):
            continue  # this sweep does not wait for itself
        if state == SUBMITTING:
            if claim_alive(entry):
                held[name] = f"{SUBMITTING} {job_id}"
            continue
        by_engine.setdefault(entry.get("executor") or "local", {})[name] = job_id
    for engine, jobs in by_engine.items():
        try:
            live = make_executor(engine, sweep, out).active(sorted(set(jobs.values())))
        except RuntimeError as exc:  # the engine cannot be asked: never guess that a job has gone
            raise SweepError(f"cannot tell whether earlier jobs still hold cells: {exc}") from None
        held.update({name: f"{live[job_id]} {job_id}" for name, job_id in jobs.items() if job_id in live})
    return held


def ended(entry: Mapping[str, Any]) -> bool:
    return str(entry.get("state") or "").startswith(ENDED)


def claim(cells: list[Cell], sweep: Any, out: Path, ledger: Ledger) -> list[Cell]:
    """Under the ledger's lock: mark the cells that a live job holds (`cell.job`) and claim the
    unfinished others for this sweep; the claimed cells."""
    me, claimed = this_process(), []
    with ledger.change() as records:
        held = held_jobs(records, sweep, out)
        for cell in cells:
            cell.job = held.get(cell.path.name)
            if cell.skip or cell.job:
                continue
            entry = records.setdefault(cell.path.name, {"submissions": 0})
            entry.update(executor=sweep.executor, job_id=me, state=SUBMITTING, at=time.time())
            claimed.append(cell)
    return claimed


def submit(cells: list[Cell], given: Mapping[str, Any], workers: str | None, sweep: Any, out: Path, ledger: Ledger,
           view: "SweepProgress") -> None:
    """Hand the claimed cells to the executor; every job ID and state it reports goes to the ledger."""
    if not cells:
        return
    engine = make_executor(sweep.executor, sweep, out)
    by_path = {str(cell.path.resolve()): cell for cell in cells}
    jobs = [CellJob({**given, **cell.values}, path, view.head(cell), workers, sweep.endpoint_command,
                    sweep.endpoint_wait, cfg=cell.cfg) for path, cell in by_path.items()]

    def recorded(job: CellJob, job_id: str, state: str) -> None:
        cell = by_path[job.path]
        ledger.record(cell.path.name, engine.name, job_id, state, submitted=not state.startswith(ENDED))
        if state == "RUNNING" and not engine.waits:
            view.running_here(cell, f"{job.label} {'resumed' if cell.resume else 'started'} -> {cell.path}")
        elif state.startswith(ENDED):
            cell.summary, cell.job = cell_summary(cell.path), None
            view.ended(cell, f"{job.label} finished ({state[len(ENDED):].strip()}): {cell_result(cell.summary)}")
        else:
            cell.job = f"{state} {job_id}"
            view.say(f"{job.label} {'resume' if cell.resume else 'run'} submitted as {engine.name} job {job_id} "
                     f"-> {cell.path}")

    try:
        engine.submit(jobs, recorded)
    except RuntimeError as exc:
        raise SweepError(f"{engine.name}: {exc}") from None
    finally:  # a claim that got no job (a failed or interrupted submission) is let go
        with ledger.change() as records:
            for cell in cells:
                entry = records.get(cell.path.name) or {}
                if entry.get("state") == SUBMITTING and entry.get("job_id") == this_process():
                    entry["state"] = f"{ENDED} not submitted"


def wait_for(cells: list[Cell], sweep: Any, out: Path, ledger: Ledger, view: "SweepProgress") -> None:
    """Until no job holds any cell: record each job's state, and say when one has ended."""
    names = {cell.path.name: cell for cell in cells}
    while True:
        with ledger.change() as records:
            mine = {name: records[name] for name in names if name in records}
            held = held_jobs(mine, sweep, out)
            for name, entry in mine.items():
                cell = names[name]
                if name in held:
                    entry["state"] = held[name].split(" ", 1)[0]
                elif cell.job is not None and not ended(entry) and entry.get("job_id") != this_process():
                    entry["state"] = f"{ENDED} ({cell.job.split(' ', 1)[0].lower()} when last seen)"
                    cell.summary, cell.job = cell_summary(cell.path), None
                    view.ended(cell, f"{view.head(cell)} job {entry.get('job_id')} ended: {cell_result(cell.summary)}")
                cell.job = held.get(name)
        if not held:
            return
        time.sleep(POLL_S)


def repeat_warnings(given: Mapping[str, Any], axes: Mapping[str, list[str]], cells: list[Cell]) -> list[str]:
    """One warning per (topology, team setting) where an axis is a setting the topology does not read
    (agents.topologies: the run's own warning): those cells repeat one run."""
    from apibank_bench.agents.topologies import TEAM_SETTINGS, unread_settings, what_it_reads

    team_axes = [name for name in axes if name in TEAM_SETTINGS]
    if not team_axes:
        return []  # and the topologies (LangGraph) are not imported
    found = dict.fromkeys((cell.cfg.topology, name) for cell in cells
                          for name in unread_settings(cell.cfg.topology, team_axes))
    cache = ("with the cache on they make no model calls" if all(cell.cfg.cache for cell in cells)
             else "the cache is off, so they ask the model again")
    flag = settings.flag
    return [f"sweep: warning: {flag(name)} {given[name]} changes nothing for {flag('topology')} {topology} "
            f"(it {what_it_reads(topology)}): those cells are repeats ({cache})" for topology, name in found]


def run_sweep(given: Mapping[str, Any], out: Path, workers: str | None = None, sweep: Any = None,
              wait: bool = True, stream: TextIO | None = None,
              live: bool | None = None) -> tuple[dict[str, list[str]], list[Cell], bool]:
    """Check every cell, submit the unfinished ones that no job holds, and (unless not `wait`) wait
    until no job holds any; (axes, cells, interrupted). What it says goes to `stream` (standard
    output), with a progress line redrawn in place if `live` (default: whether it is a terminal)."""
    sweep = sweep if sweep is not None else settings.resolve_sweep()
    axes, cells = prepare(given, out, sweep)
    ledger = Ledger(out)
    view = SweepProgress(cells, stream, live)
    for warning in repeat_warnings(given, axes, cells):
        view.say(warning)
    interrupted = False
    try:
        with settings.secrets_in_environment(given) as plain:
            claimed = claim(cells, sweep, out, ledger)
            for cell in cells:
                if cell.skip:
                    view.say(f"{view.head(cell)} complete, skipped: {cell_result(cell.summary)}")
                elif cell.job:
                    state, job_id = cell.job.split(" ", 1)
                    view.say(f"{view.head(cell)} {state.lower()} as job {job_id}: not submitted again")
            view.start(claimed)
            submit(claimed, plain, workers, sweep, out, ledger, view)
            if wait:
                wait_for(cells, sweep, out, ledger, view)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        view.stop()
    for cell in cells:
        cell.summary = cell_summary(cell.path)
    return axes, cells, interrupted


def sweep_status(given: Mapping[str, Any], out: Path, sweep: Any = None) -> tuple[dict[str, list[str]], list[Cell]]:
    """The grid with each cell's results and the job (if any) that still holds it; submits nothing."""
    sweep = sweep if sweep is not None else settings.resolve_sweep()
    axes, cells = prepare(given, out, sweep)
    held = held_jobs(Ledger(out).read(), sweep, out)
    for cell in cells:
        cell.job = held.get(cell.path.name)
    return axes, cells
