"""Function calling measured (issue 40): which path answered, `--tool-parse`, and type-only argument mismatches.

The stand-in answers as vLLM does for a model that wrote its call in the hermes, Llama 3 JSON or
Mistral format: with a tool parser, as `tool_calls`; without one, the raw text in `content`. Under
`--tool-parse both` the two must score exactly alike; under `server` the call left in the text is a
parse failure with its own reason code.
"""

from __future__ import annotations

import json

import pytest

from apibank_bench.agents.tool_answer import AnsweredBy
from apibank_bench.agents.topologies import build_topology
from apibank_bench.core.settings import RunConfig
from apibank_bench.data.tasks import get_task
from apibank_bench.llm import ChatClient, ModelConfig
from apibank_bench.scoring.scorer import Scorer
from apibank_bench.scoring.stage import Reason, Stage
from openai_stub import RAW_TOOL_FORMATS, OpenAIStub, Reply, tool_call, vllm_tool_reply
from helpers import EVAL_IDS

TASKS = ["level-1::AddAgenda-AddAlarm-GetUserToken-level-2-1.jsonl::0", "level-2::AddAgenda-level-3-1.jsonl::2",
         "level-1::CancelRegistration-RecordHealthData-level-2-5.jsonl::0"]
#: Its gold `appointment_id` is a string of digits; sent as a number, CancelRegistration's own check fails.
TYPED = TASKS[2]


def _client(stub: OpenAIStub) -> ChatClient:
    return ChatClient(ModelConfig(base_urls=[stub.url], model="stub-model", api_key="test", timeout=10,
                                  max_retries=0, constrained=False))


def solve_and_score(stub, task, reply: Reply, mode: str = "both", topology: str = "single"):
    stub.default = reply
    solution = build_topology(RunConfig(topology=topology, agent_kind="sdk", tool_parse=mode, team_size=2),
                              _client(stub))(task)
    score = Scorer().score(task, solution.prediction)
    return solution, score


def _verdict(score) -> tuple:
    return score.correct, score.stage, score.predicted_call, score.reason


def answers(task) -> dict[str, dict]:
    """The gold arguments, one value wrong, and (where a value is a string of digits) that value as a number."""
    gold = dict(task.gold.params)
    key = next(iter(gold))
    found = {"gold": gold, "wrong": {**gold, key: "not-the-gold-value"}}
    digits = [key for key, value in gold.items() if isinstance(value, str) and value.isdigit()]
    if digits:
        found["retyped"] = {**gold, digits[0]: int(gold[digits[0]])}
    return found


@pytest.mark.parametrize("format", RAW_TOOL_FORMATS)
@pytest.mark.parametrize("task_id", TASKS)
def test_a_call_left_in_content_scores_exactly_as_a_parsed_tool_call_under_both(stub, apibank_root, task_id, format):
    task = get_task(task_id)
    for kind, arguments in answers(task).items():
        parsed, parsed_score = solve_and_score(stub, task, vllm_tool_reply(format, task.gold.api_name, arguments))
        left, left_score = solve_and_score(stub, task, vllm_tool_reply(format, task.gold.api_name, arguments,
                                                                       parsed=False))
        assert _verdict(left_score) == _verdict(parsed_score), (kind, left.answer)
        assert left.answer == parsed.answer
        assert (parsed.answered_by, left.answered_by) == (AnsweredBy.TOOL_CALL, AnsweredBy.CLIENT_PARSE)
        if kind == "gold":
            assert parsed_score.correct
        if kind == "retyped":
            assert parsed_score.reason == Reason.SCORE_ARGUMENT_TYPE
        [turn] = left.turns
        assert turn.text_tool_call["format"] == format and turn.tool_calls == []


@pytest.mark.parametrize("format", RAW_TOOL_FORMATS)
def test_under_server_a_call_left_in_content_is_a_parse_failure_with_its_code(stub, apibank_root, format):
    task = get_task(TASKS[0])
    gold = dict(task.gold.params)
    left, score = solve_and_score(stub, task, vllm_tool_reply(format, task.gold.api_name, gold, parsed=False),
                                  mode="server")
    assert (score.correct, score.stage, score.reason) == (False, Stage.PARSE, Reason.PARSE_TOOL_IN_TEXT)
    assert left.answered_by == AnsweredBy.TEXT and left.error is None
    parsed, score = solve_and_score(stub, task, vllm_tool_reply(format, task.gold.api_name, gold), mode="server")
    assert score.correct and parsed.answered_by == AnsweredBy.TOOL_CALL
    # under `client` the server's parse is not read: the same tool_calls answer is nothing
    _, score = solve_and_score(stub, task, vllm_tool_reply(format, task.gold.api_name, gold), mode="client")
    assert (score.stage, score.reason) == (Stage.PARSE, Reason.PARSE_EMPTY)


