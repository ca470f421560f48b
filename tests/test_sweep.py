"""`apibank-bench sweep` against a scripted endpoint: cells, tables, resuming, seeds, and refusals."""

from __future__ import annotations

import csv
import io
import json
import pickle
import sys
from pathlib import Path

import pytest

from apibank_bench import cli
from apibank_bench.core import settings
from apibank_bench.core.progress import ERASE
from apibank_bench.reports.sweep_table import SEEDS_CSV, SWEEP_CSV, SWEEP_MD
from apibank_bench.sweeps import dispatch
from apibank_bench.sweeps.cell_job import CellJob

from openai_stub import OpenAIStub, Reply
from helpers import EVAL_IDS, mixed, SWEEP_CELLS, SWEEP_GRID, task_of

GRID, CELLS = SWEEP_GRID, SWEEP_CELLS
#: What the sweep says before it runs GRID (single reads no team size).
SINGLE_TEAM_SIZE = ("sweep: warning: --team-size 2,4 changes nothing for --topology single (it reads no team "
                    "setting): those cells are repeats")


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
    lines = printed.splitlines()
    assert lines[0] == SINGLE_TEAM_SIZE + " (the cache is off, so they ask the model again)"  # --no-cache
    assert printed.count("changes nothing") == 1  # independent reads the team size
    # not a terminal: after each cell a plain progress line of its own, the time left while cells remain
    progress = [line for line in lines if " cells done " in line]
    assert [line.split(" · ")[0] for line in progress] == [
        f"sweep: {done}/4 cells done ({done} complete, 0 incomplete)" for done in (1, 2, 3, 4)]
    assert [(", ETA " in line, line.split(" · ")[-1]) for line in progress[:3]] == [
        (True, f"{left} to run") for left in (3, 2, 1)]
    assert "ETA" not in progress[-1] and "to run" not in progress[-1]
    assert lines.index(progress[0]) == lines.index(next(line for line in lines if "finished" in line)) + 1
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
    printed = capsys.readouterr().out
    assert markdown in printed
    assert "warning" not in printed  # no team setting is an axis


def test_an_incomplete_cell_makes_exit_1_and_is_resumed_alone(tmp_path, capsys):
    out = tmp_path / "sweep"
    args = ("--seed", "0,1", "--model", "stub", "--limit", "3", "--no-cache", "--max-retries", "0")
    with OpenAIStub(default=lambda body: Reply(status=500) if body["seed"] == 1 else mixed(body)) as stub:
        assert sweep(out, *args, "--base-url", stub.url) == 1
    assert "sweep: 2/2 cells done (1 complete, 1 incomplete)" in capsys.readouterr().out
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


def test_cells_that_an_axis_does_not_change_are_answered_from_the_cache(tmp_path, capsys):
    with OpenAIStub(default=mixed) as stub:
        code = sweep(tmp_path / "sweep", "--topology", "single", "--team-size", "2,4", "--model", "stub",
                     "--base-url", stub.url, "--limit", "3", "--cache-dir", str(tmp_path / "cache"))
        assert code == 0 and len(stub.chat_requests) == 3  # the team size of `single` changes no request
    printed = capsys.readouterr().out
    assert printed.splitlines()[0] == SINGLE_TEAM_SIZE + " (with the cache on they make no model calls)"
    assert printed.count("warning") == 1
    runs = [summary_of(tmp_path / "sweep" / name) for name in ("team_size=2", "team_size=4")]
    assert runs[0]["correct"] == runs[1]["correct"] and runs[1]["total"] == 3


def test_a_cell_of_several_epochs_reports_its_spread_across_the_epochs(tmp_path):
    from apibank_bench.reports.sweep_table import write_tables
    from apibank_bench.runs.summary import summarize_rows
    from apibank_bench.sweeps.grid import Cell

    from apibank_bench.runs.row import ResultRow
    from apibank_bench.scoring.stage import Stage

    def row(task_id: str, epoch: int, correct: bool) -> ResultRow:
        return ResultRow(task_id, epoch, "1", correct, Stage.SCORE, model_calls=0)

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


def test_an_epochs_axis_runs_and_its_tables_hold_each_column_once_and_count_instances(tmp_path, capsys):
    """The issue's command: the `epochs` axis value (1, 2) was taken for the epochs statistics (exit 2 with
    'sd_over_epochs' after every cell ran), and sweep.csv held the `epochs` column twice."""
    out = tmp_path / "sweep"
    assert sweep(out, "--model", "gold", "--limit", "5", "--epochs", "1,2") == 0, capsys.readouterr()
    header = (out / SWEEP_CSV).read_text().splitlines()[0].split(",")
    assert len(header) == len(set(header)) and header.count("epochs") == 1
    rows = {row["epochs"]: row for row in csv_rows(out / SWEEP_CSV) if row["level"] == "overall"}
    assert (rows["1"]["n"], rows["2"]["n"]) == ("5", "5")  # instances, not (instance, epoch) rows
    assert (rows["1"]["attempts"], rows["2"]["attempts"]) == ("", "10")
    markdown = (out / SWEEP_MD).read_text()
    assert "100.0% [0.566, 1.000] 5/5 |" in markdown  # Wilson on 5 instances, not on 10 rows
    assert "100.0% [0.566, 1.000] 10/10 attempts of 5 instances" in markdown
    assert "sd 0.0 points over 2 epochs, flip rate 0.0%" in markdown


