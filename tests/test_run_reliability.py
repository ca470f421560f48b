"""Runs against a scripted endpoint: instances in flight, errors kept apart from wrong answers, early stops,
resume of errored instances, and bad input refused before anything is scored."""

from __future__ import annotations

import json
import shutil

import pytest

from apibank_bench.core.exit_codes import ExitCode
from apibank_bench.core.paths import PROJECT_ROOT
from apibank_bench.runs.results import read_jsonl

from openai_stub import OpenAIStub, Reply, error, oversized, surrogate
from helpers import bench, comparable, EVAL_IDS, mixed, run_command, task_of

def test_concurrent_sequential_and_xdist_runs_give_identical_results(tmp_path):
    with OpenAIStub(default=mixed, hold=0.05) as stub:
        common = ("--apibank-model", "stub", "--apibank-base-url", stub.url, "--apibank-limit", "24",
                  "--apibank-no-cache")
        concurrent = bench(tmp_path / "concurrent", *common, "--apibank-concurrency", "8")
        sequential = bench(tmp_path / "sequential", *common, "--apibank-concurrency", "1", "-n", "0")
        xdist = bench(tmp_path / "xdist", *common, "-n", "2")
        assert stub.max_concurrent > 1  # the concurrent run really overlapped its instances
    for run in (concurrent, sequential, xdist):
        assert run.returncode == 1 and "12 failed, 12 passed" in run.stdout, run.stdout[-2000:]
    reference = comparable(tmp_path / "sequential")
    assert [line["id"] for line in reference[0]] == EVAL_IDS[:24]
    assert comparable(tmp_path / "concurrent") == reference
    assert comparable(tmp_path / "xdist") == reference
    traces = {path.name: json.loads(path.read_text())["agents"][0]["answer"]
              for path in (tmp_path / "sequential" / "traces").glob("*.json")}
    assert traces == {path.name: json.loads(path.read_text())["agents"][0]["answer"]
                      for path in (tmp_path / "concurrent" / "traces").glob("*.json")}


def test_x_stops_a_concurrent_run_without_solving_the_rest(tmp_path):
    with OpenAIStub(default=Reply(text="[NoSuchApi(x='1')]"), hold=0.3) as stub:
        run = bench(tmp_path, "--apibank-model", "stub", "--apibank-base-url", stub.url, "--apibank-limit", "100",
                    "--apibank-no-cache", "--apibank-concurrency", "4", "-x")
        requests = len(stub.chat_requests)
    assert run.returncode == 1 and "1 failed" in run.stdout, run.stdout[-2000:]
    # The first instance fails; at most the instances already in flight were asked, not the other 96.
    assert requests <= 8, requests
    assert len(read_jsonl(tmp_path / "results.jsonl")) == 1


def test_endpoint_errors_are_error_rows_and_resume_reruns_exactly_them(tmp_path):
    broken = set(EVAL_IDS[2:12:3])  # 4 of the first 12 instances get HTTP 500

    def flaky(body: dict) -> Reply:
        return Reply(status=500) if task_of(body).combined_id in broken else mixed(body)

    args = ("--model", "stub", "--limit", "12", "--max-retries", "0", "--no-cache")
    with OpenAIStub(default=flaky) as stub:
        first = run_command(tmp_path, *args, "--base-url", stub.url)
    assert first.returncode == 1, first.stdout[-2000:] + first.stderr[-2000:]
    results = {line["id"]: line for line in read_jsonl(tmp_path / "results.jsonl")}
    errored = {task_id for task_id, line in results.items() if line["stage"] == "error"}
    assert errored == broken
    assert all("HTTP 500" in results[task_id]["error"] and not results[task_id]["correct"] for task_id in broken)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert (summary["errors"], summary["total"], summary["complete"]) == (4, 12, False)
    assert summary["failures_by_stage"]["error"] == 4
    assert {results[task_id]["reason"] for task_id in broken} == {"error:endpoint"}
    assert summary["failures_by_reason"]["error:endpoint"] == 4
    shown = [line for line in first.stdout.splitlines() if line.startswith("error:endpoint x4: model error: ")]
    assert len(shown) == 1 and "HTTP 500" in shown[0]  # the count, with one of its messages
    assert summary["accuracy_completed"] == summary["correct"] / 8
    record = summary["config"]["provenance"]
    assert record["endpoint_models"]["data"][0]["id"] == "stub-model"  # what the endpoint says it served
    assert set(record["prompt_hashes"]) == {"solver"}
    assert summary["config"]["model"]["temperature"] == 0.2
    assert "INCOMPLETE" in first.stdout and f"{len(broken)} error" in first.stdout

    with OpenAIStub(default=mixed) as recovered:
        second = run_command(tmp_path, *args, "--base-url", recovered.url, "--resume")
        asked = {task_of(body).combined_id for body in recovered.chat_requests}
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-2000:]
    assert asked == broken
    results = read_jsonl(tmp_path / "results.jsonl")
    assert [line["id"] for line in results] == EVAL_IDS[:12]
    assert not any(line["stage"] == "error" for line in results)
    assert json.loads((tmp_path / "summary.json").read_text())["complete"] is True


