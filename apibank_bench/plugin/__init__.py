"""The pytest plugin: the `--apibank-*` options, one parametrized case per instance, and the results files.

Every process that runs tests (the only one, or each xdist worker) solves its
instances in an `InstancePool`, several in flight at once, and each test waits
for its own. A finished instance's lines travel on its test report to the
controller, whose writer (`plugin.writer`) alone writes the out dir. The
embedded model is started once, by the controller (`plugin.endpoint`).
"""

from __future__ import annotations


import pytest

from apibank_bench.core import settings
from apibank_bench.runs.epochs import split_case
from apibank_bench.data.tasks import split_combined_id
from apibank_bench.plugin.keys import LAST_FAILED, NOT_STARTED, POOL, RESULT, USER_PROPERTY
from apibank_bench.plugin.run import bench_requested, given_names, ids_to_run, is_worker, passed_keys, run_config
from apibank_bench.runs.naming import results_dir
from apibank_bench.runs.setting_rules import hand_down

hand_down()  # the choices and rules of settings that name the layers' things (topologies ...)

ENDPOINT_UNREACHABLE = 3  #: the exit code of a run whose endpoint nobody answers



def pytest_addoption(parser):
    settings.add_pytest_options(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """`--lf` on the benchmark: the folder's own rows decide what failed last (pytest_collection_modifyitems),
    so pytest's cache (one per checkout, and "run everything" when nothing failed) is turned off before
    its plugin reads the option."""
    if getattr(config.option, "lf", False) and bench_requested(config):
        config.option.lf = False
        config.stash[LAST_FAILED] = True


def pytest_configure(config):
    from apibank_bench.llm.probe import forget_probes
    # Imported here: the model layer and the agents load only in a pytest run, not with the package.
    from apibank_bench.plugin import endpoint, fixtures, writer

    forget_probes()  # a run asks each endpoint's GET /models once
    if bench_requested(config):  # SIGTERM stops a benchmark run as Ctrl-C does (plugin.interrupt)
        from apibank_bench.plugin import interrupt

        interrupt.install(config)
        config.pluginmanager.register(interrupt, "apibank-interrupt")

    config.pluginmanager.register(fixtures, "apibank-fixtures")  # the benchmark's fixtures are the plugin's
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
    say_cut_selection(config)
    check_endpoint(config)


def warn_ignored(config) -> None:
    """A team setting the topology does not read is said once, as a warning (sweeps still make such cells)."""
    from apibank_bench.agents.topologies import ignored_settings

    given = given_names(config)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    for warning in ignored_settings(run_config(config), given):
        if reporter is not None:
            reporter.write_line(f"apibank: warning: {warning}", yellow=True)


def say_cut_selection(config) -> None:
    """`--only` with `--limit` runs the first instances of those named: said, never done silently."""
    from apibank_bench.data.manifests import select

    cfg = run_config(config)
    if not (cfg.only and cfg.limit):
        return
    try:
        named = len(select(cfg.level, None, cfg.offset, cfg.only))
    except (FileNotFoundError, ValueError):
        return  # the selection itself says what is wrong (plugin.run.selected_cases)
    if named > cfg.limit:
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"apibank: {settings.flag('limit')} {cfg.limit} runs the first {cfg.limit} of the "
                                f"{named} instances named by {settings.flag('only')} (without "
                                f"{settings.flag('limit')} every named instance runs)", yellow=True)


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
    elif session.config.stash.get(LAST_FAILED, False) and session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = pytest.ExitCode.OK  # `--lf` with nothing failed: said, and nothing to do
    elif getattr(session.config.pluginmanager.get_plugin("apibank-writer"), "stopped", None) \
            and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED  # a stopped run is not a passing one


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


def pytest_collection_modifyitems(session, config, items):
    """`--lf`: only the cases without a correct row in the folder (an error, a wrong answer, or no row at all:
    never run, or its line unreadable); when every one has a correct row, none runs."""
    if not config.stash.get(LAST_FAILED, False):
        return
    passed = passed_keys(config)
    keep, drop = [], []
    for item in items:
        case = getattr(item, "callspec", None) and item.callspec.params.get("apibank_task_id")
        (drop if case and split_case(case) in passed else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if not keep and reporter is not None and not is_worker(config):
        reporter.write_line(f"apibank: --lf: {results_dir(run_config(config))} holds a correct row for every "
                            "instance of this selection: nothing failed, nothing to run", yellow=True)


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

@pytest.hookimpl(optionalhook=True)
def pytest_json_runtest_metadata(item, call):
    """pytest-json-report: each test's result fields."""
    if RESULT in item.stash and call.when in ("setup", "call"):
        return {USER_PROPERTY: item.stash[RESULT]}
    return None
