"""The benchmark's pytest session: one object, registered at `pytest_configure` (as pytest-xdist's
`DSession`), holding the run (`runs.benchmark_run.BenchmarkRun`) and adapting pytest's hooks to it.

Every process that runs tests (the only one, or each xdist worker) solves its instances in an
`InstancePool`, several in flight at once, and each test waits for its own. A finished instance's lines
travel on its test report (`user_properties`) to the controller, whose run alone writes the folder. The
embedded model is started once, by the controller, and its URL handed to the workers (`xdist_share`).
"""

from __future__ import annotations

from typing import Any

import pytest
from xdist import is_xdist_worker

from apibank_bench.core import settings
from apibank_bench.core.exit_codes import ExitCode
from apibank_bench.plugin.keys import RESULT, RUN, USER_PROPERTY
from apibank_bench.plugin.options import (bench_requested, case_of, given_names, narrowing, resolve_settings,
                                          warmed_scorer)
from apibank_bench.plugin.progress import Progress
from apibank_bench.plugin.options import URL_KEY
from apibank_bench.plugin.xdist_share import STOP_GRACE_S, XdistParts
from apibank_bench.runs.benchmark_run import BenchmarkRun, EmptySelection
from apibank_bench.runs.parts import RunParts
from apibank_bench.runs.epochs import split_case
from apibank_bench.runs.naming import results_dir

ENDPOINT_UNREACHABLE = ExitCode.UNREACHABLE  #: the exit status of a run whose endpoint nobody answers
STOPPED = "apibank: not run: "  #: how a test skipped because the run stopped gives its reason


