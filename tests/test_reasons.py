"""Failure reason codes: every code comes from the case that makes it, and a correct answer has none."""

from __future__ import annotations

import json

import pytest
from openai_stub import OpenAIStub, Reply, malformed

from apibank_bench.agents import Solution
from apibank_bench.data.manifests import manifest_ids
from apibank_bench.data.tasks import Task, get_task, render_call
from apibank_bench.llm import ChatClient, ModelConfig, ModelError
from apibank_bench.llm.failure import Failure
from apibank_bench.runs.instances import Solved, score, solve
from apibank_bench.runs.results import records, score_predictions_file
from apibank_bench.runs.row import ResultRow
from apibank_bench.runs.summary import summarize_rows, table_lines
from apibank_bench.scoring.scorer import Scorer
from apibank_bench.scoring.stage import Reason, Stage, model_error_reason

#: A Level-1 task whose gold call is GetUserToken(username=..., password=...), and a Level-2 ToolSearcher one.
PLAIN = "level-1::AddAgenda-AddMeeting-GetUserToken-level-2-3.jsonl::0"


@pytest.fixture(scope="module")
def tasks(apibank_root) -> dict[str, Task]:
    plain = get_task(PLAIN, root=apibank_root)
    search = next(task for task in (get_task(i, root=apibank_root) for i in manifest_ids("2"))
                  if task.gold.api_name == "ToolSearcher")
    return {"plain": plain, "search": search}


def _changed(task: Task, key: str, value: object) -> str:
    return render_call(task.gold.api_name, {**task.gold.params, key: value})


ANSWERS = [  # (answer, reason); the plain task's gold API is GetUserToken
    (None, Reason.PARSE_EMPTY),
    ("   \n", Reason.PARSE_EMPTY),
    ("I would call an API here.", Reason.PARSE_NO_CALL),
    ("[GetUserToken('JohnDoe', password='pass123')]", Reason.PARSE_POSITIONAL),
    ("[GetUserToken(username='JohnDoe', password=)]", Reason.PARSE_SYNTAX),
    ("[GetUserToken(**{'username': 'JohnDoe'})]", Reason.PARSE_KWARGS),
    ("[GetUserToken(username=get(), password='pass123')]", Reason.PARSE_VALUE),
    ("[GetToday()]", Reason.API_NAME_MISMATCH),  # an API of Level 1, not the gold one
    ("[NoSuchApi(x=1)]", Reason.API_NAME_UNKNOWN),
    ("[GetUserToken()]", Reason.SCORE_API_EXCEPTION),  # the API raises: missing arguments
    ("[GetUserToken(username='JohnDoezz', password='pass123')]", Reason.SCORE_WRONG_RESULT),
]


@pytest.mark.parametrize("answer, reason", ANSWERS, ids=[str(reason) for _, reason in ANSWERS])
def test_each_wrong_answer_gets_its_reason(apibank_root, tasks, answer, reason):
    verdict = Scorer(apibank_root).score(tasks["plain"], answer)
    assert (verdict.correct, verdict.reason, verdict.stage) == (False, reason, reason.stage)


def test_a_correct_answer_has_no_reason_and_its_row_no_reason_key(apibank_root, tasks):
    for task in tasks.values():
        verdict = Scorer(apibank_root, "keyword").score(task, task.gold_call)
        assert verdict.correct and verdict.reason is None
        _, row = records(task, task.gold_call, verdict)
        assert "reason" not in row.to_json()


def test_a_search_scorer_misses_with_its_own_reason(apibank_root, tasks):
    task = tasks["search"]
    verdict = Scorer(apibank_root, "keyword").score(task, "[ToolSearcher(keywords='nothing like the gold')]")
    assert (verdict.correct, verdict.reason) == (False, Reason.SCORE_SEARCH_MISS)
    plain = Scorer(apibank_root).score(tasks["plain"], _changed(tasks["plain"], "username", "someone else"))
    assert plain.reason == Reason.SCORE_WRONG_RESULT  # the generic scorer's wrong answer is not a search miss


