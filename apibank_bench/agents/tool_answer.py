"""Which path answered a function-calling agent (`AnsweredBy`), and its answer as the bracketed call.

An `sdk` agent's answer is its first usable tool call. Where that call comes from is the setting
`--tool-parse` (`TOOL_PARSE_MODES`):

* `server`: only the server's `tool_calls` count;
* `client`: only the client's reading of the text (agents.tool_text) counts, whatever the server parsed;
* `both` (the default): the server's `tool_calls` first, then the client's reading of the text.

A tool call is usable when it names a tool the agent was given, or another API of the task's level
(the reference reads a text answer naming any API), and its arguments are a JSON object of the
parameters that API declares (upstream's `input_parameters`). When none is, the text is read as a chat agent's answer
(its last bracketed call); if that holds no call either, the row's reason is the tool call's
(`parse:tool_arguments`, `parse:tool_unknown`, `parse:tool_schema`, or `parse:tool_in_text` for a
call left in the text under `server`), not a bare `parse:no_call`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from apibank_bench.agents.tool_text import TextToolCall, loads, text_tool_call
from apibank_bench.data.tasks import render_call
from apibank_bench.scoring.stage import Reason
from apibank_bench.scoring.answered_by import AnsweredBy

TOOL_PARSE_MODES = ("server", "client", "both")


@dataclass(frozen=True)
class ToolAnswer:
    answered_by: AnsweredBy
    answer: str  #: the bracketed call of the usable tool call, else the text
    reason: Reason | None = None  #: why a tool call offered was not read (the reason when the text holds no call)
    text_call: TextToolCall | None = None  #: the tool call the client found in the text, if any


def checked_call(name: str, arguments: str | None, tools: Mapping[str, Mapping[str, Any]]) -> str | Reason:
    """A tool call as the bracketed call, or the reason it cannot be an answer."""
    if name not in tools:
        return Reason.PARSE_TOOL_UNKNOWN
    try:
        values = loads(arguments or "{}")
    except ValueError:
        return Reason.PARSE_TOOL_ARGUMENTS
    if not isinstance(values, dict):
        return Reason.PARSE_TOOL_ARGUMENTS
    declared = tools[name].get("input_parameters")
    if set(values) - set(declared if isinstance(declared, dict) else {}):
        return Reason.PARSE_TOOL_SCHEMA
    try:
        return render_call(name, values)
    except RecursionError:  # a value nested deeper than repr goes
        return Reason.PARSE_TOOL_ARGUMENTS


def read_answer(text: str | None, tool_calls: Iterable[Mapping[str, Any]], schemas: Iterable[Mapping[str, Any]],
                mode: str = "both", apis: Mapping[str, Mapping[str, Any]] | None = None) -> ToolAnswer:
    """What an sdk agent answered: its first usable tool call under `mode`, else its text (see the module).

    `schemas`: the tools the agent was given; `apis`: the other APIs of the task's level by name (their specs), whose
    calls are read too, as the reference reads a text answer naming any API (the gold API is not always among
    the tools: a Level-2 dialogue may call it without a ToolSearcher result naming it)."""
    if mode not in TOOL_PARSE_MODES:
        raise ValueError(f"tool parse mode {mode!r} is not one of {TOOL_PARSE_MODES}")
    text = text or ""
    tools = {**(apis or {}), **{str(schema["name"]): schema for schema in schemas}}
    calls = list(tool_calls)
    failure: Reason | None = None
    if mode != "client" and calls:
        first = calls[0]
        checked = checked_call(str(first.get("name")), first.get("arguments"), tools)
        if not isinstance(checked, Reason):
            return ToolAnswer(AnsweredBy.TOOL_CALL, checked)
        failure = checked
    found = text_tool_call(text)
    if found is not None and mode != "server":
        checked = Reason.PARSE_TOOL_ARGUMENTS if found.malformed else checked_call(found.name, found.arguments, tools)
        if not isinstance(checked, Reason):
            return ToolAnswer(AnsweredBy.CLIENT_PARSE, checked, text_call=found)
        failure = failure or checked
    elif found is not None:
        failure = failure or Reason.PARSE_TOOL_IN_TEXT
    if failure is not None and failure != Reason.PARSE_TOOL_IN_TEXT:
        return ToolAnswer(AnsweredBy.TEXT_FALLBACK, text, failure, found)
    return ToolAnswer(AnsweredBy.TEXT if text.strip() else AnsweredBy.NONE, text, failure, found)
