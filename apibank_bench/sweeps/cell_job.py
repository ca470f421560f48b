"""One cell of a sweep: its settings checked and planned, its `run` command line, its folder and status.

Each cell is `python -m apibank_bench run --out-dir DIR/<axis=value,...>` in a subprocess: the
very code path of `run`, with a fresh interpreter per cell (pytest keeps plugins, stashes and
imported modules in the process, so repeated in-process `pytest.main` calls would share state), and
the cell's exit code and log (`run.log` in the cell) stay its own. Where that subprocess runs is the
executor's business (`sweeps/executors/`); the cell job (`CellJob`) is the same everywhere.

A cell whose summary.json is complete and records the cell's settings is skipped; one that is
incomplete, or ran a different selection, is resumed. Settings that change how a run is carried out
but not what it measures (role `operational` in the settings table: endpoints, concurrency, timeouts,
cache) may differ.
A cell folder holding a run with other measured settings is refused before anything runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from apibank_bench.core import settings
from apibank_bench.core.exit_codes import ExitCode
from apibank_bench.core.paths import import_root
from apibank_bench.runs.folder import stored_settings
from apibank_bench.runs.results import RESULTS, SUMMARY, read_summary
from apibank_bench.runs.summary import counts_text
from apibank_bench.sweeps.grid import Cell, SweepError
from apibank_bench.sweeps.ledger import SUBMITTING

LOG = "run.log"
#: Settings the sweep sets itself (the table gives them no `sweep` flag).
NOT_FLAGS = tuple(setting.name for setting in settings.RUN_SETTINGS if "sweep" not in setting.commands)


def effective(given: Mapping[str, Any]) -> dict[str, Any]:
    """The values as `run` passes them on: no --limit means settings.RUN_DEFAULT_LIMIT, --limit 0 means all."""
    values = dict(given)
    try:
        values["limit"] = settings.run_limit(values.get("limit"))
    except ValueError:
        pass  # `settings.resolve` names the bad value
    return values


def _json(value: Any) -> Any:
    return json.loads(json.dumps(value))


def cell_summary(path: Path) -> dict | None:
    """A cell's summary; an unreadable one counts as none (the cell is resumed)."""
    try:
        return read_summary(path)
    except (OSError, ValueError):
        return None


#: The base URL a cell's settings are checked with when an endpoint command gives each cell its own (known
#: only where the cell runs): the check that a model name has an endpoint then holds (the URL is operational).
OWN_ENDPOINT = "http://the-cells-own-endpoint.invalid/v1"


def plan(cell: Cell, own_endpoint: bool = False) -> None:
    """Resolve the cell's settings, once (a bad value is a SweepError), and decide from its folder:
    run, resume or skip. `own_endpoint`: an endpoint command gives the cell its endpoint when it runs."""
    if cell.cfg is None:
        try:
            values = effective(cell.given)
            if own_endpoint and not values.get("base_url"):
                values["base_url"] = [OWN_ENDPOINT]
            cell.cfg = settings.resolve(lambda s: values.get(s.name))  # its models checked: a role the cell's
            # topology does not have, a local:PATH that is missing (agents.models.check_models)
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
    environ = {**os.environ, **secret_env}  # the cell's process: this one's environment, this very package first
    environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(import_root()), environ.get("PYTHONPATH")]))
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
        from apibank_bench.runs.setting_rules import hand_down

        hand_down()  # on a Slurm node this is the process's composition root (no CLI loaded it)
        cell = Cell({}, dict(self.given), Path(self.path), cfg=self.cfg)
        plan(cell, bool(self.endpoint_command))  # again, now: an earlier job may have left results to resume
        if cell.skip:
            return ExitCode.OK
        if not self.endpoint_command:
            return run_cell(cell, self.workers)
        from apibank_bench.sweeps.node_endpoint import EndpointStartError, node_endpoint

        try:
            with node_endpoint(self.endpoint_command, cell.path, self.endpoint_wait) as url:
                return run_cell(cell, self.workers, base_url=url)
        except EndpointStartError as exc:
            with open(cell.path / LOG, "a", encoding="utf-8") as log:
                log.write(f"sweep: the cell's endpoint did not start: {exc}\n")
            return ExitCode.UNREACHABLE  # its endpoint command gave no endpoint, as `run`'s unreachable


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
