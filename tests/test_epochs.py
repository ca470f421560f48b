"""Epochs: K solves per instance with offset seeds, pass@k, majority-of-K and a clustered interval
checked against values computed here from what the scripted endpoint was told to answer, and a
resume after a kill mid-epoch that completes every (instance, epoch) exactly once."""

from __future__ import annotations

import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from itertools import combinations

from apibank_bench.agents.chat_agent import EPOCH_SEED_STRIDE
from apibank_bench.core.paths import PROJECT_ROOT
from apibank_bench.reports.html import build_report
from apibank_bench.runs.results import read_jsonl
from apibank_bench.runs.stats import Z_95, clustered_interval, pass_at_k

from openai_stub import OpenAIStub, Reply
from helpers import bench, EVAL_IDS, task_of

K = 4
IDS = EVAL_IDS[:10]
#: How many of the K epochs each instance gets right: probabilities 0, 1/4, ..., 1 (and again).
RIGHT = {task_id: index % (K + 1) for index, task_id in enumerate(IDS)}
SEED = 7


def right_in(task_id: str, epoch: int) -> bool:
    """The script: instance i is right in RIGHT[i] of its epochs, which ones rotating with i."""
    return (epoch + IDS.index(task_id)) % K < RIGHT[task_id]


def scripted(body: dict) -> Reply:
    task = task_of(body)
    epoch, rest = divmod(body["seed"] - SEED, EPOCH_SEED_STRIDE)
    assert rest == 0, body["seed"]  # a single agent: index 0, round 0
    return Reply(text=f"[{task.gold_call[1:-1]}]" if right_in(task.combined_id, epoch) else "[NoSuchApi(x='1')]")


def brute_pass_at(k: int) -> float:
    """pass@k by enumeration: the share of k-subsets of an instance's epochs holding a right one."""
    shares = []
    for task_id in IDS:
        subsets = list(combinations(range(K), k))
        shares.append(sum(any(right_in(task_id, e) for e in subset) for subset in subsets) / len(subsets))
    return statistics.fmean(shares)


def test_pass_at_k_matches_enumeration():
    for n in range(1, 7):
        for c in range(n + 1):
            for k in range(1, n + 1):
                subsets = list(combinations(range(n), k))
                assert math.isclose(pass_at_k(n, c, k), sum(any(i < c for i in s) for s in subsets) / len(subsets))


def test_clustered_interval_with_unequal_clusters_is_the_cluster_robust_ratio_interval():
    correct, attempts = [0, 3, 1, 2], [2, 3, 1, 4]
    p = 6 / 10
    # Stacking each cluster's residual total: the sandwich variance with the G / (G - 1) correction.
    residuals = [c - p * n for c, n in zip(correct, attempts)]
    half = Z_95 * math.sqrt(4 / 3 * sum(r * r for r in residuals)) / 10
    assert clustered_interval(correct, attempts) == (max(0.0, p - half), min(1.0, p + half))
    assert clustered_interval([1], [2]) == (0.0, 1.0)


def test_k_epochs_give_one_row_per_instance_and_epoch_and_the_repeat_statistics(tmp_path):
    with OpenAIStub(default=scripted) as stub:
        run = bench(tmp_path, "--apibank-model", "stub", "--apibank-base-url", stub.url, "--apibank-only", *IDS,
                    "--apibank-epochs", str(K), "--apibank-seed", str(SEED), "--apibank-no-cache",
                    "--apibank-toolsearcher-scorer", "keyword")
        seeds = Counter(body["seed"] for body in stub.chat_requests)
    assert run.returncode == 1, run.stdout[-3000:]
    right = sum(RIGHT.values())
    assert f"{K * len(IDS) - right} failed, {right} passed" in run.stdout
    # Epoch 0 keeps the run's own seed; epoch e moves it by e * EPOCH_SEED_STRIDE.
    assert seeds == {SEED + e * EPOCH_SEED_STRIDE: len(IDS) for e in range(K)}
    rows = read_jsonl(tmp_path / "results.jsonl")
    assert [(row["id"], row["epoch"]) for row in rows] == [(i, e) for e in range(K) for i in IDS]
    assert all(row["correct"] == right_in(row["id"], row["epoch"]) for row in rows)
    predictions = read_jsonl(tmp_path / "predictions.jsonl")
    assert [(p["id"], p["epoch"]) for p in predictions] == [(row["id"], row["epoch"]) for row in rows]
    traces = [json.loads(path.read_text()) for path in (tmp_path / "traces").glob("*.json")]
    assert sorted((t["id"], t["epoch"]) for t in traces) == sorted((i, e) for e in range(K) for i in IDS)

    summary = json.loads((tmp_path / "summary.json").read_text())
    epochs = summary["epochs"]
    assert summary["correct_epochs"] == RIGHT
    assert epochs["epochs"] == K and epochs["instances"] == len(IDS)
    means = [RIGHT[i] / K for i in IDS]
    assert math.isclose(epochs["mean_accuracy"], statistics.fmean(means))
    half = Z_95 * statistics.stdev(means) / math.sqrt(len(IDS))  # equal clusters: mean ± z * sd / sqrt(G)
    low, high = epochs["clustered_95"]
    assert math.isclose(low, max(0, statistics.fmean(means) - half)) and math.isclose(high, statistics.fmean(means) + half)
    for k in range(1, K + 1):
        assert math.isclose(epochs["pass_at_k"][str(k)], brute_pass_at(k)), k
    assert math.isclose(epochs["majority_accuracy"], sum(RIGHT[i] > K / 2 for i in IDS) / len(IDS))
    assert math.isclose(epochs["flip_rate"], sum(0 < RIGHT[i] < K for i in IDS) / len(IDS))
    assert epochs["instances_by_correct_epochs"] == {str(c): n for c, n in sorted(Counter(RIGHT.values()).items())}
    level = summary["by_level"]["1"]["epochs"]
    assert level["instances"] == sum(i.startswith("level-1::") for i in IDS)
    assert "pass@4" in run.stdout and "flip rate" in run.stdout  # the closing table shows the repeats

    page = build_report([tmp_path], tmp_path / "report").read_text()
    assert "Repeats: epochs, pass@k, majority of K, flip rate" in page and "pass@4" in page
    assert f"{100 * epochs['flip_rate']:.1f}%" in page
    assert f"({RIGHT[IDS[1]]}/{K} epochs)" in page  # each instance's correct epochs


