"""What the plugin's parts share about this run: its settings (resolved once), its selection, and this
process's share of it. The writer, the endpoint, the fixtures and the gate read them here, so nothing
imports back from the plugin's hooks (`plugin/__init__.py`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from apibank_bench.core import settings
from apibank_bench.data.manifests import select
from apibank_bench.plugin.keys import COMMAND_OUTPUT, CONFIG, IDS, LAST_FAILED, RESULT, USER_PROPERTY
from apibank_bench.runs.epochs import run_cases, split_case
from apibank_bench.runs.results import capped_json, finished_keys, read_rows
from apibank_bench.runs.naming import results_dir

BENCH_DIR = Path(__file__).resolve().parents[2] / "bench_tests"
#: The `workerinput` key under which the controller hands each xdist worker the run's settings.
SETTINGS_KEY = "apibank_settings"


def _use(config, cfg: settings.RunConfig) -> settings.RunConfig:
    from apibank_bench.apis.search.model import use_cache_root

    config.stash[CONFIG] = cfg
    use_cache_root(cfg.cache_root)  # the ToolSearcher model lives under this run's cache folder
    return cfg


def run_config(config) -> settings.RunConfig:
    """The run's settings, resolved once per run: given by `apibank-bench run`, else from the options; an
    xdist worker takes the controller's (`workerinput`)."""
    if CONFIG in config.stash:
        return config.stash[CONFIG]
    handed = _handed(config)
    if handed is not None:
        return _use(config, getattr(handed, settings.GIVEN))
    if is_worker(config) and SETTINGS_KEY in config.workerinput:
        return _use(config, settings.from_record(config.workerinput[SETTINGS_KEY]))
    try:
        return _use(config, settings.resolve(lambda s: config.getoption(s.dest), lambda s: config.getini(s.dest)))
    except ValueError as exc:
        raise pytest.UsageError(f"apibank: {exc}") from None


def _handed(config):
    """The plugin object through which `apibank-bench run` handed pytest its resolved settings, or None."""
    return next((plugin for plugin in config.pluginmanager.get_plugins() if hasattr(plugin, settings.GIVEN)), None)


def given_names(config) -> set[str]:
    """The settings the user set (the rest are defaults): as `run` handed them, else from the options."""
    handed = _handed(config)
    if handed is not None:
        return set(getattr(handed, settings.GIVEN_NAMES, ()))
    return settings.given_names(lambda s: config.getoption(s.dest), lambda s: config.getini(s.dest))


def selected_cases(config) -> list[str]:
    """This run's cases (runs.epochs: one per instance and epoch, a shard's share) in the order they
    run, before resume."""
    if IDS not in config.stash:
        cfg = run_config(config)
        try:
            ids = select(cfg.level, cfg.limit, cfg.offset, cfg.only or None)
        except (FileNotFoundError, ValueError) as exc:
            raise pytest.UsageError(f"apibank: {exc}") from None
        config.stash[IDS] = run_cases(ids, cfg.epochs, cfg.shard)
    return config.stash[IDS]


def selected_ids(config) -> list[str]:
    """The instances of this run's cases, in manifest order."""
    return list(dict.fromkeys(split_case(case)[0] for case in selected_cases(config)))


def is_worker(config) -> bool:
    """An xdist worker: the test xdist's own `is_xdist_worker` makes, on the config it reads from a session."""
    return hasattr(config, "workerinput")


def bench_requested(config) -> bool:
    """Whether this run collects the benchmark (decides if the controller starts a model)."""
    for arg in config.args:
        path = Path(str(arg).split("::")[0]).resolve()
        if path == BENCH_DIR or BENCH_DIR in path.parents:
            return True
    return False


def ids_to_run(config) -> list[str]:
    """The selection's cases, less what a resumed run already finished (errored cases run again)."""
    cfg = run_config(config)
    if not selected_ids(config):
        given = ", ".join(settings.flag(name) for name in ("level", "limit", "offset", "only", "shard"))
        raise pytest.UsageError(f"apibank: the selection is empty (check {given})")
    cases = selected_cases(config)
    if cfg.resume and not cfg.overwrite:
        done = finished_keys(Path(results_dir(cfg)))
        cases = [case for case in cases if split_case(case) not in done]
    return cases


def passed_keys(config) -> set[tuple[str, int]]:
    """`--lf`: the (instance, epoch) keys of this run's folder with a correct row (the tests that passed); the
    others (an error, a wrong answer, no readable row) are what failed last. Read from the folder itself:
    pytest's own memory is one per checkout, not per folder."""
    return {row.key for row in read_rows(Path(results_dir(run_config(config)))) if row.correct}


def narrowing(config) -> dict:
    """The pytest options of this session that run only part of the selection (`-k`, `-m`,
    `--deselect`, `--lf`, test IDs), as given; empty when pytest runs all of it."""
    option = config.option
    chosen = {"-k": getattr(option, "keyword", ""), "-m": getattr(option, "markexpr", ""),
              "--deselect": list(getattr(option, "deselect", None) or []),
              "--lf": bool(config.stash.get(LAST_FAILED, False) or getattr(option, "lf", False)),
              "test IDs": [str(arg) for arg in config.args if "::" in str(arg)]}
    return {name: value for name, value in chosen.items() if value}


def task_id_of(nodeid: str) -> str | None:
    """The instance of a benchmark test's node ID (`...::test_apibank[<task id>]`), else None."""
    if "test_apibank[" not in nodeid:
        return None
    return nodeid.split("test_apibank[", 1)[1][:-1]


def my_instances(session) -> list[str]:
    """The instances this process will run, in the order it runs them.

    Under xdist the share scheduler (`plugin.endpoint`) gives worker k of n the
    items k, k + n, k + 2n... of the collection, so a worker knows its share up front.
    """
    items = session.items
    config = session.config
    if is_worker(config):  # another scheduler (or a replacement worker): solve each instance when its test runs
        share = config.workerinput.get("apibank_share")
        items = items[share[0]::share[1]] if share else []
    return [item.callspec.params["apibank_task_id"] for item in items
            if hasattr(item, "callspec") and "apibank_task_id" in item.callspec.params]


# -- stopping early ------------------------------------------------------------------


STOPPED = "apibank: not run: "  #: how a test skipped because the run stopped gives its reason


def stop_message(reason: str) -> str:
    """Why the run stopped, in the words of the command typed (`--resume` under `run`, `--apibank-resume`
    under pytest), and how to finish it."""
    import re

    spoken = re.sub(r"--apibank-[a-z-]+", lambda match: settings.spoken(match.group()), reason)
    if settings.flag("resume") not in spoken:
        spoken += f"; rerun with {settings.flag('resume')} to finish"
    return STOPPED + spoken


def record(item, payload: dict) -> None:
    """Attach one instance's lines to its test report (JSON text travels through xdist)."""
    item.stash[RESULT] = payload["result"]
    item.user_properties.append((USER_PROPERTY, capped_json(payload)))  # a 10 MB answer travels cut


def quiet_tests(config) -> bool:
    """Whether pytest prints nothing per instance (not with `run -v`, which asks for a line each)."""
    return config.stash.get(COMMAND_OUTPUT, False) and config.option.verbose <= 0
