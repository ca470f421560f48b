"""The path an agent's answer came through, recorded on every agent turn and row (issue 40): a value of the
scoring layer, beside the stage and the reason, so that the results files and the commands that only read
them (`score`, `compare`, the report) need not load the agents layer that produces it."""

from __future__ import annotations

from enum import StrEnum


class AnsweredBy(StrEnum):
    """The path an agent's answer came through (written as its plain name, like a reason code)."""

    TOOL_CALL = "tool_call"  #: the server's `tool_calls`
    CLIENT_PARSE = "client_parse"  #: a tool call the client read in the text (`--tool-parse client|both`)
    TEXT = "text"  #: the text's bracketed call (a chat agent; an sdk agent that offered no tool call)
    TEXT_FALLBACK = "text_fallback"  #: a tool call was offered but unusable, and the text was read
    NONE = "none"  #: nothing to read: an empty answer, or a model error

    @property
    def is_tool_call(self) -> bool:
        return self in (AnsweredBy.TOOL_CALL, AnsweredBy.CLIENT_PARSE)
