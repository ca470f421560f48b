"""Function tools on the embedded server: a chat handler that offers a request's `tools` in the
prompt and answers with OpenAI `tool_calls` (`python -m apibank_bench.llm.embedded_server` wraps
the model's own chat handler with `with_tools`).

llama-cpp-python's handlers for a chat format (`gemma`) or a file's own template ignore `tools`
unless `tool_choice` names one function; its `chatml-function-calling` handler offers them, but in
ChatML with its own `functions.NAME:` protocol, two completions per answer. Here the model's own
chat template renders the prompt (the inner handler), and the tools are offered in the text of the
first system (or, with none, user) message, as hermes-style `<tool_call>` JSON, the form SmolLM2's
instruct data and Qwen's templates use and the client's parser (agents/tool_text.py) reads too.
One completion answers, under a GBNF grammar built from the tools' JSON schemas (llama-cpp-python's
`SchemaConverter`): a call names an offered tool, and its arguments are an object of that tool's
parameters in their declared JSON types, strings and lists bounded as the chat grammar's are
(llm/grammar.py: a small model would otherwise repeat itself until `max_tokens`).

`tool_choice`: absent or `auto` lets the model answer in text instead (the grammar admits a call, or
text that does not open one: its first token chooses); `required` admits only a call; a named
function only that one; `none`, or no tools, is the inner handler unchanged - so text requests decode
exactly as before. The answer's text is read with `json` only; a call the model did not finish
(`max_tokens`) stays as text in `content`, for the client to judge.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable

from apibank_bench.llm.grammar import MAX_ITEMS, MAX_STRING

OPEN, CLOSE = "<tool_call>", "</tool_call>"
#: A JSON string's character: printable ASCII but the quote and backslash, or the escapes the chat
#: grammar allows (llm/grammar.py; no \u escape, which would let in any character).
CHAR = r'char ::= [ !#-\[\]-~] | "\\" ["\\nt]'
STRING = f'string ::= "\\"" char{{0,{MAX_STRING}}} "\\"" space'

#: How the tools are offered (appended to the system message, or put before the first user message).
OFFER = """You can call these tools (JSON schemas of their arguments):
<tools>
{tools}
</tools>
To call a tool, answer with one call and nothing else:
<tool_call>
{{"name": "<tool name>", "arguments": {{"<parameter>": <value>, ...}}}}
</tool_call>"""


def offer_text(tools: Iterable[dict[str, Any]]) -> str:
    lines = [json.dumps({"name": function.get("name"), "description": function.get("description", ""),
                         "parameters": function.get("parameters") or {}}, ensure_ascii=False)
             for function in (tool.get("function") or {} for tool in tools)]
    return OFFER.format(tools="\n".join(lines))


def bounded(schema: Any) -> Any:
    """A tool's JSON schema as the grammar takes it: no parameter it does not declare, arrays of at most
    MAX_ITEMS items (strings are bounded in `call_grammar`)."""
    if not isinstance(schema, dict):
        return {}
    out = {key: value for key, value in schema.items() if key not in ("description", "title", "default")}
    kind = out.get("type")
    if "properties" in out and isinstance(out["properties"], dict):
        out["properties"] = {name: bounded(value) for name, value in out["properties"].items()}
        out.setdefault("additionalProperties", False)
    if kind == "array":
        out["maxItems"] = min(int(out.get("maxItems", MAX_ITEMS)), MAX_ITEMS)
        if isinstance(out.get("items"), dict):
            out["items"] = bounded(out["items"])
    return out


def call_grammar(tools: list[dict[str, Any]], allow_text: bool) -> str:
    """GBNF for one `<tool_call>` naming one of `tools` with arguments that fit its schema; with
    `allow_text`, also any text whose first character does not open a call."""
    from llama_cpp.llama_grammar import SchemaConverter

    calls = {"oneOf": [{"type": "object", "additionalProperties": False, "required": ["name", "arguments"],
                        "properties": {"name": {"const": tool["function"]["name"]},
                                       "arguments": bounded(tool["function"].get("parameters")
                                                            or {"type": "object", "properties": {}})}}
                       for tool in tools]}
    converter = SchemaConverter(prop_order={"name": 0, "arguments": 1}, allow_fetch=False, dotall=False,
                                raw_pattern=False)
    converter.visit(converter.resolve_refs(calls, "tools"), "call")
    # A string is at most MAX_STRING characters of printable ASCII, as in the chat grammar (no gold value
    # has another character; a small model given any may wander into control characters).
    fixed = {"char": CHAR, "string": STRING}
    rules = [fixed.get(rule.split(" ::= ")[0], rule) for rule in converter.format_grammar().splitlines()]
    block = f'"{OPEN}" "\\n"? call "\\n"? "{CLOSE}"'
    # With text allowed: text without "<" (bracketed calls and prose need none), then a call or nothing.
    root = f"root ::= [^<]* ({block})?" if allow_text else f"root ::= {block}"
    return "\n".join([root, *rules])


def chosen(tools: list[dict[str, Any]], tool_choice: Any) -> tuple[list[dict[str, Any]], bool] | None:
    """The tools a call may name and whether text may answer instead; None: answer as if no tools."""
    usable = [tool for tool in tools if isinstance(tool, dict) and tool.get("type", "function") == "function"
              and isinstance(tool.get("function"), dict) and tool["function"].get("name")]
    if not usable or tool_choice == "none":
        return None
    if isinstance(tool_choice, dict):
        name = (tool_choice.get("function") or {}).get("name")
        named = [tool for tool in usable if tool["function"]["name"] == name]
        if not named:
            raise ValueError(f"tool_choice names {name!r}, which is not among the tools")
        return named, False
    return usable, tool_choice != "required"


def as_text_messages(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation for a template that knows no tools: the offer in the first system message (or
    before the first user message), earlier tool calls as the assistant's `<tool_call>` text, and tool
    results as user turns in `<tool_response>`."""
    offer = offer_text(tools)
    out: list[dict[str, Any]] = []
    for message in messages:
        role, content = message.get("role"), message.get("content")
        text = content if isinstance(content, str) else "" if content is None else json.dumps(content)
        if role == "assistant" and message.get("tool_calls"):
            calls = [f"{OPEN}\n{json.dumps({'name': call['function']['name'], 'arguments': _arguments(call)})}\n{CLOSE}"
                     for call in message["tool_calls"] if isinstance(call, dict) and call.get("function")]
            out.append({"role": "assistant", "content": "\n".join(filter(None, [text, *calls]))})
        elif role in ("tool", "function"):
            out.append({"role": "user", "content": f"<tool_response>\n{text}\n</tool_response>"})
        else:
            out.append({**message, "content": text})
    system = next((m for m in out if m["role"] == "system"), None)
    if system is not None:
        system["content"] = f"{system['content']}\n\n{offer}" if system["content"] else offer
    else:
        user = next((m for m in out if m["role"] == "user"), None)
        if user is None:
            out.insert(0, {"role": "user", "content": offer})
        else:
            user["content"] = f"{offer}\n\n{user['content']}"
    return out


