"""The dialogue as chat messages, its API calls as tool calls (`--history tools`).

The reference harness, in every runner (its OpenAI Agents SDK ones included), shows the dialogue so
far as text in the one user message: `USER: ...`, `ASSISTANT: ...`, `API_RESULT: {json}` lines
(agents.prompts.format_history). That stays the default (`--history text`). Function-calling models
were trained on another form, which `--history tools` sends to `sdk` agents:

    system     the role prompt
    user       the task: descriptions, guidance, and a line saying the dialogue follows
    user / assistant     each `User` / `AI` turn of the dialogue
    assistant  tool_calls: [{id: call_K, function: {name, arguments: the call's input as JSON}}]
    tool       tool_call_id: call_K, content: {"output": ..., "exception": ...} as JSON
    ...
    user       teammates' context, if any, and the answer's form

The shown output is the text form's (ToolSearcher's without its search text), so the two forms
carry the same facts.
"""

from __future__ import annotations

import json
from typing import Any

from apibank_bench.agents.prompts import api_result, task_prompt_around_dialogue
from apibank_bench.data.tasks import Task


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def dialogue_messages(task: Task) -> list[dict[str, Any]]:
    """The dialogue so far as chat messages, each API call an assistant tool call answered by a tool message."""
    messages: list[dict[str, Any]] = []
    for row in task.history:
        if row["role"] == "User":
            messages.append({"role": "user", "content": str(row.get("text", ""))})
        elif row["role"] == "AI":
            messages.append({"role": "assistant", "content": str(row.get("text", ""))})
        else:
            shown = api_result(row)
            call_id = f"call_{sum(1 for m in messages if m.get('tool_calls'))}"
            arguments = shown["input"] if isinstance(shown["input"], dict) else {}
            messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": call_id, "type": "function",
                 "function": {"name": str(shown["api_name"]), "arguments": _json(arguments)}}]})
            messages.append({"role": "tool", "tool_call_id": call_id,
                             "content": _json({"output": shown["output"], "exception": shown["exception"]})})
    return messages


def tool_history_messages(task: Task, system: str, context: str = "") -> list[dict[str, Any]]:
    """Every message an agent is sent under `--history tools` (see the module)."""
    before, after = task_prompt_around_dialogue(task, context)
    return [{"role": "system", "content": system}, {"role": "user", "content": before},
            *dialogue_messages(task), {"role": "user", "content": after}]


def sdk_input(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat messages (after the system message, the SDK agent's instructions) as the Agents SDK's input items,
    which its chat-completions model turns back into the same messages."""
    items: list[dict[str, Any]] = []
    for message in messages[1:]:
        if message.get("tool_calls"):
            items += [{"type": "function_call", "call_id": call["id"], "name": call["function"]["name"],
                       "arguments": call["function"]["arguments"]} for call in message["tool_calls"]]
        elif message["role"] == "tool":
            items.append({"type": "function_call_output", "call_id": message["tool_call_id"],
                          "output": message["content"]})
        else:
            items.append({"role": message["role"], "content": message["content"]})
    return items
