"""The regression gate: `pytest bench_tests --apibank-baseline DIR [--apibank-gate-alpha 0.05]`
(and `apibank-bench run --baseline DIR`).

After the run, its results are paired with the baseline folder's on the instances both have
(reports.pairs' pairing, `compare`'s too: errors in either run are left out, never counted as
regressions; runs of several epochs pair on epoch 0). The session fails only when the run is significantly
worse: it lost more instances than it won and the exact McNemar p-value is below alpha. A run
that is lower but within noise passes, and the closing lines say so; with a gate the wrong
answers themselves no longer fail the session (they are what the gate weighs), while errors and
cases that did not run still make it incomplete. A baseline made with other data (the lock's
hash) or another ToolSearcher scorer is refused before anything runs.

This module is a pytest plugin (a `pytest11` entry point of the package, and named by the checkout's
conftest.py): the gate sits above the plugin layer, on the comparison it shares with `compare`. As every
pytest session of an environment that holds the package loads it, it imports the comparison only when a
run with a baseline asks for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from apibank_bench.core.exit_codes import ExitCode
from apibank_bench.core.settings import flag

if TYPE_CHECKING:
    from apibank_bench.reports.pairs import Run

#: What a baseline must share with the run (of MUST_AGREE: the rules of `reports.pairs.pair`;
#: the selection may differ).
MUST_MATCH = ("data lock", "ToolSearcher scorer")
#: The exit status when the gate fails, under pytest as under `run` (never pytest's 1: that is an incomplete run)
REGRESSION_EXIT = ExitCode.WORSE


class BaselineRefused(ValueError):
    """The baseline cannot be compared with this run."""


@dataclass
class Verdict:
    comparison: dict
    alpha: float
    worse: bool

    @property
    def line(self) -> str:
        from apibank_bench.reports.pairs import format_p

        overall = self.comparison["overall"]
        won, lost, p = len(overall["won"]), len(overall["lost"]), overall["mcnemar_p"]
        facts = (f"{overall['difference']:+.1%} on {overall['n']} paired instances ({won} won, {lost} lost), "
                 f"exact McNemar p = {format_p(p)}, alpha {self.alpha:g}")
        if overall["min_detectable_difference"] is None:  # a pass that could not have failed: say so
            facts += "; no difference is detectable at 80 % power on these instances"
        if self.worse:
            return f"apibank gate: REGRESSION: significantly worse than the baseline: {facts}"
        if lost > won:
            return f"apibank gate: passed: lower than the baseline but within noise: {facts}"
        return f"apibank gate: passed: not worse than the baseline: {facts}"

    def to_dict(self) -> dict:
        overall = self.comparison["overall"]
        return {"baseline": self.comparison["baseline"], "alpha": self.alpha, "worse": self.worse,
                "paired": overall["n"], "difference": overall["difference"], "mcnemar_p": overall["mcnemar_p"],
                "won": len(overall["won"]), "lost": len(overall["lost"]),
                "min_detectable_difference": overall["min_detectable_difference"], "verdict": self.line}


def check_baseline(baseline: Run, run_config: dict) -> None:
    """Refuse a baseline recorded with other data or another scorer than `run_config` (a summary's `config`)."""
    from apibank_bench.reports.pairs import Run, mismatches

    problems = mismatches([baseline, Run("this run", Path("."), [], {"config": run_config})], MUST_MATCH)
    if problems:
        raise BaselineRefused("; ".join(problems))
    if not baseline.rows:
        raise BaselineRefused(f"the baseline {baseline.path} has no results rows")


def judge(baseline: Run, run: Run, alpha: float = 0.05, seed: int = 0) -> Verdict:
    """Pair the run with the baseline and decide: significantly worse, or not."""
    from apibank_bench.reports.pairs import compare_pair, significantly_worse

    check_baseline(baseline, run.config)
    comparison = compare_pair(baseline, run, seed)
    overall = comparison["overall"]
    worse = significantly_worse(overall, alpha)
    return Verdict(comparison, alpha, worse)


def report_lines(verdict: Verdict) -> list[str]:
    from apibank_bench.reports.compare import paired_lines

    comp = verdict.comparison
    head = (f"{comp['paired']} paired instances with {comp['baseline']} ({comp['shared']} shared; errors left out: "
            f"{comp['errors_excluded']['baseline']} in the baseline, {comp['errors_excluded']['run']} in this run)")
    return [head, *paired_lines(comp), verdict.line]


class Gate:
    """The controller's gate: checks the baseline as the run starts, judges the run as it ends (the
    benchmark plugin's hooks, `plugin.hookspecs`)."""

    def __init__(self) -> None:
        self.baseline: Run | None = None
        self.verdict: Verdict | None = None
        self.problem: str | None = None  #: why there was nothing to judge

    def pytest_apibank_run_started(self, run) -> None:
        cfg = run.cfg
        if not cfg.baseline:
            return
        from apibank_bench.reports.pairs import load_run
        from apibank_bench.runs.provenance import provenance

        try:
            self.baseline = load_run(Path(cfg.baseline), str(cfg.baseline))
            # The run's config as its summary will record it: `provenance` is the record, with the
            # data hash one level down (config.provenance.data_hash), where the baseline has it.
            check_baseline(self.baseline, {"run": cfg.to_dict(), **provenance(cfg)})
        except (FileNotFoundError, ValueError) as exc:
            raise pytest.UsageError(f"apibank: {flag('baseline')} {cfg.baseline}: refused: {exc}") from None

    def pytest_apibank_run_finished(self, run, session) -> None:
        if self.baseline is None or self.verdict is not None:
            return
        summary = run.outcome.summary
        if not summary:
            self.problem = "apibank gate: nothing ran, nothing to judge"
            return
        from apibank_bench.reports.pairs import load_run
        from apibank_bench.runs.results import write_summary

        out_dir = run.out_dir
        try:
            self.verdict = judge(self.baseline, load_run(out_dir, "run"), run.cfg.gate_alpha)
            run.judged(self.verdict)
        except (BaselineRefused, FileNotFoundError) as exc:  # a clean line and a usage error, never a traceback
            self.problem = f"apibank gate: {flag('baseline')} {self.baseline.path}: refused: {exc}"
            summary["gate"] = {"baseline": str(self.baseline.path), "refused": str(exc)}
            write_summary(out_dir, summary)
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
            return
        summary["gate"] = self.verdict.to_dict()
        write_summary(out_dir, summary)
        if session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            # The gate decides: wrong answers are what it weighs; errors and unrun cases still fail.
            incomplete = summary.get("errors") or summary.get("not_run")
            session.exitstatus = (REGRESSION_EXIT if self.verdict.worse else
                                  pytest.ExitCode.TESTS_FAILED if incomplete else pytest.ExitCode.OK)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.verdict is None and self.problem is None:
            return
        terminalreporter.section("API-Bank regression gate")
        if self.verdict is None:
            terminalreporter.write_line(self.problem)
            return
        for line in report_lines(self.verdict)[:-1]:
            terminalreporter.write_line(line)
        terminalreporter.write_line(self.verdict.line, red=self.verdict.worse, green=not self.verdict.worse,
                                    bold=True)


def pytest_configure(config):
    config.pluginmanager.register(Gate(), "apibank-gate")  # only the controller's run calls its hooks

