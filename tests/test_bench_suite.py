"""The benchmark as a pytest suite, run for real in subprocesses (gold self-check and a scripted model)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest

from apibank_bench.agents.prompts import format_history
from apibank_bench.core.paths import PROJECT_ROOT
from apibank_bench.runs import versions
from apibank_bench.runs.results import read_jsonl
from apibank_bench.runs.schemas import FILE_NAMES, SCHEMA_DIR
from apibank_bench.data.tasks import get_task
from apibank_bench.llm.embedded_launcher import SERVER_MODULE

from openai_stub import OpenAIStub, Reply
from helpers import bench, EVAL_IDS, stable



def test_gold_run_passes_all_100_in_manifest_order_with_xdist(tmp_path):
    report = tmp_path / "report.json"
    run = bench(tmp_path, "--apibank-model", "gold", "--apibank-limit", "100", "-n", "2",
                "--json-report", f"--json-report-file={report}")
    assert run.returncode == 0, run.stdout[-3000:]
    assert "100 passed" in run.stdout
    assert "harness self-check" in run.stdout
    results = read_jsonl(tmp_path / "results.jsonl")
    assert [line["id"] for line in results] == EVAL_IDS
    assert all(line["correct"] for line in results)
    assert len(read_jsonl(tmp_path / "predictions.jsonl")) == 100
    assert len(list((tmp_path / "traces").glob("*.json"))) == 100
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["accuracy"] == 1.0
    assert {level: row["total"] for level, row in summary["by_level"].items()} == {"1": 33, "2": 33, "3": 34}
    assert summary["config"]["model"]["model"] == "gold"
    assert [round(bound, 3) for bound in summary["wilson_95"]] == [0.963, 1.0] and summary["flags"] == []
    record = summary["config"]["provenance"]
    assert record["data_hash"] and record["manifest_hash"] and record["started_at"] <= record["finished_at"]
    assert "--apibank-model gold" in record["command_line"]
    # pytest-json-report carries each test's result fields, through xdist too.
    payload = json.loads(report.read_text())
    assert payload["apibank"] == summary  # the run's summary beside the tests' records
    tests = payload["tests"]
    assert sorted(test["metadata"]["apibank"]["id"] for test in tests) == sorted(EVAL_IDS)
    assert all(test["metadata"]["apibank"]["correct"] for test in tests)
    # ... each a results row that follows the row's shipped schema, beside a summary that follows its own
    # (docs/schemas.md: what a consumer of the report reads)
    row_schema, summary_schema = (json.loads((SCHEMA_DIR / FILE_NAMES[kind]).read_text())
                                  for kind in (versions.RESULTS_ROW, versions.SUMMARY))
    for test in tests:
        jsonschema.validate(test["metadata"]["apibank"], row_schema)
        assert test["metadata"]["apibank"]["schema_version"] == 1
    jsonschema.validate(payload["apibank"], summary_schema)


def test_k_level3_selects_exactly_the_34_level3_instances(tmp_path):
    run = bench(tmp_path, "--apibank-model", "gold", "-k", "level3")
    assert run.returncode == 0, run.stdout[-3000:]
    results = read_jsonl(tmp_path / "results.jsonl")
    assert [line["id"] for line in results] == [i for i in EVAL_IDS if i.startswith("level-3::")]
    assert len(results) == 34


def test_two_shards_merged_equal_the_unsharded_run(tmp_path):
    args = ("--apibank-model", "gold", "--apibank-limit", "30")
    whole, first, second, merged = (tmp_path / name for name in ("whole", "s1", "s2", "merged"))
    assert bench(whole, *args).returncode == 0
    assert bench(first, *args, "--apibank-shard", "1/2").returncode == 0
    assert bench(second, *args, "--apibank-shard", "2/2").returncode == 0
    assert 0 < len(read_jsonl(first / "results.jsonl")) < 30
    merge = subprocess.run([sys.executable, "-m", "apibank_bench", "merge", str(first), str(second),
                            "--out", str(merged)], capture_output=True, text=True, cwd=PROJECT_ROOT)
    assert merge.returncode == 0, merge.stderr
    assert stable(read_jsonl(merged / "results.jsonl")) == stable(read_jsonl(whole / "results.jsonl"))
    assert len(list((merged / "traces").glob("*.json"))) == 30


# -- a scripted model -----------------------------------------------------------------


def _wrong_arguments(params: dict) -> dict:
    wrong = {key: ("zz-wrong" if isinstance(value, str) else -999) for key, value in params.items()}
    return wrong or {"unexpected": "zz-wrong"}


@pytest.fixture(scope="module")
def wrong_model():
    """Answers each of the first 30 eval instances wrongly, in a way that decides its failing stage."""
    tasks = [get_task(task_id) for task_id in EVAL_IDS[:30]]
    by_history = {format_history(task): task for task in tasks}
    expected = {}
    for index, task in enumerate(tasks):
        expected[task.combined_id] = ("parse", "api_name", "score")[index % 3]

    def answer(body: dict) -> Reply:
        prompt = body["messages"][-1]["content"]
        # The longest matching history: a Level-3 requirement alone prefixes its later steps' histories.
        task = max(((h, t) for h, t in by_history.items() if h and h in prompt), key=lambda ht: len(ht[0]))[1]
        stage = expected[task.combined_id]
        if stage == "parse":
            return Reply(text="I would call the calendar API here.")
        if stage == "api_name":
            return Reply(text="[NoSuchApi(x='1')]")
        wrong = _wrong_arguments(dict(task.gold.params))
        args = ", ".join(f"{key}={value!r}" for key, value in wrong.items())
        return Reply(text=f"Here it is: [{task.gold.api_name}({args})]")

    with OpenAIStub(default=answer) as stub:
        yield stub, expected


def test_a_wrong_model_fails_every_instance_at_its_stage(tmp_path, wrong_model):
    stub, expected = wrong_model
    run = bench(tmp_path, "--apibank-model", "stub", "--apibank-base-url", stub.url, "--apibank-limit", "30",
                "--apibank-toolsearcher-scorer", "keyword", "--apibank-no-cache", "-n", "2")
    assert run.returncode == 1, run.stdout[-3000:]
    assert "30 failed" in run.stdout
    results = read_jsonl(tmp_path / "results.jsonl")
    assert [line["id"] for line in results] == EVAL_IDS[:30]
    assert {line["id"]: line["stage"] for line in results} == expected
    assert not any(line["correct"] for line in results)
    assert all(line["prompt_tokens"] > 0 for line in results)


def _interrupted_run(out_dir: Path, stub: OpenAIStub, cache_dir: Path, minimum: int, limit: int = 100) -> int:
    """Start a 2-worker run on the first `limit` eval instances; interrupt it once `minimum` have finished."""
    # One instance in flight per worker, so that the run is still going when it is interrupted.
    run = bench(out_dir, "--apibank-model", "stub", "--apibank-base-url", stub.url, "-n", "2",
                "--apibank-concurrency", "1", "--apibank-limit", str(limit), env={"APIBANK_CACHE_DIR": str(cache_dir)},
                wait=False)
    deadline = time.time() + 300
    while len(read_jsonl(out_dir / "results.jsonl")) < minimum and time.time() < deadline:
        if run.poll() is not None:
            break
        time.sleep(0.2)
    os.killpg(run.pid, signal.SIGINT)
    run.communicate(timeout=120)
    return len(read_jsonl(out_dir / "results.jsonl"))


def test_interrupted_xdist_run_resumes_to_100_lines_without_duplicates(tmp_path):
    with OpenAIStub(default=Reply(text="[GetToday()]"), hold=0.15) as stub:
        finished = _interrupted_run(tmp_path, stub, tmp_path / "cache", minimum=20)
        assert 20 <= finished < 100
        before = len(stub.chat_requests)
        resumed = bench(tmp_path, "--apibank-model", "stub", "--apibank-base-url", stub.url, "-n", "2",
                        "--apibank-resume", "--apibank-no-cache")
        assert resumed.returncode in (0, 1), resumed.stdout[-3000:]
        # The resumed run asks the model only about the instances that had not finished.
        assert len(stub.chat_requests) - before == 100 - finished
    ids = [line["id"] for line in read_jsonl(tmp_path / "results.jsonl")]
    assert ids == EVAL_IDS
    assert len([line["id"] for line in read_jsonl(tmp_path / "predictions.jsonl")]) == 100


def test_restart_without_resume_calls_the_model_only_for_unfinished_instances(tmp_path):
    cache = tmp_path / "cache"
    with OpenAIStub(default=Reply(text="[GetToday()]"), hold=0.15) as stub:
        finished = _interrupted_run(tmp_path / "first", stub, cache, minimum=10, limit=40)
        assert 10 <= finished < 40
        before = len(stub.chat_requests)
        again = bench(tmp_path / "second", "--apibank-model", "stub", "--apibank-base-url", stub.url,
                      "--apibank-limit", "40", "-n", "2", env={"APIBANK_CACHE_DIR": str(cache)})
        assert again.returncode in (0, 1), again.stdout[-3000:]
        # Finished instances come from the response cache; requests in flight at the interrupt may
        # have been answered and cached without their result line being written.
        assert len(stub.chat_requests) - before <= 40 - finished
    assert len(read_jsonl(tmp_path / "second" / "results.jsonl")) == 40


def _stat(pid: int) -> tuple[int, str, int] | None:
    """(parent's pid, state, start time) of a process, from /proc (None: it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), fields[0], int(fields[19])


def _servers_under(root: int, found: dict[int, int]) -> None:
    """Add to `found` ({pid: start time}) each embedded model server now in `root`'s own process tree
    (other servers of the machine, another run's or a user's, are not this run's business)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        stat = _stat(int(entry.name)) if entry.name.isdigit() else None
        if stat is not None:
            children.setdefault(stat[0], []).append(int(entry.name))
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            stack.append(child)
            try:
                command = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            stat = _stat(child)
            if stat is not None and ("llama_cpp.server" in command or SERVER_MODULE in command):
                found.setdefault(child, stat[2])


def _alive(pid: int, started: int) -> bool:
    """Whether that very process (not a later one given its pid) still runs (a zombie does not)."""
    stat = _stat(pid)
    return stat is not None and stat[2] == started and stat[1] not in ("Z", "X")


def test_xdist_workers_share_the_one_embedded_server_the_controller_starts(tmp_path):
    """Under `-n 2` the controller starts the embedded model once and both workers send to it."""
    starts = tmp_path / "starts.log"
    env = {key: value for key, value in os.environ.items()
           if key not in {"OPENAI_BASE_URL", "APIBANK_BASE_URLS", "APIBANK_BASE_URL", "APIBANK_MODEL"}}
    env.update(APIBANK_STARTS_LOG=str(starts),
               PYTHONPATH=os.pathsep.join([str(PROJECT_ROOT / "tests"), os.environ.get("PYTHONPATH", "")]))
    run = subprocess.Popen([sys.executable, "-m", "pytest", str(PROJECT_ROOT / "bench_tests"), "-q", "-p",
                            "no:cacheprovider", "-p", "embedded_stand_in", "-n", "2", "--apibank-limit", "6",
                            "--apibank-no-cache", "--apibank-out-dir", str(tmp_path / "out")],
                           cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output = run.communicate(timeout=600)[0]
    assert run.returncode in (0, 1), output[-3000:]
    assert starts.read_text().split() == [str(run.pid)], output[-3000:]  # one start, by the controller
    results = read_jsonl(tmp_path / "out" / "results.jsonl")
    assert [line["id"] for line in results] == EVAL_IDS[:6]
    assert all(line["stage"] != "error" and line["predicted_call"] == "[GetToday()]" for line in results)
    assert output.count("starting the embedded local model") == 1


@pytest.mark.slow
def test_no_endpoint_means_the_embedded_model_solves_two_instances(tmp_path):
    env = {key: value for key, value in os.environ.items()
           if key not in {"OPENAI_BASE_URL", "APIBANK_BASE_URLS", "APIBANK_BASE_URL", "APIBANK_MODEL",
                          "APIBANK_LOCAL_SERVER_URL"}}
    servers: dict[int, int] = {}  #: the embedded servers the run started: its own process tree, watched as it runs
    with open(tmp_path.parent / "stdout", "w+") as stdout, open(tmp_path.parent / "stderr", "w+") as stderr:
        process = subprocess.Popen([sys.executable, "-m", "apibank_bench", "run", "--limit", "2", "--no-cache",
                                    "--out-dir", str(tmp_path)], cwd=PROJECT_ROOT, env=env, stdout=stdout,
                                   stderr=stderr, text=True)
        deadline = time.monotonic() + 900
        while process.poll() is None and time.monotonic() < deadline:
            _servers_under(process.pid, servers)
            time.sleep(0.2)
        if process.poll() is None:
            process.kill()
        process.wait()
        stdout.seek(0)
        stderr.seek(0)
        run = subprocess.CompletedProcess(process.args, process.returncode, stdout.read(), stderr.read())
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "starting the embedded local model" in run.stdout
    results = read_jsonl(tmp_path / "results.jsonl")
    assert [line["id"] for line in results] == EVAL_IDS[:2]
    # Grammar-constrained decoding: every answer parses, right or wrong.
    assert all(line["stage"] != "parse" and line["predicted_call"] for line in results), results
    assert all(line["completion_tokens"] > 0 for line in results)
    assert len(read_jsonl(tmp_path / "predictions.jsonl")) == 2
    assert len(list((tmp_path / "traces").glob("*.json"))) == 2
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["config"]["model"]["constrained"] is True
    assert len(servers) == 1, servers  # it started one embedded server...
    assert not [pid for pid, started in servers.items() if _alive(pid, started)]  # ...and stopped it with the run
