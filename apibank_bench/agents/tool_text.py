"""Tool calls a model wrote as text, read on the client (`--tool-parse client|both`).

A server's tool parser (vLLM's hermes, llama3_json, mistral ...) turns a model's raw tool-call text
into `tool_calls`; when it fails, or the server has none, the call stays in `content`. These
parsers read the common raw formats, so a score need not hang on the server's parser:

* hermes / Qwen: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` (anywhere in the text);
* Mistral: `[TOOL_CALLS] [{"name": ..., "arguments": {...}}]`, or the newer `[TOOL_CALLS]name[ARGS]{...}`;
* Llama 3 JSON: the text is `{"name": ..., "parameters": {...}}` (after an optional `<|python_tag|>`);
* a bare JSON object `{"name": ..., "arguments": {...}}`, as the whole text or a fenced ```json block.

The text is hostile: it is only read with `json` (never evaluated), NaN and Infinity are refused,
a nesting too deep for the decoder is a malformed call, and each format is looked for once, so
reading is linear in the text's length. Only the first call counts (as the first of `tool_calls`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

HERMES_OPEN, HERMES_CLOSE = "<tool_call>", "</tool_call>"
MISTRAL_TAG, MISTRAL_ARGS = "[TOOL_CALLS]", "[ARGS]"
PYTHON_TAG = "<|python_tag|>"
_FENCE = "```"


@dataclass(frozen=True)
class TextToolCall:
    """A tool call found in the text: its format, name and arguments (JSON text, as a server's `tool_calls`
    carry them). `malformed`: the format's marker is there but what follows is not a call (bad JSON, no name)."""

    format: str  #: hermes, mistral, llama3_json or json
    name: str = ""
    arguments: str = ""
    malformed: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"format": self.format, "name": self.name, "arguments": self.arguments, "malformed": self.malformed}


class _NotJson(ValueError):
    pass


def _refuse(constant: str) -> Any:
    raise _NotJson(f"{constant} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_refuse)


def loads(text: str) -> Any:
    """`text` as JSON, or ValueError: NaN/Infinity refused, a nesting deeper than the decoder takes included."""
    try:
        return _DECODER.decode(text)
    except RecursionError:
        raise _NotJson("nested too deeply") from None


def _decode_prefix(text: str) -> Any:
    """The JSON value `text` starts with (after blanks); ValueError if there is none."""
    stripped = text.lstrip()
    try:
        return _DECODER.raw_decode(stripped)[0]
    except RecursionError:
        raise _NotJson("nested too deeply") from None


def _call(format: str, value: Any, argument_keys: tuple[str, ...] = ("arguments", "parameters")) -> TextToolCall:
    """A decoded `{name, arguments}` object as a call of `format` (malformed if it is not one)."""
    if isinstance(value, list) and value:
        value = value[0]
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return TextToolCall(format, malformed=True)
    key = next((key for key in argument_keys if key in value), None)
    arguments = {} if key is None else value[key]
    if isinstance(arguments, str):  # some models write the arguments as a JSON string, as `tool_calls` carry them
        return TextToolCall(format, value["name"], arguments)
    return TextToolCall(format, value["name"], json.dumps(arguments, ensure_ascii=False))


def _malformed_unless_json(format: str, read: Callable[[], TextToolCall]) -> TextToolCall:
    """`read()`, the call of `format` its text holds, or a malformed call where that text is not JSON."""
    try:
        return read()
    except ValueError:
        return TextToolCall(format, malformed=True)


def _hermes(text: str) -> TextToolCall | None:
    start = text.find(HERMES_OPEN)
    if start < 0:
        return None
    body_start = start + len(HERMES_OPEN)
    end = text.find(HERMES_CLOSE, body_start)
    body = text[body_start:] if end < 0 else text[body_start:end]  # an unclosed block runs to the end (as vLLM's)
    return _malformed_unless_json("hermes", lambda: _call("hermes", loads(body.strip())))


def _mistral(text: str) -> TextToolCall | None:
    start = text.find(MISTRAL_TAG)
    if start < 0:
        return None
    return _malformed_unless_json("mistral", lambda: _mistral_call(text[start + len(MISTRAL_TAG):].lstrip()))


def _mistral_call(rest: str) -> TextToolCall:
    """The call after `[TOOL_CALLS]`: a JSON list or object, or `name[ARGS]{...}`."""
    if rest[:1] in ("[", "{"):  # [TOOL_CALLS] [{"name": ..., "arguments": ...}]
        return _call("mistral", _decode_prefix(rest))
    name, marker, arguments = rest.partition(MISTRAL_ARGS)  # [TOOL_CALLS]name[ARGS]{...}
    if not marker or not name.strip():
        return TextToolCall("mistral", malformed=True)
    return _call("mistral", {"name": name.strip(), "arguments": _decode_prefix(arguments)})


def _fenced(text: str) -> str | None:
    """The body of the text's first ```json (or bare ```) block, when it opens with `{`."""
    start = text.find(_FENCE)
    if start < 0:
        return None
    body_start = text.find("\n", start)
    end = text.find(_FENCE, body_start + 1) if body_start >= 0 else -1
    if end < 0 or text[start + len(_FENCE):body_start].strip() not in ("", "json"):
        return None
    body = text[body_start + 1:end].strip()
    return body if body.startswith("{") else None


def _json_object(text: str) -> TextToolCall | None:
    """Llama 3's JSON call or a bare `{name, arguments}` object: the whole text, or a fenced block."""
    stripped = text.strip()
    if stripped.startswith(PYTHON_TAG):
        stripped = stripped[len(PYTHON_TAG):].lstrip()
    body = stripped if stripped.startswith("{") else _fenced(stripped)
    if body is None:
        return None
    try:
        value = _decode_prefix(body)
    except ValueError:
        return None  # prose that happens to start with a brace: not a call
    if not isinstance(value, dict) or "name" not in value or not ({"arguments", "parameters"} & value.keys()):
        return None  # a JSON answer of another shape is text, not a call
    return _call("llama3_json" if "parameters" in value else "json", value)


def _without_thinking(text: str) -> str:
    """The text after a leading `<think>...</think>` block (a reasoning model's), which may quote calls."""
    stripped = text.lstrip()
    if stripped.startswith("<think>"):
        end = stripped.find("</think>")
        return stripped[end + len("</think>"):] if end >= 0 else ""
    return text


def text_tool_call(text: str | None) -> TextToolCall | None:
    """The first tool call written in `text`, in the first format whose marker it holds; None: no tool call."""
    if not text:
        return None
    text = _without_thinking(text)
    for parse in (_hermes, _mistral, _json_object):
        found = parse(text)
        if found is not None:
            return found
    return None
