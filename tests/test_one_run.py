"""One run per results folder, a cache that never answers for another endpoint, and a selection that is
not a failure (issue 20, findings 1 to 4), each rerun the way it was found."""

from __future__ import annotations

import json
from pathlib import Path

from apibank_bench.agents.models import model_client
from apibank_bench.core import settings
from apibank_bench.runs.naming import results_dir
from apibank_bench.runs.results import read_jsonl
from openai_stub import OpenAIStub, Reply
from helpers import bench, EVAL_IDS, mixed, pytest_with_cache, run_command


def summary_of(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


def test_resume_into_a_run_with_other_settings_is_refused_naming_them(tmp_path):
    assert run_command(tmp_path, "--model", "gold", "--limit", "3").returncode == 0
    before = (tmp_path / "results.jsonl").read_text()
    refused = run_command(tmp_path, "--base-url", "http://127.0.0.1:9/v1", "--model", "stub", "--limit", "5",
                          "--resume", "--temperature", "0.7")
    assert refused.returncode == 2, refused.stdout[-2000:]
    [line] = [line for line in (refused.stdout + refused.stderr).splitlines() if "refused" in line]
    assert "model 'gold' (this run: 'stub')" in line and "temperature 0.2 (this run: 0.7)" in line
    assert "base_url" not in line and "limit" not in line  # an endpoint and a selection may differ
    assert "(--force continues it anyway)" in line  # in the words of `run`, the command typed
    assert (tmp_path / "results.jsonl").read_text() == before  # nothing ran, nothing was written

    # operational settings and the selection may differ: the gold run continues to 5 instances
    assert run_command(tmp_path, "--model", "gold", "--limit", "5", "--resume", "--concurrency", "2").returncode == 0
    assert [row["id"] for row in read_jsonl(tmp_path / "results.jsonl")] == EVAL_IDS[:5]

    with OpenAIStub(default=mixed) as stub:
        forced = run_command(tmp_path, "--base-url", stub.url, "--model", "stub", "--limit", "7", "--resume",
                             "--force", "--no-cache")
    assert forced.returncode in (0, 1), forced.stdout[-2000:]
    assert "FORCED" in forced.stdout
    [record] = summary_of(tmp_path)["forced"]
    assert record["differences"] == ["model 'gold' (this run: 'stub')"]
    assert json.loads((tmp_path / "run.json").read_text())["forced"] == [record]


def test_a_fresh_run_never_replaces_another_runs_results(tmp_path):
    assert run_command(tmp_path, "--model", "gold", "--limit", "10").returncode == 0
    again = run_command(tmp_path, "--model", "gold", "--limit", "3")
    assert again.returncode == 2, again.stdout[-2000:]
    message = again.stdout + again.stderr
    assert "holds another run's results (single / gold, 10 instances)" in message
    assert "--overwrite replaces them" in message and "--apibank-" not in message
    assert len(read_jsonl(tmp_path / "results.jsonl")) == 10 and summary_of(tmp_path)["total"] == 10
    assert run_command(tmp_path, "--model", "gold", "--limit", "3", "--overwrite").returncode == 0
    assert [row["id"] for row in read_jsonl(tmp_path / "results.jsonl")] == EVAL_IDS[:3]


def test_default_results_folders_differ_per_model_and_team_settings():
    def folder(**values) -> str:
        values = {"base_url": "http://h/v1", **values}  # a model's name comes with its endpoint
        return results_dir(settings.resolve(lambda s: values.get(s.name)))

    assert folder(model="A") != folder(model="B")
    assert folder(model="org/M", topology="decentralized") == "results/apibank/org_M/decentralized-n4-r2"
    assert len({folder(model="M", topology="decentralized", **extra) for extra in
                ({}, {"team_size": "8"}, {"rounds": "3"}, {"message_format": "semi_structured"}, {"seed": "1"},
                 {"agent_kind": "sdk"}, {"agent_kind": "sdk", "tool_parse": "server"},
                 {"agent_kind": "sdk", "history": "tools"})}) == 8
    assert folder(model="M", agent_kind="sdk", tool_parse="client", history="tools") == \
        "results/apibank/M/single_sdk_parse-client_history-tools"
    assert folder(model="M", tool_parse="server") == folder(model="M")  # chat agents read no tool calls
    assert folder(model="gold", topology="centralized") == "results/apibank/gold"
    assert folder(out_dir="x", model="A") == "x"


def test_lf_reruns_the_failed_instances_and_keeps_the_passing_rows(tmp_path):
    out, cache = tmp_path / "out", tmp_path / "pytest-cache"
    with OpenAIStub(default=mixed) as stub:
        common = ("--apibank-model", "stub", "--apibank-base-url", stub.url, "--apibank-limit", "6",
                  "--apibank-no-cache")
        first = pytest_with_cache(out, cache, *common)
        assert "3 failed, 3 passed" in first.stdout, first.stdout[-2000:]
        rows = {row["id"]: row for row in read_jsonl(out / "results.jsonl")}
        before = len(stub.chat_requests)
        again = pytest_with_cache(out, cache, "--lf", *common)
        asked = len(stub.chat_requests) - before
    assert "3 failed, 3 deselected in" in again.stdout, again.stdout[-2000:]
    assert asked == 3  # only the failed instances ran again
    after = read_jsonl(out / "results.jsonl")
    assert [row["id"] for row in after] == EVAL_IDS[:6]
    passing = [task_id for task_id, row in rows.items() if row["correct"]]
    assert len(passing) == 3 and all(row == rows[row["id"]] for row in after if row["id"] in passing)
    summary = summary_of(out)
    assert (summary["total"], summary["correct"], summary["not_run"]) == (6, 3, 0)
    assert summary["selection"]["pytest"] == {"--lf": True} and summary["selection"]["deselected"] == 3


def test_a_deselected_instance_is_not_an_unfinished_one_but_the_folder_lacks_it(tmp_path):
    """A deselected case is not "not run" (no INCOMPLETE, exit 0), but a folder without its row does not hold
    the selection: `complete` is false, and the closing table says so."""
    run = bench(tmp_path, "--apibank-model", "gold", "-k", "level3")
    assert run.returncode == 0, run.stdout[-2000:]
    assert "34 passed, 66 deselected" in run.stdout and "INCOMPLETE" not in run.stdout
    assert ("66 of the 100 selected instances deselected by pytest (-k level3); they are not counted as not run, "
            "but 66 of them have no row: the folder does not hold the whole selection") in run.stdout
    summary = summary_of(tmp_path)
    assert (summary["total"], summary["not_run"], summary["complete"]) == (34, 0, False)
    assert summary["selection"] == {"cases": 100, "instances": 100, "epochs": 1, "finished_before": 0,
                                    "deselected": 66, "pytest": {"-k": "level3"}, "deselected_without_row": 66}

    other = tmp_path / "deselect"
    victim = f"bench_tests/test_apibank.py::test_apibank[{EVAL_IDS[1]}]"
    run = bench(other, "--apibank-model", "gold", "--apibank-limit", "4", "--deselect", victim)
    assert run.returncode == 0 and "3 passed, 1 deselected" in run.stdout, run.stdout[-2000:]
    summary = summary_of(other)
    assert (summary["total"], summary["not_run"], summary["complete"]) == (3, 0, False)
    assert summary["selection"]["pytest"] == {"--deselect": [victim]}

    workers = tmp_path / "xdist"  # the controller learns what the workers collected from xdist
    run = bench(workers, "--apibank-model", "gold", "--apibank-limit", "6", "-k", "level3", "-n", "2")
    assert run.returncode == 0 and "2 passed" in run.stdout, run.stdout[-2000:]
    summary = summary_of(workers)
    assert (summary["total"], summary["not_run"], summary["selection"]["deselected"]) == (2, 0, 4)


def test_k_into_the_folder_of_another_selection_says_so_and_is_not_complete(tmp_path):
    """`-k level3` into a 2-instance smoke run's folder: its 34 rows join the 2, said so, and the folder (36 rows
    of the 100 selected) is not complete."""
    assert run_command(tmp_path, "--model", "gold", "--limit", "2").returncode == 0
    run = bench(tmp_path, "--apibank-model", "gold", "-k", "level3")
    assert run.returncode == 0, run.stdout[-2000:]
    said = f"apibank: {tmp_path} holds the rows of a run with another selection (limit 2 (this run: None))"
    assert said in run.stdout, run.stdout[-3000:]
    assert "OTHER SELECTION" in run.stdout
    summary = summary_of(tmp_path)
    assert (summary["total"], summary["selected"], summary["complete"]) == (36, 100, False)
    assert summary["selection"]["other_selection"] == ["limit 2 (this run: None)"]
    assert summary["selection"]["deselected_without_row"] == 64


def test_resume_of_a_finished_folder_has_nothing_left_to_run_and_shows_its_table(tmp_path):
    assert run_command(tmp_path, "--model", "gold", "--limit", "3").returncode == 0
    first = summary_of(tmp_path)
    again = run_command(tmp_path, "--model", "gold", "--limit", "3", "--resume")
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert "holds a finished row for every case of this selection: nothing left to run" in again.stdout
    assert "API-Bank: gold calls" in again.stdout and "NOTSET" not in again.stdout and "not run" not in again.stdout
    assert "overall        3    3      0    100.0%" in again.stdout  # the folder's own table
    summary = summary_of(tmp_path)
    assert (summary["total"], summary["correct"], summary["complete"]) == (3, 3, True)
    assert summary["wall_time_s"] >= first["wall_time_s"]
    under_pytest = bench(tmp_path, "--apibank-model", "gold", "--apibank-limit", "3", "--apibank-resume")
    assert under_pytest.returncode == 0, under_pytest.stdout[-2000:]
    assert "nothing left to run" in under_pytest.stdout and "NOTSET" not in under_pytest.stdout
    assert "API-Bank: gold calls" in under_pytest.stdout


def _client(stub: OpenAIStub, cache: Path, **values):
    given = {"base_url": stub.url, "model": "stub", "cache_dir": str(cache), **values}
    return model_client(settings.resolve(lambda s: given.get(s.name)), lambda: "")


def test_the_cache_never_answers_for_another_endpoint_under_the_same_model_name(tmp_path):
    messages = [{"role": "user", "content": "What day is it?"}]
    with OpenAIStub(default=Reply(text="[A()]")) as a, OpenAIStub(default=Reply(text="[B()]")) as b:
        assert _client(a, tmp_path).complete(messages).text == "[A()]"
        from_b = _client(b, tmp_path).complete(messages)
        assert (from_b.text, from_b.cached, len(b.chat_requests)) == ("[B()]", False, 1)
        again = _client(a, tmp_path).complete(messages)  # a restarted client of the same server: a hit
        assert (again.text, again.cached, len(a.chat_requests)) == ("[A()]", True, 1)
        # the user says two endpoints are one deployment: then they share answers
        shared = _client(b, tmp_path, deployment="one").complete(messages)
        assert _client(a, tmp_path, deployment="one").complete(messages).text == shared.text == "[B()]"
        assert len(a.chat_requests) == 1


def test_the_summary_and_the_closing_lines_say_how_many_calls_the_cache_answered(tmp_path):
    common = ("--model", "stub", "--topology", "decentralized", "--limit", "2", "--cache-dir", str(tmp_path / "c"))
    with OpenAIStub(default=mixed) as stub:
        first = run_command(tmp_path / "first", *common, "--base-url", stub.url)
        second = run_command(tmp_path / "second", *common, "--base-url", stub.url)
    assert "response cache: answered 0 of 16 model calls" in first.stdout, first.stdout[-2000:]
    assert "response cache: answered 16 of 16 model calls" in second.stdout, second.stdout[-2000:]
    assert summary_of(tmp_path / "second")["cache"] == {"model_calls": 16, "answered_by_cache": 16}


def test_resume_with_the_folder_alone_takes_its_settings_and_still_refuses_one_given_otherwise(tmp_path):
    # `--resume --out-dir DIR` alone finishes a run: its measured and selection settings, and its endpoint, are
    # the folder's (run.json); one given and different is refused by name, as before.
    env = {key: "" for key in ("OPENAI_BASE_URL", "APIBANK_BASE_URL", "APIBANK_MODEL", "APIBANK_EPOCHS")}
    measured = ("--model", "stub", "--epochs", "2", "--temperature", "0.5", "--limit", "3", "--no-cache",
                "--max-retries", "0", "--down-after", "0")
    with OpenAIStub(default=Reply(status=500)) as stub:
        first = run_command(tmp_path, "--base-url", stub.url, *measured, env=env)
        assert first.returncode == 1, first.stdout[-2000:]  # every case an error row: incomplete
        stub.default = mixed
        refused = run_command(tmp_path, "--resume", "--temperature", "0.7", env=env)
        assert refused.returncode == 2, refused.stdout[-2000:] + refused.stderr[-2000:]
        assert "temperature 0.5 (this run: 0.7)" in refused.stdout + refused.stderr
        assert "epochs" not in refused.stdout + refused.stderr  # taken from the folder, not refused
        resumed = run_command(tmp_path, "--resume", env=env)
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    summary = summary_of(tmp_path)
    assert summary["complete"] and summary["errors"] == 0 and summary["selected"] == 6  # 3 instances x 2 epochs
    ran = summary["config"]["run"]
    assert (ran["model"], ran["epochs"], ran["temperature"], ran["limit"]) == ("stub", 2, 0.5, 3)
    asked = [body for body in stub.chat_requests if body["temperature"] == 0.5]
    assert len(asked) == len(stub.chat_requests) == 12  # 6 failed, then the 6 again, all as the folder's run


def test_a_resume_given_part_of_a_selection_runs_that_selection_not_the_folders(monkeypatch):
    import apibank_bench.runs.folder as folder

    stored = {"model": "stub", "epochs": 2, "limit": 3, "only": [], "base_url": ["http://u:***@h/v1"]}
    monkeypatch.setattr(folder, "stored_settings", lambda out_dir: stored)
    cfg = settings.from_record({**settings.from_environment({}).to_record(), "resume": True, "out_dir": "x",
                                "only": ["a", "b"]})
    resumed = folder.resumed_settings(cfg, {"resume", "out_dir", "only"})
    assert (resumed.model, resumed.epochs, resumed.limit, resumed.only) == ("stub", 2, None, ["a", "b"])
    alone = folder.resumed_settings(cfg, {"resume", "out_dir"})
    assert (alone.limit, alone.only) == (3, [])  # the folder's whole selection
    assert resumed.base_url == alone.base_url == []  # an endpoint recorded with a masked credential is not taken
