"""The paths around a run's numbers (issue 30, part A), each rerun the way it was found: a named selection
never cut silently, `--lf` decided from the folder, merged shards that are the run, a baseline on other data
refused up front, a stopped run counted right, and an unreadable line named, kept and counted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from apibank_bench.core.paths import PROJECT_ROOT
from apibank_bench.core.exit_codes import ExitCode
from apibank_bench.runs.results import read_jsonl
from openai_stub import OpenAIStub, Reply
from helpers import bench, EVAL_IDS, mixed, pytest_with_cache, run_command


def summary_of(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


def ids_of(out: Path) -> list[str]:
    return [row["id"] for row in read_jsonl(out / "results.jsonl")]


def command(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "apibank_bench", *map(str, args)], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=600)


def folder_bytes(out: Path) -> dict[str, bytes]:
    return {str(path.relative_to(out)): path.read_bytes() for path in sorted(out.rglob("*")) if path.is_file()}


# -- 1. --only is never cut silently ----------------------------------------------------------

def test_only_runs_every_named_instance_and_a_limit_beside_it_is_said(tmp_path):
    named = EVAL_IDS[3:8]
    run = run_command(tmp_path / "only", "--model", "gold", "--only", *named)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert ids_of(tmp_path / "only") == named
    summary = summary_of(tmp_path / "only")
    assert (summary["selected"], summary["total"], summary["complete"]) == (5, 5, True)

    both = run_command(tmp_path / "both", "--model", "gold", "--only", *named, "--limit", "3")
    assert both.returncode == 0, both.stdout[-2000:]
    assert ids_of(tmp_path / "both") == named[:3]
    assert "--limit 3 runs the first 3 of the 5 instances named by --only" in both.stdout

    bare = run_command(tmp_path / "bare", "--model", "gold")  # the bare run keeps its default of 2
    assert bare.returncode == 0 and ids_of(tmp_path / "bare") == EVAL_IDS[:2]


# -- 2. --lf is decided from the folder's own rows ----------------------------------------------

def test_lf_with_nothing_failed_runs_nothing_and_replaces_nothing(tmp_path):
    out, cache = tmp_path / "out", tmp_path / "cache"
    assert pytest_with_cache(out, cache, "--apibank-model", "gold", "--apibank-limit", "4").returncode == 0
    before = folder_bytes(out)
    again = pytest_with_cache(out, cache, "--lf", "--apibank-model", "gold", "--apibank-limit", "4")
    assert again.returncode == 0, again.stdout[-2000:]
    assert "holds a correct row for every instance of this selection: nothing failed, nothing to run" in again.stdout
    assert folder_bytes(out) == before  # no fallback reran (and replaced) every row


def test_lf_into_another_folder_reruns_that_folders_failures(tmp_path):
    cache = tmp_path / "cache"  # one pytest cache, as in one checkout
    with OpenAIStub(default=mixed) as stub:
        common = ("--apibank-model", "stub", "--apibank-base-url", stub.url, "--apibank-no-cache")
        first = pytest_with_cache(tmp_path / "a", cache, *common, "--apibank-limit", "6")
        assert "3 failed, 3 passed" in first.stdout, first.stdout[-2000:]
        gold = pytest_with_cache(tmp_path / "b", cache, "--apibank-model", "gold", "--apibank-limit", "6")
        assert gold.returncode == 0
        # b's last session passed everything; a's failures (pytest's memory) are not b's
        before = len(stub.chat_requests)
        again = pytest_with_cache(tmp_path / "a", cache, "--lf", *common, "--apibank-limit", "6")
        assert len(stub.chat_requests) - before == 3, again.stdout[-2000:]
    assert "3 failed, 3 deselected" in again.stdout, again.stdout[-2000:]
    summary = summary_of(tmp_path / "a")
    assert (summary["total"], summary["selected"], summary["not_run"]) == (6, 6, 0)


# -- 3. merge: the shards of a --limit 20 run are that run ---------------------------------------

def test_merged_shards_of_a_limit_20_run_are_that_run(tmp_path):
    args = ("--model", "gold", "--limit", "20")
    first, second, merged = tmp_path / "s1", tmp_path / "s2", tmp_path / "merged"
    assert run_command(first, *args, "--shard", "1/2").returncode == 0
    assert run_command(second, *args, "--shard", "2/2").returncode == 0
    merge = command("merge", first, second, "--out", merged)
    assert merge.returncode == 0, merge.stdout + merge.stderr
    summary = summary_of(merged)
    assert (summary["selected"], summary["total"], summary["not_run"], summary["complete"]) == (20, 20, 0, True)
    assert ids_of(merged) == EVAL_IDS[:20]
    record = json.loads((merged / "run.json").read_text())
    assert record["settings"]["limit"] == 20 and record["settings"]["shard"] is None
    # resumed as a run: nothing left to do, nothing refused; gated against as a baseline
    resumed = run_command(merged, *args, "--resume")
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    assert ids_of(merged) == EVAL_IDS[:20]
    gated = run_command(tmp_path / "gated", *args, "--baseline", str(merged))
    assert gated.returncode == 0, gated.stdout[-2000:]
    assert summary_of(tmp_path / "gated")["gate"]["paired"] == 20

    half = command("merge", first, "--out", tmp_path / "half")  # one shard of two: the other's cases not run
    assert half.returncode == ExitCode.INCOMPLETE and "INCOMPLETE" in half.stdout, half.stdout + half.stderr
    summary = summary_of(tmp_path / "half")
    assert (summary["selected"], summary["total"], summary["not_run"], summary["complete"]) == (20, 10, 10, False)


def test_merge_and_report_refuse_a_folder_that_is_missing_or_holds_no_run(tmp_path):
    shard = tmp_path / "s1"
    assert run_command(shard, "--model", "gold", "--limit", "4", "--shard", "1/2").returncode == 0
    typo, empty = tmp_path / "s2-typo", tmp_path / "empty"
    empty.mkdir()
    for folder, why in ((typo, "does not exist"), (empty, "holds no run")):
        merge = command("merge", shard, folder, "--out", tmp_path / f"merged-{folder.name}")
        assert merge.returncode == 2 and f"{folder} {why}" in merge.stderr, merge.stdout + merge.stderr
        assert not (tmp_path / f"merged-{folder.name}").exists()
        report = command("report", shard, folder, "--out", tmp_path / f"report-{folder.name}")
        assert report.returncode == 2 and f"{folder} {why}" in report.stderr, report.stdout + report.stderr


# -- 7. a baseline on other data is refused before anything runs ----------------------------------

def test_a_baseline_on_other_data_is_refused_up_front(tmp_path):
    baseline = tmp_path / "baseline"
    assert run_command(baseline, "--model", "gold", "--limit", "3").returncode == 0
    summary = summary_of(baseline)
    summary["config"]["provenance"]["data_hash"] = "0" * 64  # recorded with other data
    (baseline / "summary.json").write_text(json.dumps(summary))

    run = run_command(tmp_path / "run", "--model", "gold", "--limit", "3", "--baseline", str(baseline))
    assert run.returncode == ExitCode.USAGE, run.stdout[-2000:] + run.stderr[-2000:]
    assert "refused: " in run.stdout + run.stderr and "data lock" in run.stdout + run.stderr
    assert not (tmp_path / "run" / "results.jsonl").exists()  # no instance ran

    under_pytest = bench(tmp_path / "pytest", "--apibank-model", "gold", "--apibank-limit", "3",
                         "--apibank-baseline", str(baseline))
    assert under_pytest.returncode == ExitCode.PYTEST_USAGE, under_pytest.stdout[-2000:]  # pytest's usage error
    assert "Traceback" not in under_pytest.stdout + under_pytest.stderr
    assert not (tmp_path / "pytest" / "results.jsonl").exists()


def test_a_gate_that_ran_is_in_the_summary(tmp_path):
    baseline = tmp_path / "baseline"
    assert run_command(baseline, "--model", "gold", "--limit", "3").returncode == 0
    run = bench(tmp_path / "run", "--apibank-model", "gold", "--apibank-limit", "3",
                "--apibank-baseline", str(baseline))
    assert run.returncode == 0, run.stdout[-2000:]
    gate = summary_of(tmp_path / "run")["gate"]
    assert (gate["paired"], gate["worse"]) == (3, False) and gate["verdict"].startswith("apibank gate: passed")


# -- 9. a breaker's stop counts what errored and what did not run ----------------------------------

def test_a_stopped_run_counts_errored_and_not_run_and_says_how_to_finish(tmp_path):
    args = ("--max-retries", "0", "--no-cache", "--concurrency", "1", "--down-after", "0.5",
            "--limit", "40")
    # each failure takes 0.1 s, so the endpoint has been failing for the breaker's 0.5 s after a few instances
    with OpenAIStub(default=Reply(status=500, delay=0.1)) as stub:
        run = run_command(tmp_path / "run", "--model", "stub", "--base-url", stub.url, *args)
        plain = bench(tmp_path / "pytest", "--apibank-model", "stub", "--apibank-base-url", stub.url,
                      *(arg if not arg.startswith("--") else "--apibank-" + arg[2:] for arg in args))
    assert run.returncode == 1, run.stdout[-2000:]
    errored = len(read_jsonl(tmp_path / "run" / "results.jsonl"))
    assert 3 <= errored < 40
    assert f"{errored} errored, {40 - errored} not run" in run.stdout, run.stdout[-2000:]
    summary = summary_of(tmp_path / "run")
    assert (summary["errors"], summary["not_run"]) == (errored, 40 - errored)
    assert "--resume" in run.stdout and "--apibank-" not in run.stdout  # the flag `run` takes

    assert plain.returncode == 1, plain.stdout[-2000:]
    errored = len(read_jsonl(tmp_path / "pytest" / "results.jsonl"))
    assert f"{40 - errored} skipped, {errored} errors" in plain.stdout, plain.stdout[-2000:]
    assert "--apibank-resume" in plain.stdout


# -- 10. an unreadable line is named, kept and counted --------------------------------------------

def corrupt(path: Path, number: int, garbage: bytes = b'{"id": "level-1::cut') -> bytes:
    lines = path.read_bytes().splitlines(keepends=True)
    old, lines[number - 1] = lines[number - 1], garbage + b"\n"
    path.write_bytes(b"".join(lines))
    return old


def test_an_unreadable_line_is_named_set_aside_counted_and_compared_as_such(tmp_path):
    out, intact = tmp_path / "out", tmp_path / "intact"
    for folder in (out, intact):
        assert run_command(folder, "--model", "gold", "--limit", "4").returncode == 0
    corrupt(out / "results.jsonl", 2)

    compared = command("compare", intact, out)
    assert compared.returncode == 0, compared.stderr
    assert "1 lines of" in compared.stdout and "could not be read" in compared.stdout
    assert "the selection differs" not in compared.stdout  # not explained as another selection

    resumed = run_command(out, "--model", "gold", "--limit", "4", "--resume")
    assert resumed.returncode == 0, resumed.stdout[-2000:]
    assert "results.jsonl line 2" in resumed.stdout
    assert (out / "results.jsonl.unreadable").read_bytes() == b'{"id": "level-1::cut\n'  # kept, never deleted
    assert ids_of(out) == EVAL_IDS[:4]  # its instance ran again
    summary = summary_of(out)
    assert summary["unreadable_lines"] == 1 and summary["complete"]
    assert "UNREADABLE: 1 lines of results.jsonl" in resumed.stdout