def test_a_results_row_writes_its_reason_as_a_plain_str_and_reads_it_back(apibank_root, tasks):
    task = tasks["plain"]
    _, row = records(task, "no call", Scorer(apibank_root).score(task, "no call"))
    line = json.loads(json.dumps(row.to_json()))
    assert type(line["reason"]) is str and line["reason"] == "parse:no_call"
    assert list(line)[:9] == ["id", "epoch", "level", "correct", "stage", "error", "predicted_call", "gold_call",
                              "reason"]
    assert ResultRow.from_json(line).reason is Reason.PARSE_NO_CALL
    newer = ResultRow.from_json({**line, "reason": "parse:a_code_of_a_newer_version"})
    assert newer.to_json() == {**line, "reason": "parse:a_code_of_a_newer_version"}  # kept as read


def _client(url: str, **settings) -> ChatClient:
    config = ModelConfig(base_urls=[url], model="stub-model", api_key="test", cache_dir=None,
                         **{"timeout": 5.0, "max_retries": 0, **settings})
    return ChatClient(config, retry_base_delay=0.01, retry_max_delay=0.05)


OVERFLOW = (b'{"error": {"code": 400, "message": "request (4476 tokens) exceeds the available context size (4096 '
            b'tokens), try increasing it", "type": "exceed_context_size_error"}}')
MODEL_ERRORS = [  # what the endpoint does, the client's settings, the reason of the error the client reports
    (Reply(status=500), {}, Reason.ERROR_ENDPOINT),
    (Reply(status=429), {}, Reason.ERROR_ENDPOINT),
    (Reply(reset=True), {}, Reason.ERROR_ENDPOINT),
    (malformed(), {}, Reason.ERROR_ENDPOINT),
    (Reply(status=400, raw=OVERFLOW, headers={"Content-Type": "application/json"}), {}, Reason.ERROR_CONTEXT_LENGTH),
    (Reply(delay=2.0), {"timeout": 0.2}, Reason.ERROR_TIMEOUT),
    (Reply(delay=2.0), {"timeout": 0.2, "max_retries": 1}, Reason.ERROR_TIMEOUT),  # "gave up after 2 attempts: ..."
]


@pytest.mark.parametrize("reply, settings, reason", MODEL_ERRORS, ids=[str(r) for *_, r in MODEL_ERRORS])
def test_a_model_error_from_a_real_client_gets_its_reason(reply, settings, reason):
    with OpenAIStub(default=reply) as stub:
        with pytest.raises(ModelError) as raised:
            _client(stub.url, **settings).complete([{"role": "user", "content": "hi"}])
    assert model_error_reason(raised.value.failure) == reason, str(raised.value)  # typed where it was raised


def test_a_request_of_a_stopped_run_is_interrupted_and_an_unknown_failure_a_model_error():
    with OpenAIStub() as stub:
        client = _client(stub.url)
        client.abandon("Ctrl-C")
        with pytest.raises(ModelError) as raised:
            client.complete([{"role": "user", "content": "hi"}])
    assert model_error_reason(raised.value.failure) == Reason.ERROR_INTERRUPTED
    assert model_error_reason(None) == Reason.ERROR_MODEL  # an SDK's own failure: a kind the model layer did not name
    assert {model_error_reason(failure) for failure in Failure} <= set(Reason)  # every kind is a reason code


def test_error_rows_get_the_reason_of_what_failed(apibank_root, tasks):
    task, scorer = tasks["plain"], Scorer(apibank_root)
    endpoint = score(Solved(task, Solution(None), ["HTTP 500: InternalServerError: boom"], True, 0.1, 0,
                            Failure.ENDPOINT), scorer)
    assert (endpoint.row.stage, endpoint.row.reason) == (Stage.ERROR, Reason.ERROR_ENDPOINT)
    assert endpoint.row.error == "model error: HTTP 500: InternalServerError: boom"
    # the kind travels as a value from where the request failed: a message that names another error is just text
    said = score(Solved(task, Solution(None), ["HTTP 500: the proxy said APITimeoutError"], True, 0.1, 0,
                        Failure.ENDPOINT), scorer)
    assert said.row.reason == Reason.ERROR_ENDPOINT

    def timing_out(task):  # an agent whose request timed out, as a chat agent records it
        from apibank_bench.agents.turn import AgentTurn

        turn = AgentTurn(role="solver", messages=[], error="gave up after 2 attempts: boom", failure=Failure.TIMEOUT)
        return Solution(None, turns=[turn], error=turn.error)

    timed_out = score(solve(task, timing_out), scorer)
    assert (timed_out.row.stage, timed_out.row.reason) == (Stage.ERROR, Reason.ERROR_TIMEOUT)

    def crashing(task):
        raise KeyError("a solver bug")

    crashed = score(solve(task, crashing), scorer)
    assert (crashed.row.stage, crashed.row.reason) == (Stage.ERROR, Reason.ERROR_SOLVER_CRASH)

    class BrokenScorer(Scorer):
        def score(self, task, answer):
            raise RuntimeError("a scorer bug")

    broken = score(Solved(task, Solution(task.gold_call), [], False, 0.1), BrokenScorer(apibank_root))
    assert (broken.row.stage, broken.row.reason) == (Stage.ERROR, Reason.ERROR_SCORER_CRASH)


