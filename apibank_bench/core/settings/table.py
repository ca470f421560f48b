"""The settings table: every setting of every command, declared once. A benchmark run's settings
are `RunConfig`'s fields (`run_config.py`); the settings of one command, not of a run, are below.
Both make `SETTINGS`, in the order of the flags, the pytest options and the docs table."""

from __future__ import annotations

from typing import Any, Mapping

from apibank_bench.core.settings.parsers import at_least, parse_bool, parse_json_object, parse_list, parse_urls
from apibank_bench.core.settings.run_config import RUN_SETTINGS
from apibank_bench.core.settings.setting import MEASUREMENT, OPERATIONAL, SELECTION, Setting

_OP, _SEL = OPERATIONAL, SELECTION
#: `optimize --method`: the optimizers of `optimize.methods.METHODS` (a test checks they agree).
METHODS = ("gepa", "mipro", "maspo")
#: `sweep --executor`: the engines that register with the sweep's executor registry (a test checks they agree).
EXECUTORS = ("local", "slurm")

#: The settings of one command, not of a benchmark run (no RunConfig field, pytest option or ini key).
COMMAND_SETTINGS: tuple[Setting, ...] = (
    Setting("workers", "pytest-xdist worker processes (e.g. 2 or auto); per cell for `sweep`", short="-n",
            role=_OP, of_run=False),
    Setting("data_base_url", "`data fetch` downloads each file from URL/<owner>/<repo>/<commit>/<path> (a mirror)",
            default="https://raw.githubusercontent.com", role=_OP, commands=("data",), of_run=False),
    Setting("downloads", "parallel downloads of `data fetch`", at_least(1), 8, role=_OP, commands=("data",),
            of_run=False),
    Setting("method", "the prompt optimizer", choices=METHODS,
            default_text="- (required)", commands=("optimize",), of_run=False),
    Setting("dataset", "accepted for the reference's command line (API-Bank is the only dataset)", default="apibank",
            choices=("apibank",), commands=("optimize",), of_run=False),
    Setting("model_aliases", "`NAME=MODEL` pairs overriding the experiment grid's model aliases", parse_list, [],
            commands=("optimize",), of_run=False),
    Setting("train", "training tasks (level-balanced, from the pool minus the eval set)", at_least(0), 50,
            role=_SEL, commands=("optimize", "manifests"), of_run=False),
    Setting("validation", "validation tasks (from the same pool)", at_least(0), 50, role=_SEL,
            commands=("optimize", "manifests"), of_run=False),
    Setting("eval_limit", "eval instances in optimize's final comparison of seed and optimized prompts",
            at_least(1), 100, role=_SEL, commands=("optimize",), of_run=False),
    Setting("budget", "the optimizer's budget (see docs/optimizing.md)", at_least(1),
            default_text="per method: 600 (GEPA, MASPO), 10 trials (MIPROv2)", commands=("optimize",), of_run=False),
    Setting("optimizer_model", "the reflection/proposal/judge model (alias or name)", default_text="the task model",
            group="model", commands=("optimize",), of_run=False),
    Setting("optimizer_base_url", "its endpoint(s)", parse_urls, [], default_text="the task model's", group="model",
            role=_OP, commands=("optimize",), of_run=False),
    Setting("allow_any_cell", "run an optimize cell outside the experiment grid", parse_bool, False, flag=True,
            role=_OP, commands=("optimize",), of_run=False),
    # where a sweep's cells run (`apibank-bench sweep` only)
    Setting("executor", "where a sweep's cells run: `local` (one after another here) or `slurm` (one Slurm array "
            "job, through submitit)", default="local", choices=EXECUTORS,
            group="sweep", role=_OP, commands=("sweep",), of_run=False),
    Setting("slurm_partition", "the Slurm partition of the cells' jobs", default_text="the cluster's default",
            group="sweep", role=_OP, commands=("sweep",), of_run=False),
    Setting("slurm_time", "time limit of each cell's job, in minutes", at_least(1), 240, group="sweep", role=_OP, commands=("sweep",), of_run=False),
    Setting("slurm_gpus", "GPUs of each cell's job (`--gpus-per-node`)", at_least(0), group="sweep", role=_OP, commands=("sweep",), of_run=False),
    Setting("slurm_cpus", "CPUs of each cell's job (`--cpus-per-task`)", at_least(1), group="sweep", role=_OP, commands=("sweep",), of_run=False),
    Setting("slurm_mem", "memory of each cell's job, as sbatch writes it (`32G`)", group="sweep", role=_OP, commands=("sweep",), of_run=False,
            default_text="the cluster's default"),
    Setting("slurm_max_running", "cells of the array job running at once", at_least(1), group="sweep", role=_OP, commands=("sweep",), of_run=False,
            default_text="no limit"),
    Setting("slurm_sbatch", "further sbatch options as a JSON object, e.g. `{\"account\": \"lab\", \"qos\": "
            "\"high\"}`", parse_json_object, {}, default_text="-", group="sweep", role=_OP, commands=("sweep",), of_run=False),
    Setting("slurm_setup", "a shell command each cell's job runs first (e.g. `module load cuda`)", group="sweep", role=_OP, commands=("sweep",), of_run=False),
    Setting("endpoint_command", "a shell command each cell runs where it lands to start its own model server; it "
            "prints the server's base URL, which the cell uses, and is stopped when the cell ends "
            "(`$APIBANK_FREE_PORT` holds a free port)", group="sweep", role=_OP, commands=("sweep",), of_run=False),
    Setting("endpoint_wait", "seconds a cell waits for its endpoint command's server to answer", at_least(1, float),
            900.0, group="sweep", role=_OP, commands=("sweep",), of_run=False),
)

SETTINGS: tuple[Setting, ...] = (*RUN_SETTINGS, *COMMAND_SETTINGS)
BY_NAME = {setting.name: setting for setting in SETTINGS}
#: Where a sweep's cells run (flags of `sweep` only).
SWEEP_SETTINGS = tuple(setting for setting in SETTINGS if setting.group == "sweep")
RUN_DEFAULT_LIMIT = 2  #: `apibank-bench run` runs 2 instances unless told otherwise (`--limit 0` = all)


def names_with_role(role: str) -> tuple[str, ...]:
    """The settings of one role, of every command, in the table's order (e.g. OPERATIONAL: what may
    differ between two parts of one run)."""
    return tuple(setting.name for setting in SETTINGS if setting.role == role)


def differences(recorded: Mapping[str, Any], wanted: Mapping[str, Any]) -> dict[str, list[str]]:
    """The run settings two runs' `config.run` records disagree on, by role: {MEASUREMENT: [...], SELECTION:
    [...]} (operational ones may differ within one run: they are left out). Sweep cells and resumed
    runs ask this before adding to a folder."""
    found: dict[str, list[str]] = {MEASUREMENT: [], SELECTION: []}
    for setting in RUN_SETTINGS:
        name = setting.name
        # A setting a run recorded before it existed had its default then (`--model-role`: none).
        if setting.role != OPERATIONAL and name in wanted and recorded.get(name, setting.default) != wanted[name]:
            found[setting.role].append(name)
    return found


def run_limit(raw: Any) -> int | None:
    """The limit of `apibank-bench run` (and of each sweep cell) for a raw `--limit`: unset means
    RUN_DEFAULT_LIMIT instances, 0 means all (None)."""
    try:
        limit = RUN_DEFAULT_LIMIT if raw is None else BY_NAME["limit"].parse(raw)
    except ValueError as exc:
        raise ValueError(f"{BY_NAME['limit'].flag_name}: {exc}") from None
    return limit or None

