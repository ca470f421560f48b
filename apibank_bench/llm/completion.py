"""One chat request's answer (`Completion`): read from a server's chat completion, or from the response
cache's entry for the request, and written back as that entry."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from apibank_bench.core.text import shortened
from apibank_bench.llm.cache import CachedAnswer
from apibank_bench.llm.http import MalformedResponse


@dataclass
class Completion:
    """The outcome of one `ChatClient.complete` call (also attached to a ModelError)."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0  # wall time of the whole call, retries and waits included
    cached: bool = False
    attempts: int = 0  # HTTP requests made (0 for a cache hit)
    base_url: str = ""  # the URL that answered (or failed last)
    error: str | None = None
    finish_reason: str | None = None
    tool_calls: list[dict[str, str]] = field(default_factory=list)  # [{name, arguments (JSON text)}], in order
    stopped: str | None = None  # "run" or "instance": not asked (or retried) because that stopped
    failure: str | None = None  # with `error`: its kind (llm.failure.Failure), named where the request failed

    @classmethod
    def from_cache(cls, entry: CachedAnswer, latency_s: float) -> Completion:
        """The answer a cache entry keeps, as a cache hit that took `latency_s`."""
        return cls(
            text=entry["text"],
            prompt_tokens=entry.get("prompt_tokens", 0),
            completion_tokens=entry.get("completion_tokens", 0),
            latency_s=latency_s,
            cached=True,
            base_url=entry.get("base_url", ""),
            finish_reason=entry.get("finish_reason"),
            tool_calls=entry.get("tool_calls") or [],
        )

    def cache_entry(self, request: dict[str, Any]) -> CachedAnswer:
        """The response cache's entry for this answer to `request` (the body as sent)."""
        return {
            "request": request,
            "text": self.text,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "latency_s": self.latency_s,
            "base_url": self.base_url,
            "finish_reason": self.finish_reason,
            "tool_calls": self.tool_calls,
        }


def token_count(value: Any) -> int:
    """A token count as reported, or 0 when it is missing or not a count."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def as_json(body: Any, chars: int = 200) -> str:
    """A body quoted as JSON in an error (not Python's repr, which an error row would carry as is), cut short."""
    return shortened(json.dumps(body, ensure_ascii=False, default=str), chars)


def read_completion(response: Any, url: str, attempts: int, started: float) -> Completion:
    """The Completion in a chat completion's JSON; MalformedResponse if it is not one."""
    try:
        choice = response["choices"][0]
        message = choice["message"]
        text = message.get("content") or ""
        if not isinstance(text, str):
            raise TypeError(text)
        finish_reason = choice.get("finish_reason")
        tool_calls = [{"name": call["function"]["name"], "arguments": call["function"].get("arguments") or ""}
                      for call in message.get("tool_calls") or () if call.get("function")]
        usage = response.get("usage")
    except (AttributeError, IndexError, TypeError, KeyError):
        raise MalformedResponse(f"not a chat completion: {as_json(response)}") from None
    usage = usage if isinstance(usage, dict) else {}  # usage is optional: a server may leave it out
    return Completion(
        text=text,
        prompt_tokens=token_count(usage.get("prompt_tokens")),
        completion_tokens=token_count(usage.get("completion_tokens")),
        latency_s=time.monotonic() - started,
        attempts=attempts,
        base_url=url,
        finish_reason=finish_reason,
        tool_calls=tool_calls,
    )
