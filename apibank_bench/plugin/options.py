"""What the plugin reads from pytest: the run's settings (resolved once), the options that narrow the
selection, whether the session collects the benchmark, and this process's share of the instances."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from xdist import is_xdist_worker

from apibank_bench.core import settings

BENCH_DIR = Path(__file__).resolve().parents[2] / "bench_tests"
#: The `workerinput` key under which the controller hands each xdist worker the run's settings.
SETTINGS_KEY = "apibank_settings"
SHARE_KEY = "apibank_share"  #: the `workerinput` key of a worker's share: [index, count], or None
URL_KEY = "apibank_base_url"  #: the `workerinput` key of the embedded model's URL
CASE = "apibank_task_id"  #: the benchmark test's parameter: its case ID (runs.epochs)


def resolve_settings(config: Any) -> settings.RunConfig:
    """The run's settings: given by `apibank-bench run`, else from the options; an xdist worker takes the
    controller's (`workerinput`)."""
    handed = _handed(config)
    if handed is not None:
        return getattr(handed, settings.GIVEN)
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and SETTINGS_KEY in workerinput:
        return settings.from_record(workerinput[SETTINGS_KEY])
    try:
        return settings.resolve(lambda s: config.getoption(s.dest), lambda s: config.getini(s.dest))
    except ValueError as exc:
        raise pytest.UsageError(f"apibank: {exc}") from None


def _handed(config: Any) -> Any:
    """The plugin object through which `apibank-bench run` handed pytest its resolved settings, or None."""
    return next((plugin for plugin in config.pluginmanager.get_plugins() if hasattr(plugin, settings.GIVEN)), None)


def given_names(config: Any) -> set[str]:
    """The settings the user set (the rest are defaults): as `run` handed them, else from the options."""
    handed = _handed(config)
    if handed is not None:
        return set(getattr(handed, settings.GIVEN_NAMES, ()))
    return settings.given_names(lambda s: config.getoption(s.dest), lambda s: config.getini(s.dest))


def bench_requested(config: Any) -> bool:
    """Whether this session collects the benchmark (decides if the controller starts a model)."""
    for arg in config.args:
        path = Path(str(arg).split("::")[0]).resolve()
        if path == BENCH_DIR or BENCH_DIR in path.parents:
            return True
    return False


def narrowing(config: Any, last_failed: bool) -> dict:
    """The pytest options of this session that run only part of the selection (`-k`, `-m`,
    `--deselect`, `--lf`, test IDs), as given; empty when pytest runs all of it."""
    option = config.option
    chosen = {"-k": getattr(option, "keyword", ""), "-m": getattr(option, "markexpr", ""),
              "--deselect": list(getattr(option, "deselect", None) or []),
              "--lf": bool(last_failed or getattr(option, "lf", False)),
              "test IDs": [str(arg) for arg in config.args if "::" in str(arg)]}
    return {name: value for name, value in chosen.items() if value}


def case_of(item: Any) -> str | None:
    """The case a benchmark test runs (its parameter), else None."""
    callspec = getattr(item, "callspec", None)
    return callspec.params.get(CASE) if callspec is not None else None


def my_instances(session: Any) -> list[str]:
    """The cases this process will run, in the order it runs them.

    Under xdist the share scheduler (`plugin.xdist_share`) gives worker k of n the items k, k + n,
    k + 2n... of the collection, so a worker knows its share up front.
    """
    items = session.items
    if is_xdist_worker(session):  # another scheduler (or a replacement worker): solve each instance when its test runs
        share = session.config.workerinput.get(SHARE_KEY)
        items = items[share[0]::share[1]] if share else []
    return [case for case in map(case_of, items) if case is not None]
