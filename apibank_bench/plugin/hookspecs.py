"""The benchmark plugin's own hooks (added with `pluginmanager.add_hookspecs`, as pytest-xdist's
`newhooks.py`): where another plugin needs the run's result, it implements one of these rather than
looking the benchmark's plugin up by name."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from apibank_bench.runs.benchmark_run import BenchmarkRun


@pytest.hookspec(firstresult=True)
def pytest_apibank_owns_screen(config: pytest.Config) -> bool | None:
    """True when a command (`apibank-bench run`) owns the screen: no per-test output, its own closing table."""


def pytest_apibank_run_started(run: BenchmarkRun) -> None:
    """The controller's run (runs.benchmark_run.BenchmarkRun) before any instance, its folder accepted.
    Raise pytest.UsageError to refuse it (the regression gate's baseline check)."""


def pytest_apibank_run_finished(run: BenchmarkRun, session: pytest.Session) -> None:
    """The controller's run has ended: `run.outcome.summary` is written (None when no row was). An implementation
    may judge it (`run.judged(verdict)`, rewriting summary.json) and set `session.exitstatus`."""
