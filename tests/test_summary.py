"""summary.json's statistics: errors are not answers, missing usage is not zero, intervals and flags."""

import json

import pytest
from results_folders import eval_tasks, score_folder

from apibank_bench.runs.row import ResultRow
from apibank_bench.runs.summary import add_summary_to_json_report, gold_api_name, summarize_rows, table_lines


def _row(level="1", correct=True, stage="score", api="AddAgenda", **extra):
    return ResultRow.from_json({"id": f"x{id(extra)}", "level": level, "correct": correct, "stage": stage,
                                "gold_call": f"[{api}(content='a(b)')]", **extra})


def test_error_rows_count_as_errors_never_as_correct():
    rows = [_row(), _row(), _row(correct=False, stage="parse"),
            _row(correct=True, stage="error"),  # a malformed row claiming success is still an error
            _row(correct=False, stage="error")]
    summary = summarize_rows(rows)
    assert (summary["total"], summary["correct"], summary["errors"], summary["completed"]) == (5, 2, 2, 3)
    assert summary["accuracy"] == 2 / 5
    assert summary["accuracy_completed"] == 2 / 3
    assert summary["failures_by_stage"] == {"parse": 1, "api_name": 0, "score": 0, "error": 2}
    assert summary["flags"] == ["small_n", "errors"]


def test_levels_apis_and_flags():
    rows = [_row(level="1", api="AddAgenda")] * 25 + [_row(level="2", correct=False, api="ToolSearcher")] * 5
    summary = summarize_rows(rows)
    assert summary["by_level"]["1"]["flags"] == [] and summary["by_level"]["2"]["flags"] == ["small_n"]
    assert {api: (part["correct"], part["total"]) for api, part in summary["by_api"].items()} == \
        {"AddAgenda": (25, 25), "ToolSearcher": (0, 5)}
    assert summary["by_level"]["2"]["wilson_95"][0] == 0.0 < summary["by_level"]["2"]["wilson_95"][1]


def test_gold_api_name():
    assert gold_api_name("[QueryHealthData(user_id='A', start_time='2023-01-01 00:00:00')]") == "QueryHealthData"
    assert gold_api_name("GetToday()") == "GetToday"
    assert gold_api_name(None) == gold_api_name("no call") == "?"


def test_missing_usage_is_flagged_not_counted_as_zero():
    rows = [_row(prompt_tokens=100, completion_tokens=10, model_calls=1),
            _row(prompt_tokens=300, completion_tokens=30, model_calls=2),
            _row(prompt_tokens=0, completion_tokens=0, model_calls=1),  # the server sent no usage
            _row(prompt_tokens=None, completion_tokens=None, model_calls=1),
            _row(),  # scored from saved answers: nothing known
            _row(prompt_tokens=0, completion_tokens=0, model_calls=0)]  # a gold replay really costs nothing
    tokens = summarize_rows(rows)["tokens_per_instance"]
    assert (tokens["instances_counted"], tokens["instances_missing_usage"]) == (3, 3)
    assert (tokens["prompt_tokens"], tokens["completion_tokens"]) == (400, 40)
    assert tokens["total_per_instance"] == pytest.approx(440 / 3)
    assert summarize_rows([_row()])["tokens_per_instance"]["total_per_instance"] is None


def test_tokens_per_agent_role_from_traces():
    traces = [{"agents": [{"role": "debater", "prompt_tokens": 50, "completion_tokens": 5},
                          {"role": "debater", "prompt_tokens": 70, "completion_tokens": 7},
                          {"role": "aggregator", "prompt_tokens": 0, "completion_tokens": 0}]},
              {"agents": [{"role": "aggregator", "prompt_tokens": 90, "completion_tokens": 9}]},
              {"messages": []}]
    roles = summarize_rows([], traces)["tokens_by_role"]
    assert roles == {
        "aggregator": {"turns": 2, "turns_missing_usage": 1, "prompt_tokens": 90, "completion_tokens": 9},
        "debater": {"turns": 2, "turns_missing_usage": 0, "prompt_tokens": 120, "completion_tokens": 12},
    }


def test_json_report_carries_the_summary():
    report = {"tests": [], "summary": {"passed": 1}}
    add_summary_to_json_report(report, {"total": 3})
    assert report == {"tests": [], "summary": {"passed": 1}, "apibank": {"total": 3}}
    untouched = {"tests": []}
    add_summary_to_json_report(untouched, None)
    assert untouched == {"tests": []}


def test_summary_json_of_the_gold_calls_over_the_eval_set(tmp_path, apibank_root):
    out = score_folder(tmp_path, "gold", eval_tasks(apibank_root), wrong=set())
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["total"], summary["correct"], summary["errors"]) == (100, 100, 0)
    assert [round(x, 3) for x in summary["wilson_95"]] == [0.963, 1.0]
    assert {level: part["total"] for level, part in summary["by_level"].items()} == {"1": 33, "2": 33, "3": 34}
    assert summary["flags"] == [] and sum(part["total"] for part in summary["by_api"].values()) == 100
    assert summary["tokens_per_instance"]["instances_missing_usage"] == 100  # `score` knows no usage


def test_terminal_table_shows_intervals_errors_and_flags():
    rows = [_row(level="1")] * 30 + [_row(level="2", correct=False, stage="error")] * 2 + \
        [_row(level="2", prompt_tokens=10, completion_tokens=2, model_calls=1)]
    lines = table_lines(summarize_rows(rows))
    assert lines[1].split() == ["1", "30", "30", "0", "100.0%", "[0.886,", "1.000]"]
    assert lines[2].split()[:5] == ["2", "1", "3", "2", "33.3%"] and lines[2].endswith("small_n, errors")
    assert lines[3].startswith("overall") and lines[3].endswith("errors")
    assert "accuracy over the 31 completed instances: 100.0%" in lines
    assert "failures by stage: parse 0, api_name 0, score 0, error 2" in lines
    assert lines[-2] == "tokens per instance: 12 (usage missing for 32 instances)"
    assert lines[-1] == "tokens per correct answer: 12 [12, 12]"  # the instance with usage is right
