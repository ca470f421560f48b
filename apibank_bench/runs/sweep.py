"""Running a sweep: a grid of runs, one ordinary results folder per cell (its tables: reports/sweep_table.py).

A comma-separated value of a run setting is an axis; the grid is every combination of the axes,
in the order of the settings table. List settings (`base_url`, `only`: their values are comma
separated already), switches and JSON objects (`extra_body`) are never axes. Every combination is
run, also where an axis changes nothing (the team size of `single`): such cells repeat a run,
and with the response cache on they cost no model calls.

Each cell is `python -m apibank_bench run --out-dir DIR/<axis=value,...>` in a subprocess: the
very code path of `run`, with a fresh interpreter per cell (pytest keeps plugins, stashes and
imported modules in the process, so repeated in-process `pytest.main` calls would share state), and
the cell's exit code and log (`run.log` in the cell) stay its own. Where that subprocess runs is the
executor's business (`runs/executors/`: here, one after another, or a Slurm array job); the cell
job (`CellJob`) is the same everywhere, and the job ledger (`runs/jobs.py`, `DIR/jobs.json`)
keeps a cell from being submitted while an earlier job of it is still queued or running.

A cell whose summary.json is complete and records the cell's settings is skipped; one that is
incomplete, or ran a different selection, is resumed. Settings that change how a run is carried out
but not what it measures (role `operational` in the settings table: endpoints, concurrency, timeouts,
cache) may differ.
A cell folder holding a run with other measured settings is refused before anything runs.

What a person sees (`SweepProgress`): before anything runs, one warning per (topology, team setting)
for an axis that a topology does not read (its cells are repeats); a line per cell event (started,
submitted, finished, skipped); and one progress line (core/progress.py: redrawn in place on a
terminal, a plain line every `PROGRESS_EVERY_S` and after each cell otherwise) with the cells done,
the cells running or queued (a running cell's rows counted in its results.jsonl) and an ETA. A
local cell's own output goes to its run.log, so nothing else writes to the sweep's screen.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, TextIO

from apibank_bench.core import settings
from apibank_bench.core.paths import require_root
from apibank_bench.core.progress import ProgressLine, duration, eta
from apibank_bench.data.manifests import select
from apibank_bench.runs.epochs import row_key, run_cases
from apibank_bench.runs.jobs import ENDED, SUBMITTING, Ledger, claim_alive, this_process
from apibank_bench.runs.folder import stored_settings
from apibank_bench.runs.results import RESULTS, SUMMARY, read_summary
from apibank_bench.runs.summary import counts_text

LOG = "run.log"
ENDPOINT_FAILED = 3  #: a cell's exit code when its endpoint command gave no endpoint (as `run`'s unreachable)
POLL_S = 10.0  #: seconds between looks at queued and running jobs while a sweep waits
PROGRESS_EVERY_S = 30.0  #: a plain progress line (not a terminal) at most this often: a sweep runs for hours
SHOWN_CELLS = 2  #: running or queued cells the progress line names; the rest it counts
#: Settings the sweep sets itself (the table gives them no `sweep` flag).
NOT_FLAGS = tuple(setting.name for setting in settings.RUN_SETTINGS if "sweep" not in setting.commands)


class SweepError(ValueError):
    """A bad grid or a cell folder that belongs to another run (usage: exit 2)."""


def can_be_axis(setting: settings.Setting) -> bool:
    return not (setting.many or setting.flag or setting.parse is settings.parse_json_object)


#: The axis separator of a repeatable list setting (`--model-role`), whose values hold commas themselves.
LIST_AXIS = ";"


def axis_values(setting: settings.Setting, raw: Any) -> list[str] | None:
    """The values of an axis in `raw` (None: not an axis): comma separated, or for a repeatable list
    setting `;` separated (each alternative a list of its own: `final=B@URL;-`)."""
    if setting.repeat:
        text = " ".join(raw) if isinstance(raw, (list, tuple)) else str(raw)
        return [value.strip() for value in text.split(LIST_AXIS)] if LIST_AXIS in text else None
    if not can_be_axis(setting) or "," not in str(raw):
        return None
    return [value.strip() for value in str(raw).split(",")]


def axis_label(name: str, value: str) -> str:
    """An axis value as a cell's label and folder show it: a role's model without its endpoint (operational)."""
    if not settings.BY_NAME[name].repeat or name != "model_role":
        return value
    try:
        parts = [settings.model_role_parts(item) for item in settings.parse_model_roles(value)]
    except ValueError:
        return value  # resolving the cell names the bad value

    return " ".join(f"{role}={model}" for role, model, _ in parts) or settings.NO_ROLE_MODELS


def axes_of(given: Mapping[str, Any]) -> dict[str, list[str]]:
    """{setting name: its values} for each given value with a comma (`;` for `--model-role`), in the table's order."""
    axes = {}
    for setting in settings.RUN_SETTINGS:
        raw = given.get(setting.name)
        values = None if raw is None else axis_values(setting, raw)
        if values is None:
            continue
        if "" in values:
            raise SweepError(f"--{setting.name.replace('_', '-')} {raw}: an empty value in the axis")
        if len(set(values)) < len(values):
            raise SweepError(f"--{setting.name.replace('_', '-')} {raw}: a value repeats in the axis")
        axes[setting.name] = values
    return axes