def warnings_for(tmp_path: Path, **axes: str) -> list[str]:
    given = {setting.name: None for setting in settings.RUN_SETTINGS} | {"model": "gold", "limit": "1"} | axes
    with settings.command_voice():  # as under the CLI: the flags the user typed
        found, cells = dispatch.prepare(given, tmp_path / "sweep")
        return dispatch.repeat_warnings(given, found, cells)


def test_each_team_axis_a_topology_does_not_read_is_warned_once_per_topology_and_setting(tmp_path):
    warnings = warnings_for(tmp_path, topology="single,independent,decentralized", team_size="2,4", rounds="1,2",
                            seed="0,1")
    repeats = "those cells are repeats (with the cache on they make no model calls)"
    assert warnings == [
        f"sweep: warning: --team-size 2,4 changes nothing for --topology single (it reads no team setting): {repeats}",
        f"sweep: warning: --rounds 1,2 changes nothing for --topology single (it reads no team setting): {repeats}",
        "sweep: warning: --rounds 1,2 changes nothing for --topology independent (it reads --team-size, --vote): "
        + repeats]
    assert warnings_for(tmp_path, topology="single", vote="reference,normalized")[0].startswith(
        "sweep: warning: --vote reference,normalized changes nothing for --topology single")
    # no team setting as an axis, or only ones every topology of the grid reads: nothing to say
    assert warnings_for(tmp_path, topology="single,independent", seed="0,1", rounds="3") == []
    assert warnings_for(tmp_path, topology="independent,decentralized", team_size="2,4") == []
    assert warnings_for(tmp_path, topology="decentralized", rounds="1,2", message_format="freeform,structured_soft") == []
    assert not (tmp_path / "sweep").exists()  # checking the grid writes nothing


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_the_progress_line_is_redrawn_in_place_and_never_tangled_with_the_cell_lines(
        tmp_path, monkeypatch):
    screen = Terminal()
    monkeypatch.setattr(sys, "stdout", screen)
    # Wide enough that the line is never cut (its length varies: an ETA shows once rows are written).
    monkeypatch.setenv("COLUMNS", "240")
    assert sweep(tmp_path / "sweep", "--topology", "single", "--team-size", "2,4", "--model", "gold",
                 "--limit", "2", "--cache-dir", str(tmp_path / "cache")) == 0
    *drawn, after = screen.getvalue().split(ERASE)
    assert "## Sweep: 2 cells" in after and ERASE not in after  # the line is erased before the table
    progress = [piece for piece in drawn if " cells done " in piece]
    assert progress and all("\n" not in piece for piece in progress)  # redrawn in place, never ended
    said = [piece for piece in drawn if piece and piece not in progress]
    assert all(piece.endswith("\n") for piece in said)  # the sweep's own lines each start on a clean line
    told = "".join(said).splitlines()
    assert told[0].startswith("sweep: warning: --team-size 2,4 changes nothing for --topology single")
    assert [line.split("] ")[1].split(" ")[0] for line in told[1:]] == ["started", "finished"] * 2
    assert any("running cell 1/2 [team_size=2]" in piece for piece in progress)
    assert progress[-1].startswith("sweep: 2/2 cells done (2 complete, 0 incomplete) · elapsed ")


def test_each_cell_is_resolved_once_in_the_sweep_and_its_job_ships_without_the_settings(tmp_path, monkeypatch):
    resolved = []
    resolve = settings.resolve
    monkeypatch.setattr(settings, "resolve", lambda *args, **kwargs: resolved.append(1) or resolve(*args, **kwargs))
    assert sweep(tmp_path / "sweep", "--seed", "0,1", "--model", "gold", "--limit", "1",
                 "--cache-dir", str(tmp_path / "cache")) == 0
    assert len(resolved) == 2  # one per cell; the cells' jobs (here) re-read their folders, not their settings

    cfg = settings.resolve(lambda s: {"api_key": "sk-not-shipped", "model": "gold"}.get(s.name))
    job = CellJob({"seed": "0"}, str(tmp_path / "cell"), "cell 1/1", cfg=cfg)
    shipped = pickle.dumps(job)
    assert b"sk-not-shipped" not in shipped
    assert pickle.loads(shipped) == job and pickle.loads(shipped).cfg is None  # a node resolves for itself
