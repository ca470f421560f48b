"""What the plugin reads from pytest: the run's settings (resolved once), the options that narrow the
selection, whether the session collects the benchmark, and this process's share of the instances."""

from __future__ import annotations

import os
import re
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from xdist import is_xdist_worker

from apibank_bench.core import settings
from apibank_bench.bench import BENCH_DIR

if TYPE_CHECKING:
    from apibank_bench.scoring.scorer import Scorer

_IMPORT = re.compile(rb"^[ \t]*(from[ \t]+apibank_bench\.bench(\.\w+)*[ \t]+import|import[ \t]+apibank_bench\.bench\b)",
                     re.M)  #: a test module that imports the benchmark's
#: The `workerinput` key under which the controller hands each xdist worker the run's settings.
SETTINGS_KEY = "apibank_settings"
SHARE_KEY = "apibank_share"  #: the `workerinput` key of a worker's share: [index, count], or None
URL_KEY = "apibank_base_url"  #: the `workerinput` key of the embedded model's URL
VOICE_KEY = "apibank_voice"  #: the `workerinput` key of the controller's message voice (core.settings.voice)
CASE = "apibank_task_id"  #: the benchmark test's parameter: its case ID (runs.epochs)


@dataclass(frozen=True, eq=False)  # a plugin: pluggy keeps it in a set, by identity
class GivenSettings:
    """The settings `apibank-bench run` resolved, handed to `pytest.main(plugins=[...])` as this plugin
    object, which the plugin finds by its type: the plugin uses them as they are (xdist workers get them
    from the controller in `workerinput`)."""

    cfg: settings.RunConfig
    given: AbstractSet[str] = field(default_factory=frozenset)  #: the settings the user set (the rest are defaults)
    scorer: Scorer | None = None  #: the scorer `run` warmed (its loads under way): the run scores with it


def resolve_settings(config: pytest.Config) -> settings.RunConfig:
    """The run's settings: given by `apibank-bench run`, else from the options; an xdist worker takes the
    controller's (`workerinput`), and its message voice."""
    given = handed(config)
    if given is not None:
        return given.cfg
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and SETTINGS_KEY in workerinput:
        settings.use_voice(workerinput.get(VOICE_KEY, "pytest"))
        return settings.from_record(workerinput[SETTINGS_KEY])
    try:
        return settings.resolve(lambda s: config.getoption(s.dest), lambda s: config.getini(s.dest))
    except ValueError as exc:
        if not bench_requested(config):  # a session of other tests never uses them (OPENAI_BASE_URL alone is no
            return settings.RunConfig()  # reason to refuse `pytest tests/`)
        raise pytest.UsageError(f"apibank: {exc}") from None


def handed(config: pytest.Config) -> GivenSettings | None:
    """The plugin object through which `apibank-bench run` handed pytest its resolved settings, or None."""
    return next((plugin for plugin in config.pluginmanager.get_plugins() if isinstance(plugin, GivenSettings)), None)


def warmed_scorer(config: pytest.Config) -> Scorer | None:
    """The scorer `apibank-bench run` warmed for this run, or None (the run's parts build one)."""
    given = handed(config)
    return given.scorer if given is not None else None


def given_names(config: pytest.Config) -> set[str]:
    """The settings the user set (the rest are defaults): as `run` handed them, else from the options."""
    given = handed(config)
    if given is not None:
        return set(given.given)
    return settings.given_names(lambda s: config.getoption(s.dest), lambda s: config.getini(s.dest))


def benchmark_session(config: pytest.Config) -> bool:
    """Whether this process takes part in a benchmark run: `run` handed it the settings, its arguments
    collect the benchmark (`bench_requested`), or, on an xdist worker, the controller handed it the run."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        return SETTINGS_KEY in workerinput
    return handed(config) is not None or bench_requested(config)


def bench_requested(config: pytest.Config) -> bool:
    """Whether this session collects the benchmark's module: one of its arguments (a path, or a module
    under `--pyargs`) is that module or its package, or is (or holds) a test module that imports it, as the
    checkout's `bench_tests/test_apibank.py` does. Decided before collection, from the arguments alone (the
    controller starts the model before its xdist workers collect), and cheaply: an unrelated project's
    session reads only the heads of its own test files."""
    patterns = [str(pattern) for pattern in config.getini("python_files")]
    skipped = [str(pattern) for pattern in config.getini("norecursedirs")]
    here = Path(config.invocation_params.dir)
    for arg in config.args:
        path = _argument_path(str(arg).split("::")[0], here, bool(config.option.pyargs))
        if path is not None and _collects_bench(path, patterns, skipped):
            return True
    return False


def _argument_path(arg: str, here: Path, pyargs: bool) -> Path | None:
    if pyargs and arg and not Path(arg).exists():
        import importlib.util

        try:
            spec = importlib.util.find_spec(arg)
        except (ImportError, ValueError):
            return None
        if spec is None:
            return None
        locations = list(spec.submodule_search_locations or [])
        return Path(locations[0] if locations else spec.origin or "").resolve() if (locations or spec.origin) \
            else None
    return (here / arg).resolve()


def _collects_bench(path: Path, patterns: list[str], skipped: list[str]) -> bool:
    if path == BENCH_DIR or BENCH_DIR in path.parents:
        return True
    if path in BENCH_DIR.parents:  # e.g. the installed package itself, unless pytest would not recurse there
        inside = BENCH_DIR.relative_to(path).parts[:-1]
        return not any(part == "site-packages" or any(fnmatch(part, pattern) for pattern in skipped)
                       for part in inside)
    if path.is_file():
        return _imports_bench(path)
    if not path.is_dir():
        return False
    for folder, dirs, files in os.walk(path):
        dirs[:] = [name for name in dirs if not any(fnmatch(name, pattern) for pattern in skipped)
                   and not (Path(folder, name) / "pyvenv.cfg").exists()]
        for name in files:
            if any(fnmatch(name, pattern) for pattern in patterns) and _imports_bench(Path(folder, name)):
                return True
    return False


def _imports_bench(path: Path) -> bool:
    """A test module that imports the benchmark's (its imports sit at its head)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(8192)
    except OSError:
        return False
    return _IMPORT.search(head) is not None


def narrowing(config: pytest.Config, last_failed: bool) -> dict:
    """The pytest options of this session that run only part of the selection (`-k`, `-m`,
    `--deselect`, `--lf`, test IDs), as given; empty when pytest runs all of it."""
    option = config.option
    chosen = {"-k": getattr(option, "keyword", ""), "-m": getattr(option, "markexpr", ""),
              "--deselect": list(getattr(option, "deselect", None) or []),
              "--lf": bool(last_failed or getattr(option, "lf", False)),
              "test IDs": [str(arg) for arg in config.args if "::" in str(arg)]}
    return {name: value for name, value in chosen.items() if value}


def case_of(item: pytest.Item) -> str | None:
    """The case a benchmark test runs (its parameter), else None."""
    callspec = getattr(item, "callspec", None)
    return callspec.params.get(CASE) if callspec is not None else None


def my_instances(session: pytest.Session) -> list[str]:
    """The cases this process will run, in the order it runs them.

    Under xdist the share scheduler (`plugin.xdist_share`) gives worker k of n the items k, k + n,
    k + 2n... of the collection, so a worker knows its share up front.
    """
    items = session.items
    if is_xdist_worker(session):  # another scheduler (or a replacement worker): solve each instance when its test runs
        share = session.config.workerinput.get(SHARE_KEY)  # type: ignore[attr-defined]  # xdist sets it on a worker
        items = items[share[0]::share[1]] if share else []
    return [case for case in map(case_of, items) if case is not None]