def effective(given: Mapping[str, Any]) -> dict[str, Any]:
    """The values as `run` passes them on: no --limit means settings.RUN_DEFAULT_LIMIT, --limit 0 means all."""
    values = dict(given)
    try:
        values["limit"] = settings.run_limit(values.get("limit"))
    except ValueError:
        pass  # `settings.resolve` names the bad value
    return values


_UNSAFE = re.compile(r"[^A-Za-z0-9._=,+-]")


@dataclass
class Cell:
    values: dict[str, str]  #: this cell's value of each axis
    given: dict[str, Any]  #: every setting's raw value for this cell (None = not given)
    path: Path
    cfg: Any = None  #: its resolved settings (a RunConfig)
    resume: bool = False
    skip: bool = False
    summary: dict | None = field(default=None, repr=False)
    job: str | None = None  #: "STATE job-id" of a job that holds the cell (queued or running)

    @property
    def label(self) -> str:
        return ", ".join(f"{name}={axis_label(name, value)}" for name, value in self.values.items()) or "(no axes)"


def folder_name(values: Mapping[str, str]) -> str:
    return _UNSAFE.sub("_", ",".join(f"{name}={axis_label(name, value)}" for name, value in values.items())) or "run"


def expand(given: Mapping[str, Any], out: Path) -> tuple[dict[str, list[str]], list[Cell]]:
    """The axes and the cells of the grid (not yet checked)."""
    axes = axes_of(given)
    cells = []
    for combination in itertools.product(*axes.values()):
        values = dict(zip(axes, combination))
        cells.append(Cell(values, {**given, **values}, Path(out) / folder_name(values)))
    names = [cell.path.name for cell in cells]
    if len(set(names)) < len(names):
        raise SweepError("two cells would share a folder name; use axis values that differ in letters or digits")
    return axes, cells


def _json(value: Any) -> Any:
    return json.loads(json.dumps(value))


def cell_summary(path: Path) -> dict | None:
    """A cell's summary; an unreadable one counts as none (the cell is resumed)."""
    try:
        return read_summary(path)
    except (OSError, ValueError):
        return None


def plan(cell: Cell) -> None:
    """Resolve the cell's settings, once (a bad value is a SweepError), and decide from its folder:
    run, resume or skip."""
    if cell.cfg is None:
        try:
            values = effective(cell.given)
            cell.cfg = settings.resolve(lambda s: values.get(s.name))
            if not cell.cfg.is_gold:
                from apibank_bench.agents.model_roles import check_assignments

                check_assignments(cell.cfg)  # a role the cell's topology does not have
        except ValueError as exc:
            raise SweepError(f"cell {cell.label}: {exc}") from None  # the CLI's voice: `--team-size`
    summary = cell_summary(cell.path)
    stored = stored_settings(cell.path)  # also there for a run killed before its summary
    if summary is None and stored is None:
        cell.resume = (cell.path / RESULTS).is_file()  # a run killed before it recorded anything: resume it
        return
    if stored is None:
        raise SweepError(f"{cell.path} holds results that are not a run (no config.run in {SUMMARY}); "
                         "move it away or choose another --out")
    wanted = _json(cell.cfg.to_dict())
    differ = settings.differences(stored, wanted)
    measured = differ[settings.MEASUREMENT]
    if measured:
        detail = ", ".join(f"{name} {stored.get(name)!r} (the sweep wants {wanted[name]!r})" for name in measured)
        raise SweepError(f"{cell.path} holds a run with other settings: {detail}; move it away or choose another --out")
    cell.summary = summary
    cell.skip = bool(summary and summary.get("complete")) and not (measured or differ[settings.SELECTION])
    cell.resume = not cell.skip


def command_flags(given: Mapping[str, Any]) -> tuple[list[str], dict[str, str]]:
    """`run` flags for the given raw values, and the environment for secret ones (kept off the command line)."""
    secret = {s.name for s in settings.SETTINGS if s.secret}
    environ = {settings.BY_NAME[name].env_names[0]: str(given[name]) for name in secret if given.get(name) is not None}
    flags = {name: value for name, value in given.items() if name not in secret and name not in NOT_FLAGS}
    return settings.pytest_argv(flags, prefix="--"), environ


