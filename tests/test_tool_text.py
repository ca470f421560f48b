"""Tool calls read from a model's text (agents.tool_text) and checked against the tools offered (agents.tool_answer):
each format as models write it, then hostile text, which is read with json only and never breaks the reading."""

from __future__ import annotations

import json

import pytest

from apibank_bench.agents.tool_answer import AnsweredBy, checked_call, read_answer
from apibank_bench.agents.tool_text import TextToolCall, text_tool_call
from apibank_bench.scoring.stage import Reason

ALARM = {"token": "a9s8d7f6", "time": "2023-03-16 07:00:00"}
SCHEMAS = [{"name": "AddAlarm", "input_parameters": {"token": {"type": "str"}, "time": {"type": "str"}}},
           {"name": "GetToday", "input_parameters": {}}]

# What models write, as a server's tool parser receives it (each is a format a vLLM parser reads).
RECORDED = {
    # Qwen2.5 / Hermes 2 Pro (hermes parser): the call in tags, often after a sentence
    "hermes": 'I will set the alarm.\n<tool_call>\n{"name": "AddAlarm", "arguments": '
              '{"token": "a9s8d7f6", "time": "2023-03-16 07:00:00"}}\n</tool_call>',
    # Qwen3 with thinking: a reasoning block first
    "hermes_thinking": '<think>\nThe user wants an alarm at 7.\n</think>\n\n<tool_call>\n{"name": "AddAlarm", '
                       '"arguments": {"token": "a9s8d7f6", "time": "2023-03-16 07:00:00"}}\n</tool_call>',
    # Llama 3.1 / 3.2 (llama3_json parser), with and without the python tag
    "llama3_json": '{"name": "AddAlarm", "parameters": {"token": "a9s8d7f6", "time": "2023-03-16 07:00:00"}}',
    "llama3_python_tag": '<|python_tag|>{"name": "AddAlarm", "parameters": {"token": "a9s8d7f6", '
                         '"time": "2023-03-16 07:00:00"}}',
    # Mistral 7B Instruct v0.3 (mistral parser, v3 tokenizer) and the newer `name[ARGS]{...}` form
    "mistral": '[TOOL_CALLS] [{"name": "AddAlarm", "arguments": {"token": "a9s8d7f6", "time": "2023-03-16 07:00:00"}}]',
    "mistral_args": '[TOOL_CALLS]AddAlarm[ARGS]{"token": "a9s8d7f6", "time": "2023-03-16 07:00:00"}',
    # a bare JSON object, as the whole answer or in a fenced block
    "json": '{"name": "AddAlarm", "arguments": {"token": "a9s8d7f6", "time": "2023-03-16 07:00:00"}}',
    "json_fenced": 'Here is the call:\n```json\n{"name": "AddAlarm", "arguments": {"token": "a9s8d7f6", '
                   '"time": "2023-03-16 07:00:00"}}\n```',
    # arguments as a JSON string, as `tool_calls` carry them
    "hermes_string_arguments": '<tool_call>{"name": "AddAlarm", "arguments": '
                               '"{\\"token\\": \\"a9s8d7f6\\", \\"time\\": \\"2023-03-16 07:00:00\\"}"}</tool_call>',
}
FORMATS = {"hermes": "hermes", "hermes_thinking": "hermes", "llama3_json": "llama3_json",
           "llama3_python_tag": "llama3_json", "mistral": "mistral", "mistral_args": "mistral", "json": "json",
           "json_fenced": "json", "hermes_string_arguments": "hermes"}


@pytest.mark.parametrize("example", list(RECORDED))
def test_every_recorded_format_reads_as_the_same_call(example):
    found = text_tool_call(RECORDED[example])
    assert found is not None and not found.malformed
    assert (found.format, found.name, json.loads(found.arguments)) == (FORMATS[example], "AddAlarm", ALARM)
    answer = read_answer(RECORDED[example], [], SCHEMAS, "both")
    assert answer.answered_by == AnsweredBy.CLIENT_PARSE and answer.reason is None
    assert answer.answer == "[AddAlarm(token='a9s8d7f6', time='2023-03-16 07:00:00')]"


@pytest.mark.parametrize("text", [
    "", "[AddAlarm(token='a9s8d7f6', time='2023-03-16 07:00:00')]", "The alarm is set for 7 am.",
    '{"status": "success"}',  # JSON, but not a call
    '{"name": "Alice"}',  # a name alone is not a call
    "{braces in prose} and [AddAlarm(time='x')]",
    "```python\nprint(1)\n```",
])
def test_text_without_a_tool_call_is_left_to_the_bracketed_call_reader(text):
    assert text_tool_call(text) is None
    answer = read_answer(text, [], SCHEMAS, "both")
    assert answer.answered_by == (AnsweredBy.TEXT if text else AnsweredBy.NONE) and answer.answer == text
    assert answer.reason is None


def test_only_the_first_call_counts():
    text = RECORDED["hermes"] + '\n<tool_call>{"name": "GetToday", "arguments": {}}</tool_call>'
    assert text_tool_call(text).name == "AddAlarm"
    two = '[TOOL_CALLS] [{"name": "GetToday", "arguments": {}}, {"name": "AddAlarm", "arguments": {}}]'
    assert text_tool_call(two).name == "GetToday"


