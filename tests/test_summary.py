"""summary.json's statistics: errors are not answers, missing usage is not zero, intervals and flags."""

import itertools
import json

import pytest
from results_folders import eval_tasks, score_folder

from apibank_bench.runs.row import ResultRow
from apibank_bench.runs.summary import add_summary_to_json_report, gold_api_name, summarize_rows, table_lines


_IDS = itertools.count()


def _row(level="1", correct=True, stage="score", api="AddAgenda", **extra):
    """A row of its own instance (pass `id` and `epoch` for another epoch of one)."""
    line = {"id": f"x{next(_IDS)}", "level": level, "correct": correct, "stage": stage,
            "gold_call": f"[{api}(content='a(b)')]", **extra}
    return ResultRow.from_json(line)


def _rows(count: int, **fields) -> list[ResultRow]:
    return [_row(**fields) for _ in range(count)]


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
    rows = _rows(25, level="1", api="AddAgenda") + _rows(5, level="2", correct=False, api="ToolSearcher")
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
    rows = _rows(30, level="1") + _rows(2, level="2", correct=False, stage="error") + \
        [_row(level="2", prompt_tokens=10, completion_tokens=2, model_calls=1)]
    lines = table_lines(summarize_rows(rows))
    assert lines[1].split() == ["1", "30", "30", "0", "100.0%", "[0.886,", "1.000]"]
    assert lines[2].split()[:5] == ["2", "1", "3", "2", "33.3%"] and lines[2].endswith("small_n, errors")
    assert lines[3].startswith("overall") and lines[3].endswith("errors")
    assert "accuracy over the 31 completed instances: 100.0%" in lines
    assert "failures by stage: parse 0, api_name 0, score 0, error 2" in lines
    assert lines[-2] == "tokens per instance: 12 (usage missing for 32 instances)"
    assert lines[-1] == "tokens per correct answer: 12 [12, 12]"  # the instance with usage is right


def _epochs(right: list[int], epochs: int, level: str = "1") -> list[ResultRow]:
    """One instance per entry, right in that many of its `epochs` epochs."""
    start = next(_IDS)
    return [_row(level=level, id=f"i{start}-{index}", epoch=epoch, correct=epoch < count)
            for epoch in range(epochs) for index, count in enumerate(right)]


def test_with_epochs_the_headline_counts_instances_and_takes_the_clustered_interval():
    from apibank_bench.runs.stats import clustered_wilson, wilson

    # The case: 20 instances x 4 epochs; an instance mostly right or wrong in all its epochs.
    right = [4] * 8 + [0] * 8 + [3, 1, 2, 2]
    summary = summarize_rows(_epochs(right, 4))
    assert (summary["total"], summary["attempts"], summary["correct"]) == (20, 80, 40)
    assert summary["accuracy"] == 0.5
    assert summary["wilson_95"] == list(clustered_wilson(right, [4] * 20))
    low, high = summary["wilson_95"]
    rows_low, rows_high = wilson(40, 80)  # what the headline showed: every row an independent instance
    assert low < rows_low - 0.05 and high > rows_high + 0.05
    assert summary["by_level"]["1"]["total"] == 20 and summary["by_api"]["AddAgenda"]["total"] == 20
    # n counts instances, so 10 instances of 4 epochs are a small n (40 rows are not 40 instances).
    assert summarize_rows(_epochs([2] * 10, 4))["flags"] == ["small_n"]


def test_epochs_tables_name_their_rows_and_count_instances():
    summary = summarize_rows(_epochs([4] * 10 + [0] * 10, 2) + _epochs([1] * 5, 2, level="2"))
    lines = table_lines(summary)
    assert lines[0].split()[:5] == ["level", "correct", "attempts", "n", "errors"]
    assert lines[1].split()[:5] == ["1", "20", "40", "20", "0"] and lines[2].split()[:4] == ["2", "5", "10", "5"]
    assert "n counts instances, each solved in several epochs; accuracy is over the attempts" in lines
    repeats = lines[lines.index(next(line for line in lines if "pass@" in line)):]
    assert repeats[0].split()[:3] == ["level", "epochs", "mean"]  # its rows are levels, their epochs a column
    assert [line.split()[:2] for line in repeats[1:4]] == [["1", "2"], ["2", "2"], ["overall", "2"]]


def test_tokens_per_correct_with_an_unbounded_upper_end_says_so():
    rows = [_row(correct=index == 3, prompt_tokens=500, completion_tokens=15, model_calls=1) for index in range(100)]
    summary = summarize_rows(rows)
    per_correct = summary["tokens_per_correct"]
    assert per_correct["tokens_per_correct"] == 51500 and per_correct["ci_95"][1] is None
    assert f"tokens per correct answer: 51500 [{per_correct['ci_95'][0]:.0f}, ∞]" in table_lines(summary)
    assert json.loads(json.dumps(summary))["tokens_per_correct"]["ci_95"][1] is None  # JSON: null, not Infinity