def test_a_dead_endpoint_trips_the_circuit_breaker(tmp_path):
    """Every answer a 500 after 0.05 s, one instance at a time: 40 of them take 2 s, the window is 0.5 s."""
    with OpenAIStub(default=Reply(status=500, delay=0.05)) as stub:
        run = run_command(tmp_path, "--model", "stub", "--base-url", stub.url, "--limit", "40", "--max-retries", "0",
                          "--no-cache", "--concurrency", "1", "--down-after", "0.5")
        requests = len(stub.chat_requests)
    assert run.returncode == 1, run.stdout[-2000:]
    assert "the endpoint answered no model request for" in run.stdout
    results = read_jsonl(tmp_path / "results.jsonl")
    assert 3 <= len(results) < 40 and requests < 40
    assert all(line["stage"] == "error" for line in results)  # never a wrong answer
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["not_run"] == 40 - len(results) and summary["selected"] == 40


def test_an_instance_over_its_time_limit_is_an_error_row(tmp_path):
    with OpenAIStub(default=Reply(text="[GetToday()]", delay=3.0)) as stub:
        run = bench(tmp_path, "--apibank-model", "stub", "--apibank-base-url", stub.url, "--apibank-limit", "1",
                    "--apibank-no-cache", "--apibank-instance-timeout", "0.5")
    assert "1 error" in run.stdout, run.stdout[-2000:]
    (line,) = read_jsonl(tmp_path / "results.jsonl")
    assert line["stage"] == "error" and "time limit" in line["error"] and line["reason"] == "error:time_limit"


def test_a_failed_start_leaves_the_earlier_results_alone(tmp_path):
    assert bench(tmp_path, "--apibank-model", "gold", "--apibank-limit", "3").returncode == 0
    before = (tmp_path / "results.jsonl").read_text()
    run = run_command(tmp_path, "--model", "stub", "--base-url", "http://127.0.0.1:9/v1", "--limit", "3", "--overwrite")
    assert run.returncode == ExitCode.UNREACHABLE, run.stdout[-2000:]
    assert "cannot reach the model endpoint" in run.stdout + run.stderr
    assert (tmp_path / "results.jsonl").read_text() == before
    assert json.loads((tmp_path / "summary.json").read_text())["total"] == 3


@pytest.mark.parametrize("args, message", [
    (("--limit", "-1"), "--limit"),
    (("--offset", "1000"), "selection is empty (check --level, --limit, --offset, --only, --shard)"),
    (("--shard", "x"), "--shard"),
    (("--topology", "ring"), "--topology"),
    (("--only", "level-1::NoSuchTask.jsonl::0"), "manifests/apibank_eval_ids.json"),
])
def test_bad_selections_are_one_clear_line_naming_runs_flags(tmp_path, args, message):
    run = run_command(tmp_path, "--model", "gold", *args)
    assert run.returncode == 2, run.stdout[-2000:] + run.stderr[-2000:]
    assert message in run.stdout + run.stderr
    # `run` users are told `run`'s flags, and no exception class precedes the message.
    assert "--apibank-" not in run.stdout + run.stderr
    assert "Traceback" not in run.stdout + run.stderr and "Error:" not in run.stdout + run.stderr


def test_pytest_users_are_told_the_pytest_options(tmp_path):
    run = bench(tmp_path, "--apibank-model", "gold", "--apibank-offset", "1000")
    assert run.returncode == 4, run.stdout[-2000:] + run.stderr[-2000:]
    assert "check --apibank-level, --apibank-limit, --apibank-offset" in run.stdout + run.stderr


def test_an_endpoint_without_a_model_name_is_a_usage_error(tmp_path):
    with OpenAIStub() as stub:
        run = run_command(tmp_path, "--base-url", stub.url, env={"APIBANK_MODEL": ""})
        assert not stub.chat_requests
    assert run.returncode == 2 and "pass --model NAME" in run.stdout + run.stderr, run.stdout[-2000:]
    assert "--apibank-" not in run.stdout + run.stderr and "_pytest" not in run.stdout + run.stderr


