"""Result files: hostile text is stored safely, long text is capped, a torn line is repaired."""

import hashlib
import json

from apibank_bench.data import manifests
from hypothesis import example, given, settings, strategies as st

from apibank_bench.runs.results import (MAX_STORED_CHARS, PREDICTIONS, RESULTS, TRACES, RunFiles, cap_strings,
                                   capped_json, read_jsonl, read_rows, records, to_json, trace_name)
from apibank_bench.runs.row import ResultRow
from apibank_bench.scoring.scorer import Scorer
from apibank_bench.scoring.stage import Stage
from apibank_bench.data.tasks import get_task

SURROGATE_ANSWER = "[GetToday(x='\ud800')] and a stray \udfff"


def a_task():
    return get_task(manifests.manifest_ids("all")[0])


def test_lone_surrogates_are_written_and_read_back_unchanged(tmp_path):
    line = to_json({"prediction": SURROGATE_ANSWER, "tail": "é ✓"})
    line.encode("utf-8")  # would raise on a raw lone surrogate
    assert "é ✓" in line  # other characters stay readable
    assert json.loads(line)["prediction"] == SURROGATE_ANSWER

    files = RunFiles(tmp_path)
    files.append({"id": "a", "prediction": SURROGATE_ANSWER}, ResultRow("a", level="1", stage=Stage.PARSE),
                 {"id": "a", "agents": [{"answer": SURROGATE_ANSWER}]})
    assert read_jsonl(tmp_path / PREDICTIONS)[0]["prediction"] == SURROGATE_ANSWER
    trace = json.loads((tmp_path / TRACES / trace_name("a")).read_text(encoding="utf-8"))
    assert trace["agents"][0]["answer"] == SURROGATE_ANSWER
    files.finalize(["a"])  # rewriting in order must not fail either
    assert read_jsonl(tmp_path / PREDICTIONS)[0]["prediction"] == SURROGATE_ANSWER


def test_a_surrogate_answer_is_scored_and_recorded(tmp_path, apibank_root):
    task = a_task()
    score = Scorer(apibank_root).score(task, SURROGATE_ANSWER)
    prediction, row = records(task, SURROGATE_ANSWER, score)
    files = RunFiles(tmp_path)
    files.append(prediction, row)
    assert read_jsonl(tmp_path / RESULTS)[0]["predicted_call"] == score.predicted_call


def test_long_answers_are_stored_cut_with_length_and_hash_but_scored_whole(tmp_path, apibank_root):
    task = a_task()
    answer = "x" * (3 * MAX_STORED_CHARS) + task.gold_call  # the call is past the cap
    score = Scorer(apibank_root).score(task, answer)
    assert score.correct
    prediction, row = records(task, answer, score, agent_answers=["short", answer])
    assert prediction["prediction"] == answer[:MAX_STORED_CHARS]
    assert prediction["prediction_truncated"] == {
        "length": len(answer), "sha256": hashlib.sha256(answer.encode()).hexdigest()}
    assert row.correct and row.agent_answers == ["short", answer[:MAX_STORED_CHARS]]
    assert row.extra["agent_answers_truncated"] == {"1": prediction["prediction_truncated"]}

    RunFiles(tmp_path).append(prediction, row, {"id": task.combined_id, "agents": [{"answer": answer}] * 2})
    written = read_jsonl(tmp_path / RESULTS)[0]
    assert list(written)[-3:] == ["agent_answers", "agent_answers_truncated", "schema_version"]  # the note beside
    # what it notes; the row's version its last key
    trace = (tmp_path / TRACES / trace_name(task.combined_id)).read_text(encoding="utf-8")
    assert len(trace) < 3 * MAX_STORED_CHARS
    assert json.loads(trace)["agents"][1]["answer_truncated"]["length"] == len(answer)


