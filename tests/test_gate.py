"""The regression gate: `--apibank-baseline DIR` fails the session only when the run is significantly
worse than the baseline on their paired instances (exact McNemar), and refuses a baseline made
with another scorer."""

from __future__ import annotations

import json

import pytest

from apibank_bench.agents.prompts import format_history
from apibank_bench.core.exit_codes import ExitCode
from apibank_bench.data.tasks import get_task

from openai_stub import OpenAIStub, Reply
from helpers import bench, EVAL_IDS, run_command

HISTORIES = {format_history(task): task for task in map(get_task, EVAL_IDS)}


def task_of(body: dict):
    """The eval task a request is about (the longest dialogue its prompt contains)."""
    prompt = body["messages"][-1]["content"]
    return max(((h, t) for h, t in HISTORIES.items() if h and h in prompt), key=lambda pair: len(pair[0]))[1]


@pytest.fixture(scope="module")
def gold_baseline(tmp_path_factory):
    """A gold run over the first 100 eval instances: every instance right."""
    out = tmp_path_factory.mktemp("baseline")
    assert bench(out, "--apibank-model", "gold", "--apibank-limit", "100").returncode == 0
    return out


def wrong_on(ids: set[str]):
    def respond(body: dict) -> Reply:
        task = task_of(body)
        return Reply(text="[NoSuchApi(x='1')]" if task.combined_id in ids else f"[{task.gold_call[1:-1]}]")
    return respond


def gated(out, baseline, respond, *args: str):
    with OpenAIStub(default=respond) as stub:
        return bench(out, "--apibank-model", "stub", "--apibank-base-url", stub.url, "--apibank-no-cache",
                     "--apibank-baseline", str(baseline), *args)


def test_a_run_equal_to_the_baseline_passes(tmp_path, gold_baseline):
    run = bench(tmp_path, "--apibank-model", "gold", "--apibank-limit", "20", "--apibank-baseline", str(gold_baseline))
    assert run.returncode == 0, run.stdout[-3000:]
    assert "apibank gate: passed: not worse than the baseline: +0.0% on 20 paired instances (0 won, 0 lost)" in run.stdout
    gate = json.loads((tmp_path / "summary.json").read_text())["gate"]
    assert (gate["worse"], gate["paired"], gate["mcnemar_p"]) == (False, 20, 1.0)


def test_a_run_worse_on_20_paired_instances_fails_with_the_p_value(tmp_path, gold_baseline):
    report = tmp_path / "report.json"
    run = gated(tmp_path, gold_baseline, wrong_on(set(EVAL_IDS)), "--apibank-limit", "20", "--json-report",
                "--json-report-file", str(report))
    assert run.returncode == ExitCode.WORSE, run.stdout[-3000:]  # as under `run`: not 1 (incomplete), not 4 (usage)
    # the JSON report (written before pytest's sessionfinish) carries the verdict and the gate's exit status
    carried = json.loads(report.read_text())
    assert carried["apibank"]["gate"]["worse"] is True and carried["exitcode"] == ExitCode.WORSE
    p = 2 * 0.5 ** 20  # all 20 discordant pairs go one way: twice the binomial tail
    assert f"REGRESSION: significantly worse than the baseline: -100.0% on 20 paired instances (0 won, 20 lost), " \
           f"exact McNemar p = {p:.1e}, alpha 0.05" in run.stdout
    assert json.loads((tmp_path / "summary.json").read_text())["gate"]["worse"] is True


def test_a_run_3_worse_on_100_passes_within_noise(tmp_path, gold_baseline):
    run = gated(tmp_path, gold_baseline, wrong_on(set(EVAL_IDS[10:40:10])), "--apibank-limit", "100")
    assert "3 failed, 97 passed" in run.stdout, run.stdout[-3000:]
    assert run.returncode == 0  # the wrong answers are the gate's to weigh, and it is within noise
    assert ("apibank gate: passed: lower than the baseline but within noise: -3.0% on 100 paired instances "
            "(0 won, 3 lost), exact McNemar p = 0.2500, alpha 0.05") in run.stdout


def test_errors_are_never_regressions(tmp_path, gold_baseline):
    def respond(body: dict) -> Reply:
        return Reply(status=500) if task_of(body).combined_id in EVAL_IDS[:15] else wrong_on(set())(body)

    # No circuit breaker: 15 failures answered before the 5 successes must not stop the run.
    run = gated(tmp_path, gold_baseline, respond, "--apibank-limit", "20", "--apibank-max-retries", "0",
                "--apibank-down-after", "0")
    assert "errors left out: 0 in the baseline, 15 in this run" in run.stdout, run.stdout[-3000:]
    assert "apibank gate: passed: not worse than the baseline: +0.0% on 5 paired instances" in run.stdout
    assert run.returncode == 1 and "INCOMPLETE" in run.stdout  # incomplete, not a regression


def test_a_baseline_with_another_scorer_is_refused_before_anything_runs(tmp_path, gold_baseline):
    run = bench(tmp_path, "--apibank-model", "gold", "--apibank-limit", "5", "--apibank-baseline", str(gold_baseline),
                "--apibank-toolsearcher-scorer", "keyword")
    assert run.returncode == ExitCode.PYTEST_USAGE, run.stdout[-3000:] + run.stderr[-3000:]
    assert "refused" in run.stderr and "scorer" in run.stderr
    assert not (tmp_path / "results.jsonl").exists()


def test_run_baseline_exits_worse_on_a_regression(tmp_path, gold_baseline):
    with OpenAIStub(default=wrong_on(set(EVAL_IDS))) as stub:
        run = run_command(tmp_path, "--model", "stub", "--base-url", stub.url, "--no-cache", "--limit", "20",
                          "--baseline", str(gold_baseline))
    assert run.returncode == ExitCode.WORSE, run.stdout[-3000:] + run.stderr[-3000:]
    assert "REGRESSION" in run.stdout
