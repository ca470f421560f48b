"""`apibank-bench run`'s side of its pytest session (registered by the command, never by plain pytest)."""

from __future__ import annotations

import pytest

from apibank_bench.plugin.run import quiet_tests, run_config
from apibank_bench.plugin.keys import COMMAND_OUTPUT


class RunOutput:
    """`run`'s side of the pytest session: a wrong answer is a result, so pytest prints nothing per
    instance (the progress line says how the run goes), and the closing table comes last.

    Also catches the writer's summary, and whether the suite stopped itself, as the session ends.
    """

    summary: dict | None = None
    stopped: str | None = None
    regression: bool = False
    writer = None

    def pytest_configure(self, config) -> None:
        config.stash[COMMAND_OUTPUT] = True

    def pytest_sessionstart(self, session) -> None:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None and quiet_tests(session.config):
            reporter.showfspath = False  # not even the test file's name: the progress line has the line

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report, config):
        """An instance's outcome in the run's words (correct, wrong, errored, not run), no character per test
        and no FAILURES section: the closing table counts them."""
        if "test_apibank[" not in report.nodeid or not quiet_tests(config):
            return None
        if report.when == "call" and not report.skipped:
            return ("correct" if report.passed else "wrong"), "", ""
        if report.skipped:
            return "not run", "", ""
        if report.failed:  # an error row (its setup failed), or a crashed worker
            return "errored", "", ""
        return "", "", ""

    def pytest_sessionfinish(self, session) -> None:
        reason = session.shouldstop
        self.stopped = reason if isinstance(reason, str) and reason.startswith("apibank:") else None

    def pytest_unconfigure(self, config) -> None:
        self.writer = config.pluginmanager.get_plugin("apibank-writer")
        self.summary = getattr(self.writer, "summary", None)
        verdict = getattr(config.pluginmanager.get_plugin("apibank-gate"), "verdict", None)
        self.regression = bool(verdict and verdict.worse)
        if self.summary:
            from apibank_bench.plugin.writer import closing_lines

            lines = closing_lines(run_config(config), self.summary, self.writer.error_reasons,
                                  config.get_terminal_writer().fullwidth)
            print("\n".join(lines), flush=True)