@pytest.mark.parametrize("reply, reason", [
    (tool_call("AddAlarm", "{not json"), Reason.PARSE_TOOL_ARGUMENTS),
    (tool_call("AddAlarm", "[1, 2]"), Reason.PARSE_TOOL_ARGUMENTS),
    (tool_call("DeleteEverything", {"now": True}), Reason.PARSE_TOOL_UNKNOWN),
    (tool_call("AddAlarm", {"token": "t", "alarm_time": "now"}), Reason.PARSE_TOOL_SCHEMA),
    (Reply(text='<tool_call>{"name": "AddAlarm", "arguments": {"token": __import__("os")}}</tool_call>'),
     Reason.PARSE_TOOL_ARGUMENTS),
    (Reply(text='[TOOL_CALLS] [{"name": "Nope", "arguments": {}}]'), Reason.PARSE_TOOL_UNKNOWN),
])
def test_a_malformed_tool_call_is_a_parse_row_with_its_reason_never_a_crash(stub, apibank_root, reply, reason):
    task = get_task(TASKS[0])
    solution, score = solve_and_score(stub, task, reply)
    assert (score.correct, score.stage, score.reason) == (False, Stage.PARSE, reason)
    assert solution.error is None and solution.answered_by == AnsweredBy.TEXT_FALLBACK
    assert solution.turns[0].tool_reason == reason


def test_a_malformed_tool_call_beside_a_bracketed_call_in_the_text_falls_back_to_the_text(stub, apibank_root):
    task = get_task(TASKS[0])
    reply = Reply(text=f"Or rather: {task.gold_call}", tool_calls=[{"name": "AddAlarm", "arguments": "{oops"}])
    solution, score = solve_and_score(stub, task, reply)
    assert score.correct and solution.answered_by == AnsweredBy.TEXT_FALLBACK


def test_a_team_row_names_the_path_of_the_answer_it_submits(stub, apibank_root):
    task = get_task(TASKS[0])
    gold = dict(task.gold.params)
    replies = iter([vllm_tool_reply("hermes", task.gold.api_name, gold, parsed=False), Reply(text=task.gold_call)])
    stub.default = lambda body: next(replies)
    solution = build_topology(RunConfig(topology="sequential", agent_kind="sdk", team_size=2), _client(stub))(task)
    assert [turn.answered_by for turn in solution.turns] == [AnsweredBy.CLIENT_PARSE, AnsweredBy.TEXT]
    assert solution.answered_by == AnsweredBy.TEXT  # the last stage's answer is the team's
    assert [agent["answered_by"] for agent in solution.to_trace()["agents"]] == ["client_parse", "text"]
    assert all(type(agent["answered_by"]) is str for agent in solution.to_trace()["agents"])


def test_chat_agents_answer_in_text_and_a_failed_request_answers_nothing(stub, apibank_root):
    task = get_task(TASKS[0])
    stub.default = Reply(text=task.gold_call)
    solution = build_topology(RunConfig(topology="single"), _client(stub))(task)
    assert solution.answered_by == AnsweredBy.TEXT
    stub.default = Reply(status=500)
    solution = build_topology(RunConfig(topology="single", agent_kind="sdk"), _client(stub))(task)
    assert solution.answered_by == AnsweredBy.NONE and solution.error


# -- argument types -----------------------------------------------------------------------------

def test_a_type_only_mismatch_is_named_and_its_verdict_is_the_apis_own(stub, apibank_root):
    task = get_task(TYPED)
    retyped = answers(task)["retyped"]
    _, typed_score = solve_and_score(stub, task, tool_call(task.gold.api_name, retyped))
    assert not typed_score.correct and typed_score.reason == Reason.SCORE_ARGUMENT_TYPE
    _, wrong_score = solve_and_score(stub, task, tool_call(task.gold.api_name, answers(task)["wrong"]))
    assert not wrong_score.correct and wrong_score.reason in (Reason.SCORE_WRONG_RESULT, Reason.SCORE_API_EXCEPTION)