HOSTILE = [
    '<tool_call>{"name": "AddAlarm", "arguments": {"token": __import__("os").system("touch /tmp/pwned")}}</tool_call>',
    "<tool_call>{'name': 'AddAlarm', 'arguments': {}}</tool_call>",  # a Python dict, not JSON: never evaluated
    '<tool_call>{"name": "AddAlarm", "arguments": {"token": NaN}}</tool_call>',  # not JSON (json.loads takes it)
    '<tool_call>{"name": "AddAlarm", "arguments": {"time": Infinity}}</tool_call>',
    "<tool_call>" + "[" * 100_000 + "]" * 100_000 + "</tool_call>",  # nested past any decoder
    "<tool_call>{\"name\": \"AddAlarm\", \"arguments\": {\"token\": \"unclosed",
    "<tool_call></tool_call>",
    '<tool_call>{"name": ["AddAlarm"], "arguments": {}}</tool_call>',
    '[TOOL_CALLS] []',
    '[TOOL_CALLS]AddAlarm{"token": "x"}',  # no [ARGS]
    '[TOOL_CALLS] [{"name": "AddAlarm", "arguments": {"token": "x"}',  # cut off
]


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_tool_call_text_is_a_malformed_call_never_an_evaluation(text, tmp_path):
    found = text_tool_call(text)
    assert found is not None and found.malformed and found.name == "" and found.arguments == ""
    answer = read_answer(text, [], SCHEMAS, "both")
    assert (answer.answered_by, answer.reason) == (AnsweredBy.TEXT_FALLBACK, Reason.PARSE_TOOL_ARGUMENTS)
    assert answer.answer == text  # the text is then read as a chat agent's answer


def test_hostile_arguments_inside_valid_json_are_checked_not_trusted():
    deep = '{"name": "AddAlarm", "arguments": {"token": ' + "[" * 50_000 + "]" * 50_000 + "}}"
    assert text_tool_call(deep) is None  # a bare object that does not decode is not known to be a call: text
    assert read_answer(f"<tool_call>{deep}</tool_call>", [], SCHEMAS, "both").reason == Reason.PARSE_TOOL_ARGUMENTS
    assert read_answer("", [{"name": "AddAlarm", "arguments": "[" * 50_000 + "]" * 50_000}],
                       SCHEMAS, "server").reason == Reason.PARSE_TOOL_ARGUMENTS


@pytest.mark.parametrize("name, arguments, expected", [
    ("AddAlarm", json.dumps(ALARM), "[AddAlarm(token='a9s8d7f6', time='2023-03-16 07:00:00')]"),
    ("GetToday", "", "[GetToday()]"),  # no arguments at all: an empty object
    ("GetToday", "{}", "[GetToday()]"),
    ("DeleteEverything", "{}", Reason.PARSE_TOOL_UNKNOWN),
    ("AddAlarm", "[1, 2]", Reason.PARSE_TOOL_ARGUMENTS),
    ("AddAlarm", "{not json", Reason.PARSE_TOOL_ARGUMENTS),
    ("AddAlarm", '"a string"', Reason.PARSE_TOOL_ARGUMENTS),
    ("AddAlarm", '{"token": "x", "when": "now"}', Reason.PARSE_TOOL_SCHEMA),
])
def test_a_tool_call_is_usable_only_for_an_offered_tool_with_declared_json_object_arguments(name, arguments, expected):
    tools = {schema["name"]: schema for schema in SCHEMAS}
    assert checked_call(name, arguments, tools) == expected


def test_the_modes_decide_which_call_counts():
    server_call = [{"name": "GetToday", "arguments": "{}"}]
    text = RECORDED["hermes"]
    assert read_answer(text, server_call, SCHEMAS, "server") == read_answer(text, server_call, SCHEMAS, "both")
    assert read_answer(text, server_call, SCHEMAS, "both").answered_by == AnsweredBy.TOOL_CALL
    assert read_answer(text, server_call, SCHEMAS, "both").answer == "[GetToday()]"
    client = read_answer(text, server_call, SCHEMAS, "client")  # the server's parse is not read
    assert (client.answered_by, client.answer) == (AnsweredBy.CLIENT_PARSE, "[AddAlarm(token='a9s8d7f6', "
                                                                          "time='2023-03-16 07:00:00')]")
    assert client.text_call == TextToolCall("hermes", "AddAlarm", json.dumps(ALARM))
    server = read_answer(text, [], SCHEMAS, "server")  # a call left in the text is not read under `server`
    assert (server.answered_by, server.reason, server.answer) == (AnsweredBy.TEXT, Reason.PARSE_TOOL_IN_TEXT, text)
    assert read_answer("", server_call, SCHEMAS, "client").answered_by == AnsweredBy.NONE
    # an unusable server call falls back to the client's reading, then to the text
    bad = [{"name": "AddAlarm", "arguments": "{oops"}]
    assert read_answer(text, bad, SCHEMAS, "both").answered_by == AnsweredBy.CLIENT_PARSE
    fallback = read_answer("[GetToday()]", bad, SCHEMAS, "both")
    assert (fallback.answered_by, fallback.reason, fallback.answer) == (
        AnsweredBy.TEXT_FALLBACK, Reason.PARSE_TOOL_ARGUMENTS, "[GetToday()]")
    with pytest.raises(ValueError):
        read_answer(text, [], SCHEMAS, "sometimes")