def run_cell(cell: Cell, workers: str | None = None, base_url: str | None = None) -> int:
    """`apibank-bench run` for one cell in a fresh interpreter of this very package; output to the cell's log."""
    given = dict(cell.given)
    if base_url:  # the cell's own endpoint
        given["base_url"] = [base_url]
    if given.get("limit") is None:
        given["limit"] = settings.RUN_DEFAULT_LIMIT  # explicit, so the log's command line says it
    flags, secret_env = command_flags(given)
    argv = [sys.executable, "-m", "apibank_bench", "run", "--out-dir", str(cell.path.resolve()), *flags]
    if cell.resume:
        argv.append("--resume")
    if workers:
        argv += ["-n", str(workers)]
    package_parent = str(Path(__file__).resolve().parents[2])
    environ = {**os.environ, **secret_env}  # the cell's process: this one's environment, this very package first
    environ["PYTHONPATH"] = os.pathsep.join(filter(None, [package_parent, environ.get("PYTHONPATH")]))
    cell.path.mkdir(parents=True, exist_ok=True)
    with open(cell.path / LOG, "a", encoding="utf-8") as log:
        log.write("$ " + " ".join(argv[1:]) + "\n")
        log.flush()
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=environ)
        try:
            return process.wait()
        except KeyboardInterrupt:  # Ctrl-C reached the cell too (one process group): let it write its summary
            process.wait()
            raise


@dataclass(frozen=True)
class CellJob:
    """One cell's run as plain data (no secrets: those travel in the environment), for any executor to
    ship; calling it runs the cell where it lands and returns the run's exit code."""

    given: dict[str, Any]
    path: str
    label: str
    workers: str | None = None
    endpoint_command: str | None = None
    endpoint_wait: float = settings.BY_NAME["endpoint_wait"].default
    #: The settings as the sweep resolved them, for a job run in the sweep's own process; never
    #: shipped (a pickle leaves it out: it may hold a secret), so a node resolves them once itself.
    cfg: Any = field(default=None, compare=False, repr=False)

    def __getstate__(self) -> dict:
        return {name: value for name, value in self.__dict__.items() if name != "cfg"}

    def __call__(self) -> int:
        cell = Cell({}, dict(self.given), Path(self.path), cfg=self.cfg)
        plan(cell)  # again, now: an earlier job of this cell may have left results to resume
        if cell.skip:
            return 0
        if not self.endpoint_command:
            return run_cell(cell, self.workers)
        from apibank_bench.runs.node_endpoint import EndpointStartError, node_endpoint

        try:
            with node_endpoint(self.endpoint_command, cell.path, self.endpoint_wait) as url:
                return run_cell(cell, self.workers, base_url=url)
        except EndpointStartError as exc:
            with open(cell.path / LOG, "a", encoding="utf-8") as log:
                log.write(f"sweep: the cell's endpoint did not start: {exc}\n")
            return ENDPOINT_FAILED


def cell_result(summary: dict | None) -> str:
    if summary is None:
        return "no results"
    text = f"accuracy {summary['accuracy']:.1%} ({counts_text(summary)}), {summary['errors']} errors"
    return text + ("" if summary.get("complete") else ", INCOMPLETE")


def status(cell: Cell) -> str:
    if cell.job is not None:
        return "queued" if cell.job.startswith(("PENDING", SUBMITTING)) else "running"
    if cell.summary is None:
        return "not run"
    return "complete" if cell.summary.get("complete") else "incomplete"


def prepare(given: Mapping[str, Any], out: Path) -> tuple[dict[str, list[str]], list[Cell]]:
    """The grid, every cell's settings checked and planned (run, resume or skip)."""
    axes, cells = expand(given, out)
    for cell in cells:
        plan(cell)
    for root in {cell.cfg.root for cell in cells}:
        require_root(root)  # a missing data root fails here, not once per cell
    return axes, cells


def make_executor(name: str, sweep: Any, out: Path):
    from apibank_bench.runs.executors import EXECUTORS

    try:
        return EXECUTORS.get(name)(sweep, out)
    except ValueError as exc:
        raise SweepError(str(exc)) from None


def held_jobs(records: Mapping[str, dict], sweep: Any, out: Path) -> dict[str, str]:
    """{cell folder: "STATE job-id"} for the cells whose recorded job is still queued or running
    (or which another live sweep is submitting); each engine is asked about its own jobs."""
    me, held, by_engine = this_process(), {}, {}
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
    axes, cells = prepare(given, out)
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
    axes, cells = prepare(given, out)
    held = held_jobs(Ledger(out).read(), sweep, out)
    for cell in cells:
        cell.job = held.get(cell.path.name)
    return axes, cells


def cell_cases(cfg: Any) -> int | None:
    """How many rows the cell's run writes: its selection's cases (as plugin/run.py selects them)."""
    try:
        return len(run_cases(select(cfg.level, cfg.limit, cfg.offset, cfg.only or None), cfg.epochs, cfg.shard))
    except (OSError, ValueError):
        return None  # the cell's run names the problem


class RowCount:
    """The (instance, epoch) rows in a cell's results.jsonl, read on from where the last look stopped."""

    def __init__(self, folder: Path) -> None:
        self.path, self.offset, self.keys = folder / RESULTS, 0, set()

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