# -- a run: rows, summary, closing table, instance page, report --------------------------------

def _three_ways(body: dict) -> Reply:
    """The gold call of every instance, by turns as vLLM's `tool_calls`, left in content (hermes), and as text."""
    from helpers import task_of

    task = task_of(body)
    way = EVAL_IDS.index(task.combined_id) % 3
    if way == 2:
        return Reply(text=task.gold_call)
    return vllm_tool_reply("hermes", task.gold.api_name, dict(task.gold.params), parsed=way == 0)


def test_a_run_records_counts_and_shows_which_path_answered(tmp_path):
    from apibank_bench.reports.html import build_report
    from apibank_bench.reports.instance import load_instance, sections
    from apibank_bench.runs.results import read_jsonl
    from helpers import mixed, run_command

    common = ("--model", "stub", "--agent-kind", "sdk", "--limit", "6", "--no-cache")
    with OpenAIStub(default=_three_ways) as stub:
        both = run_command(tmp_path / "both", *common, "--base-url", stub.url)
        server = run_command(tmp_path / "server", *common, "--base-url", stub.url, "--tool-parse", "server")
        refused = run_command(tmp_path / "both", *common, "--base-url", stub.url, "--tool-parse", "client",
                              "--resume")
    with OpenAIStub(default=mixed) as stub:
        text = run_command(tmp_path / "text", *common, "--base-url", stub.url)
    assert both.returncode == 0, both.stdout[-3000:]
    rows = read_jsonl(tmp_path / "both" / "results.jsonl")
    assert [row["answered_by"] for row in rows] == ["tool_call", "client_parse", "text"] * 2
    assert all(row["correct"] for row in rows)
    summary = json.loads((tmp_path / "both" / "summary.json").read_text())
    assert summary["answered_by"]["rows"] == {"tool_call": 2, "client_parse": 2, "text": 2, "text_fallback": 0,
                                              "none": 0}
    assert summary["answered_by"]["turns"] == summary["answered_by"]["rows"] and summary["answered_by"]["tool_calls"] == 4
    assert summary["config"]["run"]["tool_parse"] == "both" and summary["argument_type"] == 0
    assert "answered by: tool_call 2, client_parse 2, text 2, text_fallback 0, none 0" in both.stdout
    assert "NO TOOL CALLS" not in both.stdout

    rows = read_jsonl(tmp_path / "server" / "results.jsonl")  # the calls left in content are not read
    assert [(row["answered_by"], row.get("reason")) for row in rows][:3] == [
        ("tool_call", None), ("text", "parse:tool_in_text"), ("text", None)]
    assert "parse:tool_in_text 2" in server.stdout

    assert refused.returncode == 2 and "tool_parse 'both' (this run: 'client')" in refused.stdout + refused.stderr

    assert text.returncode in (0, 1), text.stdout[-3000:]
    [warning] = [line for line in text.stdout.splitlines() if "NO TOOL CALLS" in line]
    assert "none of the 6 answers came through a tool call" in warning

    page = [line for _, block in sections(load_instance(EVAL_IDS[1], tmp_path / "both")) for line in block]
    assert "answered by: client_parse" in page and "  answered by: client_parse" in page
    assert any(line.startswith("  tool call in the text (hermes): ") for line in page)
    report = build_report([tmp_path / "both", tmp_path / "text"], tmp_path / "report").read_text()
    assert "Which path answered" in report and '<td class="name">client_parse</td><td>2</td><td>0</td>' in report
    assert report.count("no answer came through a tool call (all read from text)") == 1  # the text run's note


def test_the_warning_line_is_marked_yellow_and_only_sdk_runs_show_the_paths():
    from apibank_bench.runs.closing_table import YellowLine, answered_by_lines

    paths = {"rows": {"tool_call": 0, "client_parse": 0, "text": 3, "text_fallback": 1, "none": 0},
             "turns": {"tool_call": 0, "client_parse": 0, "text": 3, "text_fallback": 1, "none": 0}, "tool_calls": 0}
    lines = answered_by_lines(paths)
    assert lines[0] == "answered by: tool_call 0, client_parse 0, text 3, text_fallback 1, none 0"
    assert [type(line) for line in lines] == [str, YellowLine]
    assert answered_by_lines({**paths, "tool_calls": 1}) == lines[:1] and answered_by_lines(None) == []