def test_cap_leaves_short_values_alone():
    value = {"a": "x" * MAX_STORED_CHARS, "b": [1, None, {"c": "y"}], "d": 2.5}
    assert cap_strings(value) == value
    assert cap_strings({"a": ["abcdef"]}, limit=3) == {"a": ["abc"], "a_truncated": {
        "0": {"length": 6, "sha256": hashlib.sha256(b"abcdef").hexdigest()}}}


#: JSON-like values with strings around a small cap: short, at it, past it, with escapes and surrogates.
_TEXT = st.text(st.sampled_from("ab\"\\\n\u00e9\ud800\U0001f600"), max_size=12)
_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | _TEXT,
                       lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
                       max_leaves=12)


@settings(max_examples=400, deadline=None)
@given(value=_VALUES, limit=st.integers(1, 12))
@example(value="abcd", limit=3)  # the whole JSON is the limit + 3 characters, and the string is past it
@example(value={"k": ["\n\n"]}, limit=1)
def test_capped_json_is_the_json_of_the_capped_value(value, limit):
    """The shortcut (no walk when the whole JSON fits the cap) never changes what is written."""
    assert capped_json(value, limit) == to_json(cap_strings(value, limit))


def test_resume_drops_a_torn_last_line_before_appending(tmp_path):
    good = [json.dumps({"id": f"t{index}", "correct": True}) + "\n" for index in range(3)]
    torn = '{"id": "t3", "prediction": "caf\u00e9'.encode()[:-1]  # cut inside a UTF-8 character
    (tmp_path / RESULTS).write_bytes("".join(good).encode() + torn)
    (tmp_path / PREDICTIONS).write_text("".join(good) + '{"id": "t3"}\n{"id": "t4", "pre')
    assert [line["id"] for line in read_jsonl(tmp_path / RESULTS)] == ["t0", "t1", "t2"]

    files = RunFiles(tmp_path, resume=True)
    assert (tmp_path / RESULTS).read_text() == "".join(good)
    assert (tmp_path / PREDICTIONS).read_text() == "".join(good) + '{"id": "t3"}\n'
    files.append({"id": "t3"}, ResultRow("t3"))
    assert [line["id"] for line in read_jsonl(tmp_path / RESULTS)] == ["t0", "t1", "t2", "t3"]


def test_resume_keeps_intact_files_and_a_fresh_run_empties_them(tmp_path):
    text = json.dumps({"id": "t0"}) + "\n"
    (tmp_path / RESULTS).write_text(text)
    RunFiles(tmp_path, resume=True)
    assert (tmp_path / RESULTS).read_text() == text
    RunFiles(tmp_path)
    assert not (tmp_path / RESULTS).exists()


def test_a_row_read_and_written_back_is_the_line_it_was_read_from():
    # Key order not the declared one, an unknown key, a truncation note, null usage, an old row's missing epoch.
    line = {"id": "t", "level": "2", "correct": False, "stage": "score", "error": "x" * 5, "error_truncated": {
        "length": 9, "sha256": "ab"}, "predicted_call": "[A(x=1)]", "gold_call": "[A(x=2)]", "a_newer_field": [1, 2],
        "prompt_tokens": None, "completion_tokens": None, "latency_s": 1.5, "model_calls": 2, "vote_margin": None}
    row = ResultRow.from_json(line)
    assert list(row.to_json().items()) == list(line.items())
    assert to_json(row.to_json()) == to_json(line)
    assert row.epoch == 0 and row.key == ("t", 0)  # a row from before epochs reads as epoch 0 (and is not given one)
    assert row.extra == {"error_truncated": {"length": 9, "sha256": "ab"}, "a_newer_field": [1, 2]}
    assert row.model_calls == 2 and row.prompt_tokens is None and row.vote_margin is None
    assert not row.is_correct and not row.is_error


