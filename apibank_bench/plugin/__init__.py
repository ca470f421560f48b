"""The pytest plugin: the `--apibank-*` options, one parametrized case per instance, and the results files.

Every process that runs tests (the only one, or each xdist worker) solves its
instances in an `InstancePool`, several in flight at once, and each test waits
for its own. A finished instance's lines travel on its test report to the
controller, whose writer (`plugin.writer`) alone writes the out dir. The
embedded model is started once, by the controller (`plugin.endpoint`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from apibank_bench.core import settings
from apibank_bench.data.manifests import select
from apibank_bench.runs.epochs import case_ids, split_case
from apibank_bench.runs.results import cap_strings, finished_keys, to_json
from apibank_bench.data.tasks import split_combined_id
from apibank_bench.plugin.keys import CONFIG, IDS, NOT_STARTED, POOL, RESULT, USER_PROPERTY

ENDPOINT_UNREACHABLE = 3  #: the exit code of a run whose endpoint nobody answers

BENCH_DIR = Path(__file__).resolve().parents[2] / "bench_tests"
#: The `workerinput` key under which the controller hands each xdist worker the run's settings.
SETTINGS_KEY = "apibank_settings"


def pytest_addoption(parser):
    settings.add_pytest_options(parser)


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
    given = [plugin for plugin in config.pluginmanager.get_plugins() if hasattr(plugin, settings.GIVEN)]
    if given:
        return _use(config, getattr(given[0], settings.GIVEN))
    if is_worker(config) and SETTINGS_KEY in config.workerinput:
        return _use(config, settings.from_record(config.workerinput[SETTINGS_KEY]))
    try:
        return _use(config, settings.resolve(lambda s: config.getoption(s.dest), lambda s: config.getini(s.dest)))
    except ValueError as exc:
        raise pytest.UsageError(f"apibank: {exc}") from None


def selected_cases(config) -> list[str]:
    """This run's cases (runs.epochs: one per instance and epoch) in the order they run, before
    resume; a shard takes every n-th case, so with one epoch every n-th instance."""
    if IDS not in config.stash:
        cfg = run_config(config)
        try:
            ids = select(cfg.level, cfg.limit, cfg.offset, cfg.only or None)
        except (FileNotFoundError, ValueError) as exc:
            raise pytest.UsageError(f"apibank: {exc}") from None
        cases = case_ids(ids, cfg.epochs)
        if cfg.shard:
            index, count = cfg.shard
            cases = cases[index - 1::count]
        config.stash[IDS] = cases
    return config.stash[IDS]


def selected_ids(config) -> list[str]:
    """The instances of this run's cases, in manifest order."""
    return list(dict.fromkeys(split_case(case)[0] for case in selected_cases(config)))


def is_worker(config) -> bool:
    return hasattr(config, "workerinput")


def bench_requested(config) -> bool:
    """Whether this run collects the benchmark (decides if the controller starts a model)."""
    for arg in config.args:
        path = Path(str(arg).split("::")[0]).resolve()
        if path == BENCH_DIR or BENCH_DIR in path.parents:
            return True
    return False


def pytest_configure(config):
    from apibank_bench.llm.probe import forget_probes
    from apibank_bench.plugin import endpoint, writer

    forget_probes()  # a run asks each endpoint's GET /models once

    config.pluginmanager.register(endpoint.EndpointPlugin(config), "apibank-endpoint")
    if not is_worker(config):
        config.pluginmanager.register(writer.Writer(config), "apibank-writer")


def pytest_sessionstart(session):
    """Before any instance runs, the data root must match the lock (else scores would be silently wrong)."""
    config = session.config
    if is_worker(config) or not bench_requested(config):
        return
    from apibank_bench.data.lock import verify
    from apibank_bench.core.paths import DataMissing, require_root

    try:
        root = require_root(run_config(config).root)
    except DataMissing as exc:
        raise pytest.UsageError(f"apibank: {exc}") from None
    problems = verify(root)
    if problems:
        shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
        raise pytest.UsageError(f"apibank: the data at {root} does not match vendor/apibank.lock.json: {shown} "
                                "(restore it with `apibank-bench data fetch`)")
    warn_ignored(config)
    check_endpoint(config)