@pytest.mark.parametrize("predicted, gold, expected", [
    ({"a": "100"}, {"a": 100}, True), ({"a": 100}, {"a": "100"}, True), ({"a": 2.0}, {"a": "2"}, True),
    ({"a": True}, {"a": "True"}, True), ({"a": "false"}, {"a": False}, True), ({"a": [1, "2"]}, {"a": [1, 2]}, True),
    ({"a": "x", "b": 2}, {"a": "x", "b": "2"}, True),
    ({"a": "100"}, {"a": "100.0"}, False),  # both strings: a different value, not a type
    ({"a": 1}, {"a": 1.0}, False),  # both numbers
    ({"a": 1}, {"a": True}, False),  # 1 is not `true`
    ({"a": "x", "b": 2}, {"a": "y", "b": "2"}, False),  # another value besides the type
    ({"a": "100"}, {"a": 100, "b": 1}, False),  # another argument
    ({"a": 100}, {"a": 100}, False),  # equal
])
def test_type_only_differences(predicted, gold, expected):
    from apibank_bench.scoring.argument_types import type_only_difference

    assert type_only_difference(predicted, gold) is expected


# -- structured history -------------------------------------------------------------------------

def test_history_tools_sends_the_dialogues_api_calls_as_tool_calls_and_tool_messages(stub, apibank_root):
    task = get_task("level-2::AddAgenda-level-3-1.jsonl::2")
    api_rows = [row for row in task.history if row["role"] == "API"]
    stub.default = tool_call("ToolSearcher", {"keywords": "agenda"})
    solution = build_topology(RunConfig(topology="single", agent_kind="sdk", history="tools"), _client(stub))(task)
    sent = stub.chat_requests[0]["messages"]
    calls = [message for message in sent if message.get("tool_calls")]
    results = [message for message in sent if message["role"] == "tool"]
    assert [call["tool_calls"][0]["function"]["name"] for call in calls] == [row["api_name"] for row in api_rows]
    assert [json.loads(call["tool_calls"][0]["function"]["arguments"]) for call in calls] == [
        row["result"]["input"] for row in api_rows]
    assert [result["tool_call_id"] for result in results] == [call["tool_calls"][0]["id"] for call in calls]
    assert json.loads(results[0]["content"])["output"][0]["name"] == "GetUserToken"
    assert "desc_for_search" not in results[0]["content"]  # shown as the text form shows it
    assert not any("API_RESULT" in str(message.get("content")) for message in sent)
    # each tool result follows its call; the dialogue's user turns are user messages, in order
    for call in calls:
        assert sent[sent.index(call) + 1]["tool_call_id"] == call["tool_calls"][0]["id"]
    users = [row["text"] for row in task.history if row["role"] == "User"]
    assert [m["content"] for m in sent if m["role"] == "user"][1:-1] == users
    assert sent[-1]["role"] == "user" and sent[-1]["content"].startswith("Answer with exactly one call")
    # the trace holds what was sent
    recorded = solution.turns[0].messages
    assert [(m["role"], m.get("content"), m.get("tool_calls")) for m in recorded] == [
        (m["role"], m.get("content"), m.get("tool_calls")) for m in sent]
    assert solution.answer == "[ToolSearcher(keywords='agenda')]"

    stub.requests.clear()  # the default, the reference's protocol: the dialogue as text in one user message
    build_topology(RunConfig(topology="single", agent_kind="sdk"), _client(stub))(task)
    sent = stub.chat_requests[0]["messages"]
    assert [m["role"] for m in sent] == ["system", "user"] and "API_RESULT: " in sent[1]["content"]


def test_history_tools_is_refused_for_chat_agents_and_on_resume_across_values():
    from apibank_bench.core.settings import differences, from_environment

    with pytest.raises(ValueError, match="history tools .* --apibank-agent-kind sdk"):
        from_environment(environ={}, history="tools")
    assert from_environment(environ={}, history="tools", agent_kind="sdk").history == "tools"
    assert from_environment(environ={}, history="tools", topology="agents_sdk").history == "tools"
    assert differences({"history": "text", "tool_parse": "both"}, {"history": "tools", "tool_parse": "server"})[
        "measurement"] == ["tool_parse", "history"]
    assert differences({}, {"history": "text", "tool_parse": "both"})["measurement"] == []  # recorded before them