def test_a_cut_stored_answer_is_an_error_with_its_reason(apibank_root, tasks, tmp_path):
    saved = tmp_path / "predictions.jsonl"
    saved.write_text(json.dumps({"id": PLAIN, "prediction": "[GetUserToken(", "prediction_truncated":
                                 {"length": 99999, "sha256": "0"}}) + "\n")
    summary = score_predictions_file(saved, tmp_path / "out", root=apibank_root)
    (line,) = [json.loads(text) for text in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert (line["stage"], line["reason"]) == ("error", "error:cut_answer")
    assert summary["failures_by_reason"] == {"error:cut_answer": 1}


def test_the_summary_counts_reasons_and_the_table_shows_them():
    def row(index, correct, stage, reason=None):
        return ResultRow.from_json({"id": f"x{index}", "level": "1", "correct": correct, "stage": stage,
                                    "gold_call": "[GetToday()]", **({"reason": reason} if reason else {})})

    rows = [row(0, True, "score"), row(1, False, "parse", "parse:no_call"), row(2, False, "parse", "parse:no_call"),
            row(3, False, "error", "error:timeout"), row(4, False, "score")]  # the last: written before reasons
    summary = summarize_rows(rows)
    assert summary["failures_by_reason"] == {"parse:no_call": 2, "error:timeout": 1, "unrecorded": 1}
    assert list(summary["failures_by_reason"]) == ["parse:no_call", "error:timeout", "unrecorded"]  # most first
    assert "failures by reason: parse:no_call 2, error:timeout 1, unrecorded 1" in table_lines(summary)


def test_every_code_names_its_stage_and_is_written_as_spelled():
    assert [str(reason) for reason in Reason] == [
        "parse:empty", "parse:no_call", "parse:syntax", "parse:positional", "parse:kwargs", "parse:value",
        "parse:tool_arguments", "parse:tool_unknown", "parse:tool_schema", "parse:tool_in_text",
        "api_name:mismatch", "api_name:unknown_api", "score:wrong_result", "score:api_exception", "score:search_miss",
        "score:argument_type", "error:timeout", "error:context_length", "error:endpoint", "error:model", "error:interrupted",
        "error:time_limit", "error:solver_crash", "error:scorer_crash", "error:worker_crash", "error:cut_answer"]
    assert {reason.stage for reason in Reason} == set(Stage)
    assert all(str(reason).startswith(f"{reason.stage}:") for reason in Reason)


def test_the_report_and_the_instance_page_show_the_reasons(apibank_root, tasks, tmp_path):
    from apibank_bench.reports.html import build_report
    from apibank_bench.reports.instance import load_instance, sections

    saved = tmp_path / "predictions.jsonl"
    task = tasks["plain"]
    saved.write_text("".join(json.dumps({"id": task.combined_id, "prediction": answer}) + "\n"
                             for answer in ("[GetToday()]",)))
    score_predictions_file(saved, tmp_path / "run", root=apibank_root)
    page = build_report([tmp_path / "run"], tmp_path / "report").read_text()
    assert '<th class="name">reason</th>' in page and '<td class="name">api_name:mismatch</td><td>1</td>' in page
    lines = [line for _, block in sections(load_instance(task.combined_id, tmp_path / "run"), root=apibank_root)
             for line in block]
    assert "reason:      api_name:mismatch" in lines
