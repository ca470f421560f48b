"""The pytest plugin: the `--apibank-*` options, its hooks (`hookspecs`), and one session object
(`bench_session.BenchSession`) registered at configure, which adapts pytest's hooks to the run
(`runs.benchmark_run.BenchmarkRun`): one parametrized case per instance, rows written by the controller.

Installed, it is a `pytest11` entry point (registered under this module's name, so the checkout's
conftest naming it too loads it once), and so it loads into every pytest session of the environment:
it stays light until a session collects the benchmark's module (`options.bench_requested`); other
sessions get the options and nothing else.
"""

from __future__ import annotations

from typing import Any

import pytest

LAST_FAILED = "apibank_last_failed"  #: the option attribute `--lf` becomes on a benchmark run (cmdline_main)


def pytest_addoption(parser: pytest.Parser) -> None:
    from apibank_bench.core import settings

    settings.add_pytest_options(parser)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from apibank_bench.plugin import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


@pytest.hookimpl(wrapper=True)
def pytest_cmdline_main(config: pytest.Config) -> Any:
    """Before the session: `--lf` on the benchmark is decided from the folder's own rows (the session's
    collection_modifyitems), so pytest's cache (one per checkout, and "run everything" when nothing failed)
    is turned off before its plugin reads the option. After it: a benchmark session's exit status is the
    table's (core.exit_codes: pytest's 2, interrupted, would otherwise mean what 2 means under `run`)."""
    from apibank_bench.core.exit_codes import of_pytest_session
    from apibank_bench.plugin.options import bench_requested

    requested = bench_requested(config)
    if getattr(config.option, "lf", False) and requested:
        config.option.lf = False
        setattr(config.option, LAST_FAILED, True)
    status = yield
    if not requested or hasattr(config, "workerinput"):  # an xdist worker's status is the controller's business
        return status
    session = config.pluginmanager.get_plugin("apibank-session")
    return of_pytest_session(status, stopped=bool(session is not None and session.stopped_itself))


def pytest_configure(config: pytest.Config) -> None:
    from apibank_bench.plugin.options import benchmark_session

    if not benchmark_session(config):
        config.pluginmanager.register(NotTheBenchmark(), "apibank-session")
        return
    for level in (1, 2, 3):  # `-m level3` selects a level (bench_session marks each case), in any project
        config.addinivalue_line("markers", f"level{level}: an API-Bank Level-{level} instance")
    from apibank_bench.runs.setting_rules import hand_down

    hand_down()  # the plugin is a composition root: the settings it resolves get the layers' choices and rules
    from apibank_bench.llm.probe import forget_probes
    # Imported here: the model layer and the agents load only in a pytest run, not with the package.
    from apibank_bench.plugin import fixtures
    from apibank_bench.plugin.bench_session import BenchSession

    forget_probes()  # a run asks each endpoint's GET /models once
    session = BenchSession(config, last_failed=getattr(config.option, LAST_FAILED, False))
    if session.requested:  # SIGTERM stops a benchmark run as Ctrl-C does (plugin.interrupt)
        from apibank_bench.plugin import interrupt

        interrupt.install(config, session.worker_pids)
    config.pluginmanager.register(fixtures, "apibank-fixtures")  # the benchmark's fixtures are the plugin's
    config.pluginmanager.register(session, "apibank-session")


class NotTheBenchmark:
    """The session of a pytest run that does not collect the benchmark (any project's own tests): it costs
    nothing, and should a benchmark case turn up all the same, says why it cannot run rather than failing
    on a missing fixture."""

    def pytest_generate_tests(self, metafunc: Any) -> None:
        from apibank_bench.bench import BENCH_MODULE

        if "apibank_result" in metafunc.fixturenames:  # the benchmark test's fixture (plugin.fixtures)
            raise pytest.UsageError(
                f"apibank: {metafunc.module.__file__} runs the benchmark, but this session was not started as a "
                f"benchmark run: name the module (or its folder) on the command line, or `--pyargs {BENCH_MODULE}`")
