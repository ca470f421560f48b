"""`apibank-bench run`'s side of its pytest session (registered by the command, never by plain pytest)."""

from __future__ import annotations

from typing import Any

import pytest


class RunOutput:
    """`run`'s side of the pytest session: a wrong answer is a result, so pytest prints nothing per
    instance (the progress line says how the run goes), and the closing table comes last.

    Also catches the run as it ends (its summary, the gate's verdict), and whether the suite stopped itself.
    """

    run: Any = None  #: the session's run (runs.benchmark_run.BenchmarkRun), once it has ended
    stopped: str | None = None

    @property
    def summary(self) -> dict | None:
        return self.run.outcome.summary if self.run is not None else None

    @property
    def regression(self) -> bool:
        verdict = self.run.outcome.verdict if self.run is not None else None
        return bool(verdict and verdict.worse)

    def pytest_apibank_owns_screen(self, config: pytest.Config) -> bool:
        return True

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None and self.quiet(session.config):
            reporter.showfspath = False  # not even the test file's name: the progress line has the line

    @staticmethod
    def quiet(config: pytest.Config) -> bool:
        """Whether pytest prints nothing per instance (not with `run -v`, which asks for a line each)."""
        return config.option.verbose <= 0

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report: pytest.TestReport, config: pytest.Config) -> tuple[str, str, str] | None:
        """An instance's outcome in the run's words (correct, wrong, errored, not run), no character per test
        and no FAILURES section: the closing table counts them."""
        if not self.quiet(config):  # `run` collects the benchmark alone: every test is an instance
            return None
        if report.when == "call" and not report.skipped:
            return ("correct" if report.passed else "wrong"), "", ""
        if report.skipped:
            return "not run", "", ""
        if report.failed:  # an error row (its setup failed), or a crashed worker
            return "errored", "", ""
        return "", "", ""

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        reason = session.shouldstop
        self.stopped = reason if isinstance(reason, str) and reason.startswith("apibank:") else None

    def pytest_apibank_run_finished(self, run: Any, session: pytest.Session) -> None:
        self.run = run

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.summary:
            from apibank_bench.runs.closing_table import YellowLine, closing_lines

            writer = config.get_terminal_writer()
            lines = closing_lines(self.run.cfg, self.summary, self.run.tally.error_reasons, writer.fullwidth)
            print("\n".join(writer.markup(line, yellow=True) if isinstance(line, YellowLine) else line
                            for line in lines), flush=True)
