"""Result files: hostile text is stored safely, long text is capped, a torn line is repaired."""

import hashlib
import json

from apibank_bench.data import manifests
from apibank_bench.runs.results import (MAX_STORED_CHARS, PREDICTIONS, RESULTS, TRACES, RunFiles, cap_strings,
                                   read_jsonl, records, to_json, trace_name)
from apibank_bench.scoring.scorer import Scorer
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
    files.append({"id": "a", "prediction": SURROGATE_ANSWER}, {"id": "a", "level": "1", "correct": False, "stage": "parse"},
                 {"id": "a", "agents": [{"answer": SURROGATE_ANSWER}]})
    assert read_jsonl(tmp_path / PREDICTIONS)[0]["prediction"] == SURROGATE_ANSWER
    trace = json.loads((tmp_path / TRACES / trace_name("a")).read_text(encoding="utf-8"))
    assert trace["agents"][0]["answer"] == SURROGATE_ANSWER
    files.finalize(["a"])  # rewriting in order must not fail either
    assert read_jsonl(tmp_path / PREDICTIONS)[0]["prediction"] == SURROGATE_ANSWER


def test_a_surrogate_answer_is_scored_and_recorded(tmp_path, apibank_root):
    task = a_task()
    score = Scorer(apibank_root).score(task, SURROGATE_ANSWER)
    prediction, result = records(task, SURROGATE_ANSWER, score)
    files = RunFiles(tmp_path)
    files.append(prediction, result)
    assert read_jsonl(tmp_path / RESULTS)[0]["predicted_call"] == score.predicted_call


def test_long_answers_are_stored_cut_with_length_and_hash_but_scored_whole(tmp_path, apibank_root):
    task = a_task()
    answer = "x" * (3 * MAX_STORED_CHARS) + task.gold_call  # the call is past the cap
    score = Scorer(apibank_root).score(task, answer)
    assert score.correct
    prediction, result = records(task, answer, score, {"agent_answers": ["short", answer]})
    assert prediction["prediction"] == answer[:MAX_STORED_CHARS]
    assert prediction["prediction_truncated"] == {
        "length": len(answer), "sha256": hashlib.sha256(answer.encode()).hexdigest()}
    assert result["correct"] and result["agent_answers"] == ["short", answer[:MAX_STORED_CHARS]]
    assert result["agent_answers_truncated"] == {"1": prediction["prediction_truncated"]}

    RunFiles(tmp_path).append(prediction, result, {"id": task.combined_id, "agents": [{"answer": answer}] * 2})
    trace = (tmp_path / TRACES / trace_name(task.combined_id)).read_text(encoding="utf-8")
    assert len(trace) < 3 * MAX_STORED_CHARS
    assert json.loads(trace)["agents"][1]["answer_truncated"]["length"] == len(answer)


def test_cap_leaves_short_values_alone():
    value = {"a": "x" * MAX_STORED_CHARS, "b": [1, None, {"c": "y"}], "d": 2.5}
    assert cap_strings(value) == value
    assert cap_strings({"a": ["abcdef"]}, limit=3) == {"a": ["abc"], "a_truncated": {
        "0": {"length": 6, "sha256": hashlib.sha256(b"abcdef").hexdigest()}}}


def test_resume_drops_a_torn_last_line_before_appending(tmp_path):
    good = [json.dumps({"id": f"t{index}", "correct": True}) + "\n" for index in range(3)]
    torn = '{"id": "t3", "prediction": "caf\u00e9'.encode()[:-1]  # cut inside a UTF-8 character
    (tmp_path / RESULTS).write_bytes("".join(good).encode() + torn)
    (tmp_path / PREDICTIONS).write_text("".join(good) + '{"id": "t3"}\n{"id": "t4", "pre')
    assert [line["id"] for line in read_jsonl(tmp_path / RESULTS)] == ["t0", "t1", "t2"]

    files = RunFiles(tmp_path, resume=True)
    assert (tmp_path / RESULTS).read_text() == "".join(good)
    assert (tmp_path / PREDICTIONS).read_text() == "".join(good) + '{"id": "t3"}\n'
    files.append({"id": "t3"}, {"id": "t3", "correct": False})
    assert [line["id"] for line in read_jsonl(tmp_path / RESULTS)] == ["t0", "t1", "t2", "t3"]


def test_resume_keeps_intact_files_and_a_fresh_run_empties_them(tmp_path):
    text = json.dumps({"id": "t0"}) + "\n"
    (tmp_path / RESULTS).write_text(text)
    RunFiles(tmp_path, resume=True)
    assert (tmp_path / RESULTS).read_text() == text
    RunFiles(tmp_path)
    assert not (tmp_path / RESULTS).exists()
