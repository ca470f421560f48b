"""Running a sweep: a grid of runs, one ordinary results folder per cell (its tables: reports/sweep_table.py).

A comma-separated value of a run setting is an axis; the grid is every combination of the axes,
in the order of the settings table. List settings (`base_url`, `only`: their values are comma
separated already), switches and JSON objects (`extra_body`) are never axes. Every combination is
run, also where an axis changes nothing (the team size of `single`): such cells repeat a run,
and with the response cache on they cost no model calls.

Each cell is `python -m apibank_bench run --out-dir DIR/<axis=value,...>` in a subprocess: the
very code path of `run`, with a fresh interpreter per cell (pytest keeps plugins, stashes and
imported modules in the process, so repeated in-process `pytest.main` calls would share state), and
the cell's exit code and log (`run.log` in the cell) stay its own.

A cell whose summary.json is complete and records the cell's settings is skipped; one that is
incomplete, or ran a different selection, is resumed. Settings that change how a run is carried out
but not what it measures (role `operational` in the settings table: endpoints, concurrency, timeouts,
cache) may differ.
A cell folder holding a run with other measured settings is refused before anything runs.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from apibank_bench.core import settings
from apibank_bench.core.paths import require_root
from apibank_bench.runs.folder import stored_settings
from apibank_bench.runs.results import RESULTS, SUMMARY, read_summary, write_atomic

LOG = "run.log"
#: Settings the sweep sets itself.
NOT_FLAGS = ("out_dir", "resume", "overwrite")


class SweepError(ValueError):
    """A bad grid or a cell folder that belongs to another run (usage: exit 2)."""


def can_be_axis(setting: settings.Setting) -> bool:
    return not (setting.many or setting.flag or setting.parse is settings.parse_json_object)


def axes_of(given: Mapping[str, Any]) -> dict[str, list[str]]:
    """{setting name: its values} for each given value with a comma, in the table's order."""
    axes = {}
    for setting in settings.SETTINGS:
        raw = given.get(setting.name)
        if raw is None or not can_be_axis(setting) or "," not in str(raw):
            continue
        values = [value.strip() for value in str(raw).split(",")]
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

    @property
    def label(self) -> str:
        return ", ".join(f"{name}={value}" for name, value in self.values.items()) or "(no axes)"


def folder_name(values: Mapping[str, str]) -> str:
    return _UNSAFE.sub("_", ",".join(f"{name}={value}" for name, value in values.items())) or "run"


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
    """Resolve the cell's settings (a bad value is a SweepError) and decide: run, resume or skip."""
    try:
        values = effective(cell.given)
        cell.cfg = settings.resolve(lambda s: values.get(s.name))
    except ValueError as exc:
        raise SweepError(f"cell {cell.label}: {str(exc).replace('--apibank-', '--')}") from None
    summary = cell_summary(cell.path)
    stored = stored_settings(cell.path)  # also there for a run killed before its summary
    if summary is None and stored is None:
        cell.resume = (cell.path / RESULTS).is_file()  # a run killed before it recorded anything: resume it
        return
    if stored is None:
        raise SweepError(f"{cell.path} holds results that are not a run (no config.run in {SUMMARY}); "
                         "move it away or choose another --out")
    wanted = _json(cell.cfg.to_dict())
    role = {name: settings.BY_NAME[name].role for name in wanted}
    differ = sorted(name for name in wanted if role[name] != settings.OPERATIONAL and stored.get(name) != wanted[name])
    measured = [name for name in differ if role[name] == settings.MEASUREMENT]
    if measured:
        detail = ", ".join(f"{name} {stored.get(name)!r} (the sweep wants {wanted[name]!r})" for name in measured)
        raise SweepError(f"{cell.path} holds a run with other settings: {detail}; move it away or choose another --out")
    cell.summary = summary
    cell.skip = bool(summary and summary.get("complete")) and not differ
    cell.resume = not cell.skip


def command_flags(given: Mapping[str, Any]) -> tuple[list[str], dict[str, str]]:
    """`run` flags for the given raw values, and the environment for secret ones (kept off the command line)."""
    secret = {s.name for s in settings.SETTINGS if s.secret}
    environ = {settings.BY_NAME[name].env_names[0]: str(given[name]) for name in secret if given.get(name) is not None}
    flags = {name: value for name, value in given.items() if name not in secret and name not in NOT_FLAGS}
    return settings.pytest_argv(flags, prefix="--"), environ


def run_cell(cell: Cell, workers: str | None = None) -> int:
    """`apibank-bench run` for one cell in a fresh interpreter of this very package; output to the cell's log."""
    given = dict(cell.given)
    if given.get("limit") is None:
        given["limit"] = settings.RUN_DEFAULT_LIMIT  # explicit, so the log's command line says it
    flags, secret_env = command_flags(given)
    argv = [sys.executable, "-m", "apibank_bench", "run", "--out-dir", str(cell.path.resolve()), *flags]
    if cell.resume:
        argv.append("--resume")
    if workers:
        argv += ["-n", str(workers)]
    package_parent = str(Path(__file__).resolve().parents[2])
    environ = {**os.environ, **secret_env,
               "PYTHONPATH": os.pathsep.join(filter(None, [package_parent, os.environ.get("PYTHONPATH")]))}
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


def cell_result(summary: dict | None) -> str:
    if summary is None:
        return "no results"
    text = f"accuracy {summary['accuracy']:.1%} ({summary['correct']}/{summary['total']}), {summary['errors']} errors"
    return text + ("" if summary.get("complete") else ", INCOMPLETE")


def status(cell: Cell) -> str:
    if cell.summary is None:
        return "not run"
    return "complete" if cell.summary.get("complete") else "incomplete"


def _say(line: str) -> None:
    print(line, flush=True)


def run_sweep(given: Mapping[str, Any], out: Path, workers: str | None = None,
              say: Callable[[str], None] = _say) -> tuple[dict[str, list[str]], list[Cell], bool]:
    """Check every cell, then run the unfinished ones; (axes, cells, interrupted)."""
    axes, cells = expand(given, out)
    for cell in cells:
        plan(cell)
    for root in {cell.cfg.root for cell in cells}:
        require_root(root)  # a missing data root fails here, not once per cell
    total = len(cells)
    try:
        for index, cell in enumerate(cells, start=1):
            head = f"sweep: cell {index}/{total} [{cell.label}]"
            if cell.skip:
                say(f"{head} complete, skipped: {cell_result(cell.summary)}")
                continue
            say(f"{head} {'resumed' if cell.resume else 'started'} -> {cell.path}")
            code = run_cell(cell, workers)
            cell.summary = cell_summary(cell.path)
            say(f"{head} finished (exit {code}): {cell_result(cell.summary)}")
    except KeyboardInterrupt:
        return axes, cells, True
    return axes, cells, False