class BenchSession(XdistParts):
    def __init__(self, config: pytest.Config, last_failed: bool) -> None:
        from apibank_bench.apis.search.model import use_cache_root

        self.config = config
        self.requested = bench_requested(config)
        self.last_failed = last_failed  #: `--lf`, decided from the folder's rows, not pytest's cache
        self.worker = False  #: an xdist worker (decided at sessionstart, by xdist's own test)
        cfg = resolve_settings(config)
        workerinput = getattr(config, "workerinput", {})
        # The run's parts: the embedded model started here once (announced past pytest's capture), or, on an xdist
        # worker, the controller's; each worker keeps its part of the endpoint's queue (llm/limit.py).
        # `run` hands the scorer it warmed.
        parts = RunParts(cfg, instance_ids=lambda: self.run.instance_ids(), announce=self.announce_start,
                         handed_urls=workerinput.get(URL_KEY), sharing=int(workerinput.get("workercount", 1)),
                         scorer=warmed_scorer(config))
        self.run = BenchmarkRun(cfg, narrowing(config, last_failed), parts)
        use_cache_root(cfg.cache_root)  # the ToolSearcher model lives under this run's cache folder
        self.progress = Progress(config, self.run, quiet=self.quiet())
        self.not_started: str | None = None  #: why the run cannot start (its tests are not run)
        self.written_nodes: set[str] = set()  #: test IDs whose report's lines were taken
        self.worker_pids: list[int] = []  #: the controller's xdist workers (a SIGTERM is handed on to them)
        self.stopped_itself = False  #: the session was stopped by the run (pytest's "interrupted", but incomplete)
        self.session: pytest.Session | None = None  #: pytest's session, from its start
        self.concluded = False  #: the run's end has been decided (`conclude`)
        config.stash[RUN] = self.run

    def quiet(self) -> bool:
        """Whether pytest prints nothing per instance (`run` owns the screen; not with `run -v`)."""
        return bool(self.config.hook.pytest_apibank_owns_screen(config=self.config)) and \
            self.config.option.verbose <= 0

    def reporter(self) -> Any:
        return self.config.pluginmanager.get_plugin("terminalreporter")

    def say(self, text: str, **markup: bool) -> None:
        reporter = self.reporter()
        if reporter is not None:
            reporter.write_line(text, **markup)

    # -- before anything runs ------------------------------------------------------------------

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Before any instance runs, the data root must match the lock (else scores would be silently wrong)."""
        self.session = session
        self.worker = is_xdist_worker(session)
        if self.worker or not self.requested:
            return
        from apibank_bench.core.paths import DataMissing, require_root
        from apibank_bench.data.lock import verify
        from apibank_bench.runs.folder import FolderTaken

        cfg = self.run.cfg
        try:
            root = require_root(cfg.root)
        except DataMissing as exc:
            raise pytest.UsageError(f"apibank: {exc}") from None
        problems = verify(root)
        if problems:
            shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
            raise pytest.UsageError(f"apibank: the data at {root} does not match the package's apibank.lock.json: "
                                    f"{shown} (restore it with `apibank-bench data fetch`)")
        self.warn_ignored()
        self.say_cut_selection()
        self.check_endpoint()
        try:  # before anything runs: a refused run leaves the folder as it was
            self.run.open_folder()
        except (FolderTaken, EmptySelection, FileNotFoundError, ValueError) as exc:
            raise pytest.UsageError(f"apibank: {exc}") from None
        found = self.run.unreadable()
        if found:
            from apibank_bench.runs.results import PREDICTIONS, RESULTS, UNREADABLE

            self.say(f"apibank: {results_dir(cfg)}: unreadable (half-written or corrupted): {', '.join(found)}; kept "
                     f"in {RESULTS}{UNREADABLE} / {PREDICTIONS}{UNREADABLE}, their instances have no row and count "
                     "as not run", yellow=True)
        if self.run.selection.other:
            self.say(f"apibank: {results_dir(cfg)} holds the rows of a run with another selection "
                     f"({'; '.join(self.run.selection.other)}): this session's rows join them, and the folder is "
                     "complete only once it holds a row for every case of this selection", yellow=True)
        if cfg.resume and not self.run.selection.to_run:
            self.say(f"apibank: {settings.flag('resume')}: {results_dir(cfg)} holds a finished row for every case of "
                     "this selection: nothing left to run", yellow=True)
        self.config.hook.pytest_apibank_run_started(run=self.run)

    def warn_ignored(self) -> None:
        """A team setting the topology does not read is said once, as a warning (sweeps still make such cells)."""
        from apibank_bench.agents.topologies import ignored_settings

        for warning in ignored_settings(self.run.cfg, given_names(self.config)):
            self.say(f"apibank: warning: {warning}", yellow=True)

    def say_cut_selection(self) -> None:
        """`--only` with `--limit` runs the first instances of those named: said, never done silently."""
        from apibank_bench.data.manifests import select

        cfg = self.run.cfg
        if not (cfg.only and cfg.limit):
            return
        try:
            named = len(select(cfg.level, None, cfg.offset, cfg.only))
        except (FileNotFoundError, ValueError):
            return  # the selection itself says what is wrong
        if named > cfg.limit:
            flag = settings.flag
            self.say(f"apibank: {flag('limit')} {cfg.limit} runs the first {cfg.limit} of the {named} instances "
                     f"named by {flag('only')} (without {flag('limit')} every named instance runs)", yellow=True)

    def check_endpoint(self) -> None:
        """The default embedded model not installed is a usage error, and an endpoint that nobody answers stops
        the run before it starts (exit 3), each with one line that says what to do (every model the settings
        name was checked as they resolved: agents.models.check_models)."""
        from apibank_bench.llm.probe import EndpointUnreachable, endpoint_models

        cfg = self.run.cfg
        if cfg.default_model:
            from apibank_bench.agents.models import check_embedded

            try:
                check_embedded(cfg)  # its package, and llama-cpp-python
            except ValueError as exc:
                raise pytest.UsageError(f"apibank: {exc}") from None
        if cfg.is_gold or not cfg.base_url:
            return
        dead = []
        for url in cfg.base_url:  # the run's one probe of each endpoint; one of several replicas may be down
            try:
                endpoint_models(url, require=True)
            except EndpointUnreachable as exc:
                dead.append(exc)
        if len(dead) == len(cfg.base_url):
            self.not_started = f"apibank: {dead[0]}; start the server or fix {settings.flag('base_url')}"

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool | None:
        """A run that cannot start runs no test: its one line is printed instead (see check_endpoint)."""
        if self.not_started is None:
            return None
        self.say(self.not_started, red=True, bold=True)
        return True

    # -- collection ----------------------------------------------------------------------------

    def pytest_generate_tests(self, metafunc: Any) -> None:
        if "apibank_task_id" not in metafunc.fixturenames:
            return
        from apibank_bench.data.tasks import split_combined_id

        try:
            cases = self.run.cases_to_run()
        except (EmptySelection, FileNotFoundError, ValueError) as exc:
            raise pytest.UsageError(f"apibank: {exc}") from None
        # One case per instance and epoch; its ID starts with the task ID, so `-k` selects instances as ever.
        metafunc.parametrize("apibank_task_id", [
            pytest.param(case, id=case, marks=getattr(pytest.mark, f"level{split_combined_id(split_case(case)[0])[0]}"))
            for case in cases])

    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config, items: list) -> None:
        """`--lf`: only the cases without a correct row in the folder (an error, a wrong answer, or no row at
        all); when every one has a correct row, none runs."""
        empty = [item for item in items if "apibank_task_id" in getattr(item, "fixturenames", ())
                 and not isinstance(case_of(item), str)]
        if empty:  # nothing left to run (`--resume` of a finished folder): no test, rather than a skipped NOTSET
            config.hook.pytest_deselected(items=empty)
            items[:] = [item for item in items if item not in empty]
        if not self.last_failed:
            return
        passed = self.run.passed_keys()
        keep: list[Any] = []
        drop: list[Any] = []
        for item in items:
            case = case_of(item)
            (drop if case and split_case(case) in passed else keep).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep
        if not keep and not is_xdist_worker(session):
            self.say(f"apibank: --lf: {results_dir(self.run.cfg)} holds a correct row for every instance of this "
                     "selection: nothing failed, nothing to run", yellow=True)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """What pytest runs of the selection; then, under `run`, the progress line owns the screen."""
        if is_xdist_worker(session):
            return
        self.run.collect([case for case in map(case_of, session.items) if case is not None])
        self.run.start_running()
        self.progress.start_line()

    # -- running ---------------------------------------------------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: Any) -> Any:
        result = yield
        pool = self.run.pool
        if pool is not None and (item.session.shouldfail or item.session.shouldstop):  # -x, --maxfail: start no more
            pool.stop(str(item.session.shouldfail or item.session.shouldstop))
        return result

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """The controller writes a test's lines from the first of its reports that carries them (the setup's:
        the call's and teardown's carry them too)."""
        if self.worker:
            return
        if report.skipped and self.run.outcome.stopped is None and isinstance(report.longrepr, tuple):
            reason = str(report.longrepr[2]).removeprefix("Skipped: ")
            self.run.stopped_by(reason.removeprefix(STOPPED) if reason.startswith(STOPPED) else None)
        if report.nodeid in self.written_nodes:
            return
        texts = [value for key, value in report.user_properties if key == USER_PROPERTY]
        if texts:
            import json

            self.written_nodes.add(report.nodeid)
            self.add(json.loads(str(texts[0])))  # the lines' one decoding on their way to the file

    def add(self, payload: dict) -> None:
        row = self.run.add(payload)
        if row is not None:
            self.progress.added(row)

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logfinish(self) -> None:
        if not self.worker:
            self.progress.test_finished()

    # -- the end ---------------------------------------------------------------------------------

    @pytest.hookimpl(optionalhook=True)
    def pytest_json_modifyreport(self, json_report: dict) -> None:
        from apibank_bench.runs.summary import add_summary_to_json_report

        if self.session is not None:  # pytest-json-report writes its report before our sessionfinish runs:
            from apibank_bench.core.exit_codes import of_pytest_session

            self.conclude(self.session)  # the summary it carries is the finished one, the gate's verdict included,
            # and its exit code the one the process ends with (it read pytest's before the run's end was decided)
            json_report["exitcode"] = int(of_pytest_session(int(self.session.exitstatus), self.stopped_itself))
        add_summary_to_json_report(json_report, self.run.outcome.summary)

    def nothing_left(self) -> bool:
        """`--resume` of a folder that holds a finished row for every case of the selection."""
        chosen = self.run.selection
        return bool(self.requested and self.run.cfg.resume and chosen.keep and not chosen.to_run)

    def finish(self) -> None:
        self.progress.warn_once()  # a run too short to warn on the way
        self.progress.stop_line()  # before pytest's closing lines
        if self.nothing_left():
            self.run.hold_rows()  # its closing table is the folder's
        self.run.finish()

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if is_xdist_worker(session):
            self.hand_back_counts()
            return
        self.conclude(session)

    def conclude(self, session: pytest.Session) -> None:
        """The run's end, once (from the JSON report's hook when there is one, else at sessionfinish): the
        summary, the session's status, and the hooks of the run's end (the gate judges there)."""
        if self.concluded:
            return
        self.concluded = True
        self.stopped_itself = isinstance(session.shouldstop, str) and session.shouldstop.startswith("apibank:")
        self.finish()
        if self.not_started is not None:
            session.exitstatus = ENDPOINT_UNREACHABLE
        elif (self.last_failed or self.nothing_left()) and session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
            session.exitstatus = pytest.ExitCode.OK  # `--lf` with nothing failed, `--resume` with nothing left: said
        elif self.run.outcome.stopped and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED  # a stopped run is not a passing one
        if self.requested:
            self.config.hook.pytest_apibank_run_finished(run=self.run, session=session)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """The closing table, under pytest; `apibank-bench run` prints it itself, as its last lines."""
        if self.run.outcome.summary and not self.config.hook.pytest_apibank_owns_screen(config=self.config):
            from apibank_bench.runs.closing_table import YellowLine, closing_lines

            terminalreporter.write_line("")
            for line in closing_lines(self.run.cfg, self.run.outcome.summary, self.run.tally.error_reasons,
                                      terminalreporter._tw.fullwidth):
                terminalreporter.write_line(line, yellow=isinstance(line, YellowLine))

    def pytest_unconfigure(self, config: pytest.Config) -> None:  # also after Ctrl-C: queued instances are cancelled
        self.progress.stop_line()
        if self.run.pool is not None:
            self.run.pool.close()
        self.run.parts.close(STOP_GRACE_S)

    @pytest.hookimpl(optionalhook=True)
    def pytest_json_runtest_metadata(self, item: pytest.Item, call: Any) -> dict | None:
        """pytest-json-report: each test's result fields."""
        if RESULT in item.stash and call.when in ("setup", "call"):
            return {USER_PROPERTY: item.stash[RESULT]}
        return None


def stop_message(reason: str) -> str:
    """Why the run stopped, in the words of the command typed (`--resume` under `run`, `--apibank-resume`
    under pytest), and how to finish it."""
    import re

    spoken = re.sub(r"--apibank-[a-z-]+", lambda match: settings.spoken(match.group()), reason)
    if settings.flag("resume") not in spoken:
        spoken += f"; rerun with {settings.flag('resume')} to finish"
    return STOPPED + spoken
