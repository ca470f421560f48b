"""`apibank-bench sweep` against a scripted endpoint: cells, tables, resuming, seeds, and refusals."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from apibank_bench import cli
from apibank_bench.reports.sweep_table import SEEDS_CSV, SWEEP_CSV, SWEEP_MD

from openai_stub import OpenAIStub, Reply
from test_bench_suite import EVAL_IDS
from test_run_reliability import mixed, task_of

GRID = ("--topology", "single,independent", "--team-size", "2,4")
CELLS = ["topology=single,team_size=2", "topology=single,team_size=4",
         "topology=independent,team_size=2", "topology=independent,team_size=4"]


def sweep(out: Path, *args: str) -> int:
    return cli.main(["sweep", "--out", str(out), *args])


def summary_of(cell: Path) -> dict:
    return json.loads((cell / "summary.json").read_text())


def csv_rows(path: Path) -> list[dict]:
    return list(csv.DictReader(path.read_text().splitlines()))


def test_a_grid_writes_one_results_folder_per_cell_and_tables_that_match_them(tmp_path, capsys):
    out = tmp_path / "sweep"
    with OpenAIStub(default=mixed) as stub:
        args = (*GRID, "--model", "stub", "--base-url", stub.url, "--limit", "4", "--no-cache", "--max-retries", "0")
        assert sweep(out, *args) == 0
        first = len(stub.chat_requests)
        printed = capsys.readouterr().out
        # single asks once per instance whatever the team size; independent asks each member once
        assert first == 4 + 4 + 2 * 4 + 4 * 4

        assert sweep(out, *args) == 0  # resuming a finished sweep asks the model nothing
        assert len(stub.chat_requests) == first
        again = capsys.readouterr().out
    assert again.count("complete, skipped") == 4

    assert sorted(path.name for path in out.iterdir() if path.is_dir()) == sorted(CELLS)
    rows = csv_rows(out / SWEEP_CSV)
    assert [row["folder"] for row in rows if row["level"] == "overall"] == CELLS
    for name in CELLS:
        summary = summary_of(out / name)
        topology, team_size = (part.split("=")[1] for part in name.split(","))
        ran = summary["config"]["run"]
        assert (ran["topology"], ran["team_size"]) == (topology, int(team_size))
        assert summary["complete"] and summary["total"] == 4
        mine = {row["level"]: row for row in rows if row["folder"] == name}
        assert set(mine) == {"overall", *summary["by_level"]}
        for level, part in [("overall", summary), *summary["by_level"].items()]:
            row = mine[level]
            assert (row["topology"], row["team_size"], row["status"]) == (topology, team_size, "complete")
            assert (int(row["n"]), int(row["correct"]), int(row["errors"])) == \
                (part["total"], part["correct"], part["errors"])
            assert float(row["accuracy"]) == pytest.approx(part["accuracy"], abs=1e-4)
            assert [float(row["wilson_low"]), float(row["wilson_high"])] == pytest.approx(part["wilson_95"], abs=1e-4)
        tokens = summary["tokens"]
        assert int(mine["overall"]["tokens"]) == tokens["prompt_tokens"] + tokens["completion_tokens"] > 0
        assert float(mine["overall"]["wall_time_s"]) == summary["wall_time_s"]
        line = f"| {topology} | {team_size} | complete | {summary['accuracy']:.1%} [{summary['wilson_95'][0]:.3f}, "
        assert line in (out / SWEEP_MD).read_text() and line in printed
    assert printed.count("started ->") == 4 and printed.count("finished (exit 0)") == 4
    assert "cell 4/4 [topology=independent, team_size=4]" in printed
    assert not (out / SEEDS_CSV).exists()

    assert cli.main(["report", str(out), "--out", str(out / "report")]) == 0  # the report reads the sweep
    page = (out / "report" / "index.html").read_text()
    assert f"{SWEEP_CSV}: per cell and level</h3>" in page and all(f"sweep/{name}" in page for name in CELLS)


def test_a_seed_axis_adds_the_mean_and_sd_over_seeds(tmp_path, capsys):
    def by_seed(body: dict) -> Reply:  # seed 0 answers right; seed 1 only at temperature 0.5 on every other instance
        task = task_of(body)
        right = body["seed"] == 0 or (body["temperature"] == 0.5 and EVAL_IDS.index(task.combined_id) % 2 == 0)
        return Reply(text=f"[{task.gold_call[1:-1]}]" if right else "[NoSuchApi(x='1')]")

    out = tmp_path / "sweep"
    with OpenAIStub(default=by_seed) as stub:
        code = sweep(out, "--temperature", "0,0.5", "--seed", "0,1", "--model", "stub", "--base-url", stub.url,
                     "--limit", "4", "--no-cache")
    assert code == 0
    accuracy = {path.name: summary_of(path)["accuracy"] for path in out.iterdir() if path.is_dir()}
    assert accuracy == {"temperature=0,seed=0": 1.0, "temperature=0,seed=1": 0.0,
                        "temperature=0.5,seed=0": 1.0, "temperature=0.5,seed=1": 0.5}
    overall = {row["temperature"]: row for row in csv_rows(out / SEEDS_CSV) if row["level"] == "overall"}
    assert (overall["0"]["seeds"], overall["0"]["all_complete"]) == ("2", "True")
    assert float(overall["0"]["mean_accuracy"]) == 0.5
    assert float(overall["0"]["sd_accuracy"]) == pytest.approx(0.7071, abs=1e-4)
    assert float(overall["0.5"]["mean_accuracy"]) == 0.75
    assert float(overall["0.5"]["sd_accuracy"]) == pytest.approx(0.3536, abs=1e-4)
    markdown = (out / SWEEP_MD).read_text()
    assert "| 0 | 50.0 ± 70.7 (2 seeds, 0.0–100.0) |" in markdown
    assert "| 0.5 | 75.0 ± 35.4 (2 seeds, 50.0–100.0) |" in markdown
    assert markdown in capsys.readouterr().out


def test_an_incomplete_cell_makes_exit_1_and_is_resumed_alone(tmp_path):
    out = tmp_path / "sweep"
    args = ("--seed", "0,1", "--model", "stub", "--limit", "3", "--no-cache", "--max-retries", "0")
    with OpenAIStub(default=lambda body: Reply(status=500) if body["seed"] == 1 else mixed(body)) as stub:
        assert sweep(out, *args, "--base-url", stub.url) == 1
    statuses = {row["folder"]: row["status"] for row in csv_rows(out / SWEEP_CSV) if row["level"] == "overall"}
    assert statuses == {"seed=0": "complete", "seed=1": "incomplete"}
    assert summary_of(out / "seed=1")["errors"] == 3

    with OpenAIStub(default=mixed) as recovered:  # another endpoint address: a setting that measures nothing
        assert sweep(out, *args, "--base-url", recovered.url) == 0
        assert {body["seed"] for body in recovered.chat_requests} == {1}
        assert len(recovered.chat_requests) == 3
    assert summary_of(out / "seed=1")["complete"] is True


@pytest.mark.parametrize("args, message", [
    (("--team-size", "2,3"), "cell topology=independent, team_size=3: --team-size must be one of 2, 4, 8, 10, got 3"),
    (("--seed", "0,x"), "seed=x: --seed: invalid literal"),
    (("--seed", "0,,1"), "--seed 0,,1: an empty value in the axis"),
])
def test_a_bad_axis_value_is_refused_before_any_request(tmp_path, capsys, args, message):
    out = tmp_path / "sweep"
    with OpenAIStub() as stub:
        code = sweep(out, "--topology", "single,independent", *args, "--model", "stub", "--base-url", stub.url,
                     "--limit", "1", "--no-cache")
        assert stub.requests == []
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_list_settings_are_not_axes_and_a_folder_of_another_run_is_refused(tmp_path, capsys):
    out = tmp_path / "sweep"
    args = ("--topology", "single,independent", "--only", ",".join(EVAL_IDS[:3]), "--limit", "0", "--model", "gold")
    assert sweep(out, *args) == 0
    cells = sorted(path.name for path in out.iterdir() if path.is_dir())
    assert cells == ["topology=independent", "topology=single"]
    assert [summary_of(out / name)["total"] for name in cells] == [3, 3]  # --limit 0: all three
    assert sweep(out, *args) == 0
    assert capsys.readouterr().out.count("complete, skipped") == 2

    assert sweep(out, *args, "--temperature", "0.7") == 2
    assert "holds a run with other settings: temperature 0.2 (the sweep wants 0.7)" in capsys.readouterr().err


def test_cells_that_an_axis_does_not_change_are_answered_from_the_cache(tmp_path):
    with OpenAIStub(default=mixed) as stub:
        code = sweep(tmp_path / "sweep", "--topology", "single", "--team-size", "2,4", "--model", "stub",
                     "--base-url", stub.url, "--limit", "3", "--cache-dir", str(tmp_path / "cache"))
        assert code == 0 and len(stub.chat_requests) == 3  # the team size of `single` changes no request
    runs = [summary_of(tmp_path / "sweep" / name) for name in ("team_size=2", "team_size=4")]
    assert runs[0]["correct"] == runs[1]["correct"] and runs[1]["total"] == 3


def test_a_cell_of_several_epochs_reports_its_spread_across_the_epochs(tmp_path):
    from apibank_bench.reports.sweep_table import write_tables
    from apibank_bench.runs.summary import summarize_rows
    from apibank_bench.runs.sweep import Cell

    def row(task_id: str, epoch: int, correct: bool) -> dict:
        return {"id": task_id, "epoch": epoch, "level": "1", "correct": correct, "stage": "score", "model_calls": 0}

    # Epoch 0: a and b right; epoch 1: all four; epoch 2: none. Every instance flips.
    outcomes = {"a": (1, 1, 0), "b": (1, 1, 0), "c": (0, 1, 0), "d": (0, 1, 0)}
    rows = [row(task_id, e, bool(hit)) for e in range(3) for task_id, hits in outcomes.items() for hit in [hits[e]]]
    summary = {**summarize_rows(rows), "complete": True}
    cell = Cell({"epochs": "3"}, {}, tmp_path / "epochs=3", summary=summary)
    markdown = write_tables(tmp_path, {"epochs": ["3"]}, [cell])
    overall = [r for r in csv_rows(tmp_path / SWEEP_CSV) if r["level"] == "overall"][0]
    assert overall["epoch_accuracies"] == "0.5000 1.0000 0.0000"
    assert float(overall["sd_over_epochs"]) == pytest.approx(0.5)  # sd of 0.5, 1, 0
    assert float(overall["flip_rate"]) == 1.0  # every instance is right in some epochs and wrong in others
    assert "sd 50.0 points over 3 epochs, flip rate 100.0%" in markdown