def warn_ignored(config) -> None:
    """A team setting the topology does not read is said once, as a warning (sweeps still make such cells)."""
    from apibank_bench.agents.topologies import ignored_settings

    handed = [plugin for plugin in config.pluginmanager.get_plugins() if hasattr(plugin, "apibank_given_names")]
    given = (handed[0].apibank_given_names if handed
             else settings.given_names(lambda s: config.getoption(s.dest), lambda s: config.getini(s.dest)))
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    for warning in ignored_settings(run_config(config), given):
        if reporter is not None:
            reporter.write_line(f"apibank: warning: {warning}", yellow=True)


def check_endpoint(config) -> None:
    """Before any instance: a remote endpoint needs a model name (a usage error), and one that nobody
    answers stops the run before it starts (exit 3), each with one line that says what to do."""
    from apibank_bench.agents.models import EndpointUnreachable, endpoint_models, model_config

    cfg = run_config(config)
    if cfg.is_gold or not cfg.base_url:
        return
    try:
        model_config(cfg)
    except ValueError as exc:
        raise pytest.UsageError(f"apibank: {exc}") from None
    dead = []
    for url in cfg.base_url:  # the run's one probe of each endpoint; one of several replicas may be down
        try:
            endpoint_models(url, require=True)
        except EndpointUnreachable as exc:
            dead.append(exc)
    if len(dead) == len(cfg.base_url):
        config.stash[NOT_STARTED] = f"apibank: {dead[0]}; start the server or fix {settings.flag('base_url')}"


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session):
    """A run that cannot start runs no test: its one line is printed instead (see check_endpoint)."""
    reason = session.config.stash.get(NOT_STARTED, None)
    if reason is None:
        return None
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(reason, red=True, bold=True)
    return True


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    if NOT_STARTED in session.config.stash:
        session.exitstatus = ENDPOINT_UNREACHABLE


# -- collection --------------------------------------------------------------------

def pytest_generate_tests(metafunc):
    if "apibank_task_id" not in metafunc.fixturenames:
        return
    # One case per instance and epoch; its ID starts with the task ID, so `-k` selects instances as ever.
    params = [
        pytest.param(case, id=case, marks=getattr(pytest.mark, f"level{split_combined_id(split_case(case)[0])[0]}"))
        for case in ids_to_run(metafunc.config)
    ]
    metafunc.parametrize("apibank_task_id", params)


def ids_to_run(config) -> list[str]:
    """The selection's cases, less what a resumed run already finished (errored cases run again)."""
    cfg = run_config(config)
    if not selected_ids(config):
        given = ", ".join(settings.flag(name) for name in ("level", "limit", "offset", "only", "shard"))
        raise pytest.UsageError(f"apibank: the selection is empty (check {given})")
    cases = selected_cases(config)
    if cfg.resume and not cfg.overwrite:
        done = finished_keys(Path(cfg.results_dir))
        cases = [case for case in cases if split_case(case) not in done]
    return cases


def narrowing(config) -> dict:
    """The pytest options of this session that run only part of the selection (`-k`, `-m`,
    `--deselect`, `--lf`, test IDs), as given; empty when pytest runs all of it."""
    option = config.option
    chosen = {"-k": getattr(option, "keyword", ""), "-m": getattr(option, "markexpr", ""),
              "--deselect": list(getattr(option, "deselect", None) or []),
              "--lf": bool(getattr(option, "lf", False)),
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

@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    result = yield
    pool = item.config.stash.get(POOL, None)
    if pool is not None and (item.session.shouldfail or item.session.shouldstop):  # -x, --maxfail: start no more
        pool.stop(str(item.session.shouldfail or item.session.shouldstop))
    return result


def pytest_unconfigure(config):  # also after Ctrl-C: queued instances are cancelled
    pool = config.stash.get(POOL, None)
    if pool is not None:
        pool.close()


# -- results ---------------------------------------------------------------------------

def record(item, payload: dict) -> None:
    """Attach one instance's lines to its test report (JSON text travels through xdist)."""
    item.stash[RESULT] = payload["result"]
    item.user_properties.append((USER_PROPERTY, to_json(cap_strings(payload))))  # a 10 MB answer travels cut


@pytest.hookimpl(optionalhook=True)
def pytest_json_runtest_metadata(item, call):
    """pytest-json-report: each test's result fields."""
    if RESULT in item.stash and call.when in ("setup", "call"):
        return {USER_PROPERTY: item.stash[RESULT]}
    return None