def _arguments(call: dict[str, Any]) -> Any:
    raw = call["function"].get("arguments")
    try:
        return json.loads(raw) if isinstance(raw, str) else raw or {}
    except ValueError:
        return raw


def read_call(text: str) -> tuple[str, dict[str, Any]] | None:
    """The text before the call and the call, `{"name", "arguments"}` (arguments as JSON text), of a
    completion that ends in one whole call; None otherwise."""
    body = text.rstrip()
    start = body.find(OPEN)
    if start < 0 or not body.endswith(CLOSE):
        return None
    try:
        call = json.loads(body[start + len(OPEN):-len(CLOSE)])
    except (ValueError, RecursionError):
        return None
    if not isinstance(call, dict) or not isinstance(call.get("name"), str) or not isinstance(call.get("arguments"), dict):
        return None
    return body[:start].strip(), {"name": call["name"], "arguments": json.dumps(call["arguments"], ensure_ascii=False)}


def with_tools(inner: Callable[..., Any]) -> Callable[..., Any]:
    """`inner` (a llama-cpp-python chat handler) answering requests with tools by tool calls."""

    def handler(*, llama: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                tool_choice: Any = None, functions: list[dict[str, Any]] | None = None,
                function_call: Any = None, stream: bool = False, **kwargs: Any) -> Any:
        offered = tools or [{"type": "function", "function": function} for function in functions or ()]
        choice = tool_choice if tool_choice is not None else function_call
        if isinstance(choice, dict) and "name" in choice and "function" not in choice:  # legacy function_call
            choice = {"type": "function", "function": {"name": choice["name"]}}
        picked = None if stream or kwargs.get("grammar") is not None else chosen(offered, choice)
        if picked is None:  # no tools to offer: the model's own handler, untouched
            return inner(llama=llama, messages=messages, tools=tools, tool_choice=tool_choice, functions=functions,
                         function_call=function_call, stream=stream, **kwargs)
        callable_tools, allow_text = picked
        from llama_cpp.llama_grammar import LlamaGrammar

        grammar = LlamaGrammar.from_string(call_grammar(callable_tools, allow_text), verbose=False)
        kwargs.pop("grammar", None)
        response = inner(llama=llama, messages=as_text_messages(messages, offered), stream=False,
                         grammar=grammar, **kwargs)
        return as_tool_calls(response)

    return handler


def as_tool_calls(response: dict[str, Any]) -> dict[str, Any]:
    """A chat completion whose text ends in one whole call, as an OpenAI tool call (the text before it
    the content, as vLLM's hermes parser gives it)."""
    choice = response["choices"][0]
    read = read_call(choice["message"].get("content") or "")
    if read is None:
        return response
    lead, call = read
    choice["message"] = {"role": "assistant", "content": lead or None,
                         "tool_calls": [{"id": f"call_{response['id']}_0", "type": "function", "function": call}]}
    choice["finish_reason"] = "tool_calls"
    return response