def test_the_stage_is_a_stage_in_python_and_a_plain_str_in_json():
    row = ResultRow.from_json({"id": "e", "epoch": 1, "correct": True, "stage": "error"})
    assert row.stage is Stage.ERROR and row.is_error and not row.is_correct  # an error claiming success is no answer
    assert type(row.to_json()["stage"]) is str and row.to_json()["stage"] == "error"  # xdist serializes no enum
    assert type(ResultRow("a", stage=Stage.PARSE).to_json()["stage"]) is str
    assert ResultRow("a", stage="api_name").stage is Stage.API_NAME


def test_a_new_row_writes_its_columns_and_the_optional_fields_it_was_given():
    assert list(ResultRow("a").to_json()) == ["id", "epoch", "level", "correct", "stage", "error", "predicted_call",
                                              "gold_call", "schema_version"]  # a row of `score`: no usage fields,
    # not even null ones; its version last
    given = ResultRow("a", prompt_tokens=None, model_calls=1, agent_answers=None, nulls=frozenset({"prompt_tokens"}))
    assert list(given.to_json())[8:] == ["prompt_tokens", "model_calls", "schema_version"]  # given as None: null;
    # never given: absent
    assert given == ResultRow.from_json(given.to_json())  # the same row, whatever JSON form it came from


def test_records_of_a_team_keep_a_null_that_says_something(apibank_root):
    task = a_task()
    score = Scorer(apibank_root).score(task, task.gold_call)
    _, voted = records(task, task.gold_call, score, 2, prompt_tokens=None, completion_tokens=None, latency_s=0.5,
                       model_calls=3, agents_correct=[], oracle=False, vote_margin=None)
    line = voted.to_json()
    assert line["epoch"] == 2 and line["vote_margin"] is None and line["prompt_tokens"] is None  # a vote nobody won
    _, managed = records(task, task.gold_call, score, agents_correct=[], oracle=False)
    assert "vote_margin" not in managed.to_json() and "prompt_tokens" not in managed.to_json()  # nobody voted


def test_rows_of_the_gold_self_check_round_trip_to_the_same_bytes(tmp_path, apibank_root):
    scorer = Scorer(apibank_root)
    files = RunFiles(tmp_path)
    for task_id in manifests.manifest_ids("all")[:5]:
        task = get_task(task_id)
        files.append(*records(task, task.gold_call, scorer.score(task, task.gold_call), prompt_tokens=0,
                              completion_tokens=0, latency_s=0.0, model_calls=0))
    text = (tmp_path / RESULTS).read_text(encoding="utf-8")
    assert "".join(to_json(row.to_json()) + "\n" for row in read_rows(tmp_path)) == text
    assert [row.is_correct for row in read_rows(tmp_path)] == [True] * 5


def test_appended_lines_are_synced_to_disk_once_a_second_and_when_the_run_ends(tmp_path, monkeypatch):
    """An fsync per line cost a 100-instance run 1.7 s of its main thread on a busy disk: the lines go to the OS at
    once, to the disk with the first line appended a second after the last sync, and finalize syncs its rewrite."""
    from apibank_bench.core import files as core_files
    from apibank_bench.runs import results

    synced: list[int] = []
    now = [100.0]
    monkeypatch.setattr(results.os, "fsync", synced.append)  # (core.files uses the same os module)
    monkeypatch.setattr(results.time, "monotonic", lambda: now[0])
    assert core_files.os is results.os
    files = RunFiles(tmp_path)
    for i in range(5):  # within one second: the first append syncs both files, the next four neither
        files.append({"id": f"a{i}"}, ResultRow(f"a{i}", level="1", stage=Stage.PARSE), {"id": f"a{i}"})
    assert len(synced) == 2 and len(read_jsonl(tmp_path / RESULTS)) == 5  # yet every line is in the file
    now[0] += results.SYNC_EVERY_S
    files.append({"id": "b"}, ResultRow("b", level="1", stage=Stage.PARSE), {"id": "b"})
    assert len(synced) == 4  # a second later: both files again (with the lines before)
    files.finalize([f"a{i}" for i in range(5)] + ["b"])
    assert len(synced) >= 6  # the rewritten predictions and results (and the summary)