def test_pytest_shows_one_case_per_instance_and_epoch_and_k_selects_an_instance(tmp_path):
    def collect(*args: str) -> list[str]:
        run = subprocess.run([sys.executable, "-m", "pytest", str(PROJECT_ROOT / "bench_tests"), "--collect-only",
                              "-q", "-p", "no:cacheprovider", "--apibank-model", "gold", "--apibank-limit", "3",
                              "--apibank-out-dir", str(tmp_path), *args], cwd=PROJECT_ROOT, capture_output=True,
                             text=True, timeout=300)
        return [line for line in run.stdout.splitlines() if "test_apibank[" in line]

    assert len(collect("--apibank-epochs", "3")) == 9
    picked = collect("--apibank-epochs", "3", "-k", EVAL_IDS[1])
    assert [line.split("[", 1)[1][:-1] for line in picked] == [f"{EVAL_IDS[1]}-epoch{e}" for e in range(3)]
    assert [line.split("[", 1)[1][:-1] for line in collect()] == EVAL_IDS[:3]  # one epoch: the IDs as ever


def test_resume_after_a_kill_mid_epoch_completes_every_instance_and_epoch_once(tmp_path):
    args = ("--apibank-model", "stub", "--apibank-only", *IDS, "--apibank-epochs", "3", "--apibank-seed", str(SEED),
            "--apibank-no-cache", "--apibank-concurrency", "1", "-n", "0")
    with OpenAIStub(default=scripted, hold=0.1) as stub:
        first = bench(tmp_path, *args, "--apibank-base-url", stub.url, wait=False)
        deadline = time.time() + 300
        while len(read_jsonl(tmp_path / "results.jsonl")) < 13 and time.time() < deadline and first.poll() is None:
            time.sleep(0.05)
        os.killpg(first.pid, signal.SIGKILL)  # mid-epoch 1: no chance to tidy up
        first.communicate(timeout=60)
        done = {(row["id"], row["epoch"]) for row in read_jsonl(tmp_path / "results.jsonl")}
        assert 13 <= len(done) < 30 and {e for _, e in done} == {0, 1}
        before = len(stub.chat_requests)
        resumed = bench(tmp_path, *args, "--apibank-base-url", stub.url, "--apibank-resume")
        asked = [divmod(body["seed"] - SEED, EPOCH_SEED_STRIDE)[0] for body in stub.chat_requests[before:]]
    assert resumed.returncode == 1, resumed.stdout[-3000:]
    assert len(asked) == 30 - len(done)  # only the cases that had no row
    rows = read_jsonl(tmp_path / "results.jsonl")
    keys = [(row["id"], row["epoch"]) for row in rows]
    assert sorted(keys) == sorted((i, e) for e in range(3) for i in IDS) and len(set(keys)) == 30
    assert all(row["correct"] == right_in(row["id"], row["epoch"]) for row in rows)
    assert len(read_jsonl(tmp_path / "predictions.jsonl")) == 30


def test_shards_split_the_cases_and_merge_back_into_the_whole_run(tmp_path):
    from helpers import stable

    args = ("--apibank-model", "gold", "--apibank-limit", "5", "--apibank-epochs", "2")
    whole, first, second, merged = (tmp_path / name for name in ("whole", "s1", "s2", "merged"))
    assert bench(whole, *args).returncode == 0
    assert bench(first, *args, "--apibank-shard", "1/2").returncode == 0
    assert bench(second, *args, "--apibank-shard", "2/2").returncode == 0
    keys = lambda out: [(row["id"], row["epoch"]) for row in read_jsonl(out / "results.jsonl")]  # noqa: E731
    everything = [(i, e) for e in range(2) for i in EVAL_IDS[:5]]
    assert keys(first) == everything[0::2] and keys(second) == everything[1::2]  # per case, not per instance
    merge = subprocess.run([sys.executable, "-m", "apibank_bench", "merge", str(first), str(second),
                            "--out", str(merged)], capture_output=True, text=True, cwd=PROJECT_ROOT)
    assert merge.returncode == 0, merge.stderr
    assert keys(merged) == keys(whole) == everything
    assert stable(read_jsonl(merged / "results.jsonl")) == stable(read_jsonl(whole / "results.jsonl"))
    assert len(list((merged / "traces").glob("*.json"))) == 10