def test_data_that_does_not_match_the_lock_is_refused_naming_the_file(tmp_path, apibank_root):
    root = tmp_path / "root"
    shutil.copytree(apibank_root, root)
    database = root / "init_database" / "Alarm.json"
    database.write_text(database.read_text(encoding="utf-8").replace("2023", "2024"), encoding="utf-8")
    run = run_command(tmp_path / "out", "--model", "gold", "--root", str(root))
    assert run.returncode == 2, run.stdout[-2000:] + run.stderr[-2000:]
    assert "does not match" in run.stdout + run.stderr and "init_database/Alarm.json" in run.stdout + run.stderr
    assert not (tmp_path / "out" / "results.jsonl").exists()


def test_a_crashed_xdist_worker_leaves_an_error_row(tmp_path):
    victim = EVAL_IDS[3]
    run = bench(tmp_path, "--apibank-model", "gold", "--apibank-limit", "8", "-n", "2", "-p", "crash_plugin",
                env={"APIBANK_CRASH_ON": victim, "PYTHONPATH": str(PROJECT_ROOT / "tests")})
    results = {line["id"]: line for line in read_jsonl(tmp_path / "results.jsonl")}
    assert set(results) == set(EVAL_IDS[:8]), run.stdout[-3000:]
    assert results[victim]["stage"] == "error" and "crash" in results[victim]["error"]
    assert results[victim]["reason"] == "error:worker_crash"
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert (summary["total"], summary["errors"]) == (8, 1)


def test_hostile_answers_lose_nothing_under_xdist(tmp_path):
    """A lone surrogate and a 2 MB answer: every instance gets its line, nothing crashes, stored text is capped."""
    def hostile(body: dict) -> Reply:
        return surrogate() if EVAL_IDS.index(task_of(body).combined_id) % 2 else oversized(2_000_000)

    with OpenAIStub(default=hostile) as stub:
        run = bench(tmp_path, "--apibank-model", "stub", "--apibank-base-url", stub.url, "--apibank-limit", "6",
                    "--apibank-no-cache", "--apibank-toolsearcher-scorer", "keyword", "-n", "2")
    assert "INTERNALERROR" not in run.stdout and run.returncode in (0, 1), run.stdout[-3000:]
    results = read_jsonl(tmp_path / "results.jsonl")
    assert [line["id"] for line in results] == EVAL_IDS[:6]
    assert not any(line["stage"] == "error" for line in results)  # answers, scored, not harness failures
    traces = [json.loads(path.read_text()) for path in (tmp_path / "traces").glob("*.json")]
    cut = [trace["agents"][0]["answer_truncated"] for trace in traces if "answer_truncated" in trace["agents"][0]]
    assert len(cut) == 3 and all(note["length"] > 2_000_000 and len(note["sha256"]) == 64 for note in cut)
    assert all(path.stat().st_size < 1_000_000 for path in (tmp_path / "traces").glob("*.json"))
    assert "\\ud800" in (tmp_path / "predictions.jsonl").read_text()  # a lone surrogate, stored as an escape


def test_a_resumed_runs_wall_time_covers_both_parts(tmp_path):
    with OpenAIStub(default=Reply(status=500)) as dead:
        run_command(tmp_path, "--model", "stub", "--base-url", dead.url, "--limit", "3", "--max-retries", "0",
                    "--no-cache", "--down-after", "0")
    first = json.loads((tmp_path / "summary.json").read_text())["wall_time_s"]
    with OpenAIStub(default=mixed) as alive:
        assert run_command(tmp_path, "--model", "stub", "--base-url", alive.url, "--limit", "3", "--resume",
                           "--no-cache").returncode == 0
    assert json.loads((tmp_path / "summary.json").read_text())["wall_time_s"] > first


def test_429s_are_counted_as_rate_limits_with_the_time_waited_not_as_errors(tmp_path):
    throttled = [error(429, {"Retry-After": "1"})] * 3
    with OpenAIStub(*throttled, default=mixed) as stub:
        run = run_command(tmp_path, "--model", "stub", "--base-url", stub.url, "--limit", "2", "--no-cache",
                          "--concurrency", "1", "--max-retries", "5")
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    [endpoint] = summary["endpoints"].values()
    assert (endpoint["errors"], endpoint["rate_limited"], summary["errors"]) == (0, 3, 0)
    assert endpoint["rate_limit_wait_s"] >= 3.0  # each wait honoured the server's Retry-After of 1 s
    [line] = [line for line in run.stdout.splitlines() if line.startswith("rate limits:")]
    assert line.startswith("rate limits: 3 requests were answered HTTP 429") and \
        f"{endpoint['rate_limit_wait_s']:.1f} s spent waiting" in line
