"""The command line: scoring saved answers, the summary, the run wrapper's pytest arguments."""

import json
import subprocess
import sys

from apibank_bench.data import manifests
from apibank_bench.core.exit_codes import ExitCode
from apibank_bench.core.paths import PROJECT_ROOT
from apibank_bench.runs.results import read_jsonl
from apibank_bench.data.tasks import get_task


def cli(*args):
    return subprocess.run([sys.executable, "-m", "apibank_bench", *args], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=300)


def test_score_saved_predictions(tmp_path):
    ids = manifests.manifest_ids("all")[:5]
    answers = [get_task(ids[0]).gold_call, get_task(ids[1]).gold_call, "no idea", "[Nope(a=1)]",
               get_task(ids[4]).gold_call.replace("[", "Sure: [", 1)]
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text("".join(json.dumps({"id": i, "prediction": a}) + "\n" for i, a in zip(ids, answers)))
    run = cli("score", str(predictions), "--out-dir", str(tmp_path / "out"))
    assert run.returncode == 0, run.stderr
    results = read_jsonl(tmp_path / "out" / "results.jsonl")
    assert [(r["id"], r["correct"], r["stage"]) for r in results] == [
        (ids[0], True, "score"), (ids[1], True, "score"), (ids[2], False, "parse"),
        (ids[3], False, "api_name"), (ids[4], True, "score")]
    assert "3 correct" in run.stdout


def test_score_names_an_unknown_id_without_a_traceback(tmp_path):
    predictions = tmp_path / "p.jsonl"
    predictions.write_text(json.dumps({"id": "level-1::missing.jsonl::0", "prediction": "x"}) + "\n")
    run = cli("score", str(predictions), "--out-dir", str(tmp_path / "out"))
    assert run.returncode == ExitCode.USAGE
    assert "missing.jsonl" in run.stderr and "Traceback" not in run.stderr


def test_tasks_command_counts_every_level():
    run = cli("tasks")
    assert run.returncode == 0, run.stderr
    assert "level 1: 389 tasks" in run.stdout and "level 3: 245 tasks" in run.stdout
    assert "total: 753 tasks" in run.stdout
