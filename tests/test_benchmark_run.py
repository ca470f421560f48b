"""A run without pytest: `BenchmarkRun` fed by a script writes the rows the pytest path writes."""

from __future__ import annotations

import urllib.request

import pytest

from apibank_bench.core import settings
from apibank_bench.runs.benchmark_run import BenchmarkRun
from apibank_bench.runs.folder import FolderTaken
from apibank_bench.runs.results import read_jsonl
from openai_stub import OpenAIStub
from helpers import mixed, run_command, TIMING


def headless(out_dir, **given) -> BenchmarkRun:
    cfg = settings.from_environment(out_dir=str(out_dir), **given)
    run = BenchmarkRun(cfg)
    run.open_folder()
    run.solve()
    return run


def lines(out_dir) -> tuple[list, list, list[str]]:
    """results.jsonl less its timing fields, predictions.jsonl, and the trace files."""
    results = [{k: v for k, v in line.items() if k not in TIMING} for line in read_jsonl(out_dir / "results.jsonl")]
    return results, read_jsonl(out_dir / "predictions.jsonl"), sorted(p.name for p in (out_dir / "traces").iterdir())


def test_a_script_runs_the_gold_self_check_and_gets_the_rows_the_pytest_run_writes(tmp_path):
    run = headless(tmp_path / "script", model="gold", limit=6)
    assert run.outcome.summary is not None and run.outcome.summary["total"] == 6 and run.outcome.summary["correct"] == 6
    assert run.outcome.summary["config"]["run"]["model"] == "gold" and run.outcome.summary["complete"]
    by_pytest = run_command(tmp_path / "pytest", "--model", "gold", "--limit", "6")
    assert by_pytest.returncode == 0, by_pytest.stdout[-2000:]
    results, predictions, traces = lines(tmp_path / "script")
    assert len(results) == len(predictions) == len(traces) == 6  # every row has its prediction and trace
    assert (results, predictions, traces) == lines(tmp_path / "pytest")


def test_a_script_runs_a_scripted_model_and_gets_the_rows_the_pytest_run_writes(tmp_path):
    with OpenAIStub(default=mixed) as stub:
        run = headless(tmp_path / "script", base_url=[stub.url], model="stub-model", limit=6, cache=False)
        by_pytest = run_command(tmp_path / "pytest", "--base-url", stub.url, "--model", "stub-model", "--limit", "6",
                                "--no-cache")
    assert by_pytest.returncode == 0, by_pytest.stdout[-2000:]
    summary = run.outcome.summary or {}
    assert summary["correct"] == 3 and summary["total"] == 6  # `mixed`: every other instance right
    assert summary["endpoints"] and run.tally.done == 6  # the script's client counted its requests
    assert lines(tmp_path / "script") == lines(tmp_path / "pytest")


def test_a_script_starts_the_embedded_model_once_and_stops_it(tmp_path, monkeypatch):
    """llama-cpp-python's server stood in by the scripted stub (tests/embedded_stand_in.py)."""
    starts = tmp_path / "starts.log"
    monkeypatch.setenv("APIBANK_STARTS_LOG", str(starts))
    from apibank_bench.llm import embedded_launcher

    monkeypatch.setattr(embedded_launcher, "start_embedded", embedded_launcher.start_embedded)
    import embedded_stand_in  # noqa: F401 - replaces the server's start for this test

    run = headless(tmp_path / "out", limit=3, cache=False)
    assert run.outcome.summary and run.outcome.summary["total"] == 3 and run.outcome.summary["errors"] == 0
    assert len(starts.read_text().splitlines()) == 1  # one server for the run
    assert run.parts.local_url and run.outcome.summary["config"]["provenance"]["endpoint_models"]  # asked where it answered
    with pytest.raises(OSError):  # stopped with the run
        urllib.request.urlopen(f"{run.parts.local_url}/models", timeout=5)


def test_a_script_keeps_one_run_per_folder(tmp_path):
    headless(tmp_path, model="gold", limit=2)
    with pytest.raises(FolderTaken, match="holds another run's results"):
        BenchmarkRun(settings.from_environment(out_dir=str(tmp_path), model="gold", limit=3)).open_folder()
    resumed = headless(tmp_path, model="gold", limit=3, resume=True)
    assert resumed.selection.to_run == [resumed.cases()[2]] and resumed.outcome.summary and resumed.outcome.summary["total"] == 3


def test_a_script_without_pytest_resolves_its_settings_and_runs(tmp_path):
    """A script is a composition root like the CLI and the plugin: one explicit hand_down() call gives
    core's settings their choices, then it resolves settings and runs; without it, resolving says so."""
    import subprocess
    import sys

    script = ("import sys\n"
              "from apibank_bench.core import settings\n"
              "from apibank_bench.runs.benchmark_run import BenchmarkRun\n"
              "from apibank_bench.runs.setting_rules import hand_down\n"
              "if sys.argv[2] == 'hand down':\n"
              "    hand_down()\n"
              "cfg = settings.from_environment(model='gold', limit=3, out_dir=sys.argv[1])\n"
              "run = BenchmarkRun(cfg)\n"
              "run.open_folder()\n"
              "summary = run.solve()\n"
              "print(summary['correct'], summary['total'])\n")
    forgot = subprocess.run([sys.executable, "-c", script, str(tmp_path / "no"), "no"], capture_output=True,
                            text=True, timeout=600)
    assert forgot.returncode != 0 and "runs.setting_rules.hand_down() first" in forgot.stderr
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "run"), "hand down"], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-2:] == ["3", "3"]
    assert len(read_jsonl(tmp_path / "run" / "results.jsonl")) == 3


def test_a_run_builds_each_roles_model_settings_once_and_describes_them_as_built(tmp_path, monkeypatch):
    """The clients' ModelConfig is what summary.json describes: built once per model, not again for the summary."""
    from apibank_bench.agents import models

    built = []
    real = models.model_config

    def counted(cfg, *args, **kwargs):
        built.append(cfg.model)
        return real(cfg, *args, **kwargs)

    monkeypatch.setattr(models, "model_config", counted)
    with OpenAIStub(default=mixed) as a, OpenAIStub(default=mixed) as b:
        run = headless(tmp_path, topology="sequential", base_url=[a.url], model="A", model_role=[f"final=B@{b.url}"],
                       limit=2, cache=False)
    summary = run.outcome.summary or {}
    assert sorted(built) == ["A", "B"]  # the default's and the role's: each once (twice each before)
    described = summary["config"]["model"]
    assert described["model"] == "A" and described["role_models"]["final"]["model"] == "B"
    assert described["request_fields"] == models.request_fields(run.parts.built_models.default.config)
