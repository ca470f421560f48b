"""The OpenAI Agents SDK runner: one SDK agent with the task's visible APIs as function tools.

The first tool call the agent makes is its prediction, rendered as the bracketed
call, and the run stops there (`stop_on_first_tool`). An agent that answers in
text instead is read like any other answer (its last bracketed call counts).
The SDK reaches only the run's base URL(s), through an AsyncOpenAI client made
per instance; tracing is off. Requests bypass the response cache.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Callable

from ..config import RunConfig
from ..llm import ChatClient, Completion
from ..llm.client import NO_KEY, describe_error
from ..tasks import Task, render_call
from .pieces import AgentTurn, canonical_call, solution_from
from .prompts import role_prompt, task_prompt, visible_schemas
from .solution import Solution

#: API-Bank parameter types as JSON-schema types; anything else is a string.
JSON_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean",
              "list": "array", "list(str)": "array"}

TOOL_NOTE = "Make the call by calling its tool; if you cannot, answer with the bracketed call instead."


def parameters_schema(input_parameters: Any) -> dict[str, Any]:
    """The JSON schema of a tool's arguments, from an API's `input_parameters` metadata."""
    properties = {}
    for name, info in (input_parameters if isinstance(input_parameters, dict) else {}).items():
        info = info if isinstance(info, dict) else {}
        kind = str(info.get("type", "")).strip()
        prop: dict[str, Any] = {"type": JSON_TYPES.get(kind, "string")}
        if kind == "list(str)":
            prop["items"] = {"type": "string"}
        if info.get("description"):
            prop["description"] = str(info["description"])
        properties[str(name)] = prop
    return {"type": "object", "properties": properties}


def predicted_call(name: str, arguments: str) -> str | None:
    """A tool call as the bracketed call; None if its arguments are not a JSON object."""
    try:
        values = json.loads(arguments or "{}")
    except ValueError:
        return None
    return render_call(name, values) if isinstance(values, dict) else None


def build_agents_sdk(cfg: RunConfig, model: ChatClient) -> Callable[[Task], Solution]:
    from agents import Agent, FunctionTool, ModelSettings, OpenAIChatCompletionsModel, RunHooks, Runner
    from agents import RunConfig as SdkRunConfig
    from agents import set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    config = model.config
    settings = ModelSettings(temperature=config.temperature, top_p=config.top_p, max_tokens=config.max_tokens,
                             extra_args={"seed": config.seed}, extra_body=config.extra_body or None, store=False)

    class Recorder(RunHooks):
        """Sees every model response: usage, tool calls (even ones the SDK then rejects) and text."""

        def __init__(self) -> None:
            self.tool_calls: list[dict[str, str]] = []
            self.text, self.prompt_tokens, self.completion_tokens, self.responses = "", 0, 0, 0

        async def on_llm_end(self, context, agent, response) -> None:
            self.responses += 1
            self.prompt_tokens += response.usage.input_tokens
            self.completion_tokens += response.usage.output_tokens
            for item in response.output:
                if getattr(item, "type", None) == "function_call":
                    self.tool_calls.append({"name": item.name, "arguments": item.arguments})
                elif getattr(item, "type", None) == "message":
                    self.text += "".join(getattr(part, "text", "") or "" for part in item.content)

    def tool(schema: dict[str, Any]) -> FunctionTool:
        async def invoke(context, arguments: str) -> str:
            return predicted_call(schema["name"], arguments) or ""

        return FunctionTool(name=schema["name"], description=str(schema.get("description", "")),
                            params_json_schema=parameters_schema(schema.get("input_parameters")),
                            on_invoke_tool=invoke, strict_json_schema=False)

    async def run(task: Task, instructions: str, user: str, url: str, recorder: Recorder) -> None:
        # Retries are the chat client's policy (model.retry, around each attempt in `solve`), not openai's.
        client = AsyncOpenAI(base_url=url, api_key=config.api_key or NO_KEY, timeout=config.timeout,
                             max_retries=0)
        try:
            agent = Agent(name="solver", instructions=instructions, tools=[tool(s) for s in visible_schemas(task)],
                          model=OpenAIChatCompletionsModel(model=config.model, openai_client=client),
                          model_settings=settings, tool_use_behavior="stop_on_first_tool")
            await Runner.run(agent, user, max_turns=1, hooks=recorder,
                             run_config=SdkRunConfig(tracing_disabled=True))
        finally:
            await client.close()

    def solve(task: Task) -> Solution:
        instructions = role_prompt("single", "solver", cfg.prompts_dir) + "\n" + TOOL_NOTE
        messages = [{"role": "system", "content": instructions}, {"role": "user", "content": task_prompt(task)}]
        turn, recorder, url = AgentTurn(role="solver", messages=messages), Recorder(), model.next_url()
        started = time.monotonic()

        def attempt() -> None:
            with model.limiter:  # the slot is held while asking, not while waiting to retry
                asyncio.run(run(task, instructions, messages[1]["content"], url, recorder))

        try:
            model.retry.call(attempt)
        except Exception as exc:  # noqa: BLE001 - recorded for this instance (a tool call already seen stands)
            turn.error = describe_error(exc, [config.api_key])
        first = recorder.tool_calls[0] if recorder.tool_calls else None
        turn.answer = (predicted_call(first["name"], first["arguments"]) or "") if first else recorder.text
        if first and not turn.answer:
            turn.error = turn.error or f"tool call arguments are not a JSON object: {first['arguments'][:200]!r}"
        turn.call = canonical_call(turn.answer)
        turn.prompt_tokens, turn.completion_tokens = recorder.prompt_tokens, recorder.completion_tokens
        turn.latency_s = time.monotonic() - started
        model.stats.add(Completion(text=turn.answer, prompt_tokens=turn.prompt_tokens,
                                   completion_tokens=turn.completion_tokens, latency_s=turn.latency_s,
                                   attempts=max(recorder.responses, 1), base_url=url, error=turn.error))
        return solution_from([turn], turn, {"topology": "agents_sdk", "base_url": url,
                                            "tool_calls": recorder.tool_calls})

    return solve
