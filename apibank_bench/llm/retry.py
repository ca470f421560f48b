"""The retry policy of every path that calls a model (the chat client and the Agents SDK runner).

It is the suite's one policy (`core.retry`, tenacity's retrying) with the model's errors:
timeouts, connection errors, 408, 429, 5xx and a 2xx that is not a chat completion (an empty `choices` from a
proxy or a content filter) are retried, and a server's Retry-After is honoured.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Callable

from apibank_bench.core import retry as core_retry
from apibank_bench.llm.http import APIConnectionError, APIStatusError, MalformedResponse


def is_retryable(exc: BaseException) -> bool:
    """Timeouts, connection errors, 408, 429, 5xx and a 200 that is not a completion are worth another try;
    other errors are not."""
    if isinstance(exc, (APIConnectionError, MalformedResponse)):  # APITimeoutError is a subclass of the first
        return True
    if isinstance(exc, APIStatusError):
        return exc.status_code in (408, 429) or exc.status_code >= 500
    return False


def retry_after(exc: BaseException | None) -> float:
    """The server's Retry-After in seconds (a number or an HTTP date); 0 if absent or unreadable."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    value = headers.get("retry-after") if headers is not None else None
    if not value:
        return 0.0
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, OverflowError):
        return 0.0


@dataclass(frozen=True)
class RetryPolicy(core_retry.RetryPolicy):
    """The suite's retry policy with the chat endpoint's errors (http.py). `call(fn)` runs fn under the policy."""

    retryable: Callable[[BaseException], bool] = is_retryable
    hinted_wait: Callable[[BaseException | None], float] = retry_after
