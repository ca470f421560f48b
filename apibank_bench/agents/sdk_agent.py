"""`sdk` agents: each turn is an OpenAI Agents SDK agent with the task's visible APIs as function tools.

The agent's first usable tool call is its answer, rendered as the bracketed call, and the
run stops there (`stop_on_first_tool`, one model request). Where the call is read (the
server's `tool_calls`, the client's reading of the text, or both: `--tool-parse`), what makes it
usable, and the path each answer came through (`answered_by`) are agents.tool_answer's. An agent
that answers in text, or whose tool call is unusable, is read like a chat agent (its last
bracketed call counts).

The SDK's chat-completions model gets `ClientBridge` as its OpenAI client: the SDK
builds the request (messages, tools) and reads the response, while the request
itself goes through the run's ChatClient, so SDK agents share the chat agents'
sampling settings, seeds, retries, in-flight cap, response cache and usage stats.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

from apibank_bench.llm import ChatClient, Completion, ModelError
from apibank_bench.data import specs
from apibank_bench.data.tasks import Task, render_call
from apibank_bench.agents.chat_agent import Agents, AgentTurn
from apibank_bench.agents.prompts import visible_schemas
from apibank_bench.agents.tool_answer import read_answer
from apibank_bench.agents.tool_history import sdk_input, tool_history_messages
from apibank_bench.agents.tool_text import loads

if TYPE_CHECKING:
    from openai import AsyncOpenAI

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
        values = loads(arguments or "{}")
    except ValueError:
        return None
    return render_call(name, values) if isinstance(values, dict) else None


class ClientBridge:
    """The part of AsyncOpenAI the SDK's chat-completions model uses, answered by our ChatClient.

    The SDK's own sampling arguments are ignored: the run's model settings and the
    agent's seed apply, as for chat agents.
    """

    def __init__(self, model: ChatClient, seed: int) -> None:
        self.model, self.seed = model, seed
        self.base_url = model.config.base_urls[0] if model.config.base_urls else ""
        self.completion: Completion | None = None
        self.error: ModelError | None = None
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))

    async def create(self, *, messages: list[dict[str, Any]], tools: Any = None, **_sdk_arguments: Any):
        from openai.types.chat import ChatCompletion

        tools = tools if isinstance(tools, list) else None  # the SDK sends `omit` when there are none
        try:
            self.completion = self.model.complete(messages, seed=self.seed, tools=tools)
        except ModelError as exc:
            self.completion, self.error = exc.completion, exc
            raise
        done = self.completion
        calls = [{"id": f"call_{i}", "type": "function", "function": call} for i, call in enumerate(done.tool_calls)]
        message: dict[str, Any] = {"role": "assistant", "content": done.text or None}
        if calls:
            message["tool_calls"] = calls
        return ChatCompletion.model_validate({
            "id": "apibank-bench", "object": "chat.completion", "created": 0, "model": self.model.config.model or "",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": {"prompt_tokens": done.prompt_tokens, "completion_tokens": done.completion_tokens,
                      "total_tokens": done.prompt_tokens + done.completion_tokens},
        })


def function_tool(schema: dict[str, Any]):
    """An API as an SDK function tool; calling it only renders the call (nothing runs)."""
    from agents import FunctionTool

    async def invoke(context, arguments: str) -> str:
        return predicted_call(schema["name"], arguments) or ""

    return FunctionTool(name=schema["name"], description=str(schema.get("description", "")),
                        params_json_schema=parameters_schema(schema.get("input_parameters")),
                        on_invoke_tool=invoke, strict_json_schema=False)


class SdkAgents(Agents):
    """Agents of kind `sdk`: the same `ask` as chat agents, answered by an Agents SDK run."""

    def ask(self, task: Task, role: str, context: str = "", *, index: int = 0, round: int = 0) -> AgentTurn:
        from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
        from agents import RunConfig as SdkRunConfig

        set_tracing_disabled(True)
        messages: list[dict[str, Any]] = self.messages(task, role, context)
        messages[0]["content"] += "\n" + TOOL_NOTE
        run_input: str | list[Any] = messages[1]["content"]
        if self.history == "tools":  # the dialogue as messages, its API calls as tool calls (agents.tool_history)
            messages = tool_history_messages(task, messages[0]["content"], context)
            run_input = sdk_input(messages)
        client = self.client(role, index)
        turn = AgentTurn(role=role, messages=messages, round=round, index=index, model=client.config.model)
        bridge = ClientBridge(client, self.seed(index, round))
        schemas = visible_schemas(task)
        agent = Agent(name=role, instructions=messages[0]["content"],
                      tools=[function_tool(schema) for schema in schemas],
                      model=OpenAIChatCompletionsModel(model=client.config.model or "",
                                                       # the bridge is the part of the client the model uses
                                                       openai_client=cast("AsyncOpenAI", bridge)),
                      tool_use_behavior="stop_on_first_tool")
        try:
            asyncio.run(Runner.run(agent, cast(Any, run_input), max_turns=1,
                                   run_config=SdkRunConfig(tracing_disabled=True)))
        except Exception as exc:  # noqa: BLE001 - recorded on the turn, as a chat agent's model error
            if bridge.completion is None or bridge.error is not None:
                turn.error = str(bridge.error or f"{type(exc).__name__}: {exc}")
                turn.failure = bridge.error.failure if bridge.error is not None else None  # None: the SDK's own
            # else the SDK refused an answer the model did give (e.g. an unknown tool): that answer stands
        completion = bridge.completion or Completion(text="")
        turn.tool_calls = list(completion.tool_calls)
        read = read_answer(completion.text, completion.tool_calls, schemas, self.tool_parse,
                           specs.specs(specs.api_set_for_level(task.level)))
        turn.answered_by, turn.tool_reason = read.answered_by, read.reason
        turn.text_tool_call = None if read.text_call is None else read.text_call.to_dict()
        return self.answered(turn, completion, read.answer)