# -- the two modes side by side ------------------------------------------------------------------

def _chat_or_tools(body: dict) -> Reply:
    """A chat request (no tools) gets the gold call as text for two instances of three, a wrong call else; a
    request with tools gets `_three_ways`' answers, all gold."""
    from helpers import task_of

    if "tools" in body:
        return _three_ways(body)
    task = task_of(body)
    return Reply(text=task.gold_call if EVAL_IDS.index(task.combined_id) % 3 else "[NoSuchApi(x='1')]")


@pytest.fixture(scope="module")
def two_modes(tmp_path_factory):
    """A chat run and an sdk run of one model through the stand-in, and an sdk run of another model."""
    from helpers import run_command

    folder = tmp_path_factory.mktemp("modes")
    common = ("--limit", "6", "--no-cache")
    with OpenAIStub(default=_chat_or_tools) as stub:
        for name, model, kind in (("chat", "stub", "chat"), ("sdk", "stub", "sdk"), ("other", "other", "sdk")):
            done = run_command(folder / name, *common, "--model", model, "--base-url", stub.url, "--agent-kind", kind)
            assert done.returncode in (0, 1), done.stdout[-3000:]
    return folder


def test_compare_and_the_report_pair_a_chat_run_with_the_sdk_run_of_its_model(two_modes, tmp_path):
    from apibank_bench.reports.compare import compare, format_table
    from apibank_bench.reports.html import build_report

    result = compare([two_modes / "chat", two_modes / "sdk", two_modes / "other"])  # other: another model's
    [modes] = result["modes"]
    assert (modes["chat"], modes["sdk"], modes["paired"]) == ("chat", "sdk", 6)
    assert (modes["overall"]["accuracy_baseline"], modes["overall"]["accuracy_run"]) == (4 / 6, 1.0)
    assert modes["overall"]["won"] == [EVAL_IDS[0], EVAL_IDS[3]] and modes["overall"]["lost"] == []
    assert modes["answered_by"]["sdk"] == {"tool_call": 2, "client_parse": 2, "text": 2, "text_fallback": 0,
                                           "none": 0}
    assert modes["answered_by"]["chat"]["text"] == 6
    table = format_table(result)
    assert "chat vs sdk (stub, single; tool parse both, history text): chat 66.7%, sdk 100.0% on 6 paired" in table
    assert "answered by: chat text 6; sdk tool_call 2, client_parse 2, text 2" in table
    report = build_report([two_modes / "chat", two_modes / "sdk"], tmp_path / "report").read_text()
    assert "Chat against function calling" in report and "<td>+33.3%</td>" in report


def test_the_report_shows_the_two_modes_in_headless_chromium(two_modes, tmp_path):
    from apibank_bench.reports.html import build_report
    from helpers import Page, browse

    index = build_report([two_modes / "chat", two_modes / "sdk"], tmp_path / "report")
    dom = browse(index, tmp_path / "profile", "--dump-dom").stdout
    page = Page()
    page.feed(dom)
    for heading in ("Which path answered", "Chat against function calling"):
        assert any(heading in h for h in page.headings), heading
    assert "+33.3%" in dom and "tool_call 2, client_parse 2, text 2" in dom and page.scripts == 0


def test_a_sweep_over_both_agent_kinds_writes_the_model_by_mode_table(tmp_path, capsys):
    from apibank_bench import cli

    with OpenAIStub(default=_chat_or_tools) as stub:
        code = cli.main(["sweep", "--out", str(tmp_path / "sweep"), "--model", "stub", "--base-url", stub.url,
                         "--agent-kind", "chat,sdk", "--limit", "6", "--no-cache", "--max-retries", "0"])
    assert code in (0, 1)
    table = (tmp_path / "sweep" / "sweep.md").read_text()
    assert "## Chat against function calling (model x mode, paired)" in table
    [row] = [line for line in table.splitlines() if line.startswith("| stub |")]
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[:2] == ["stub", "single"] and cells[4:8] == ["6", "66.7%", "100.0%", "+33.3%"]
    assert cells[-1] == "tool_call 2, client_parse 2, text 2"
