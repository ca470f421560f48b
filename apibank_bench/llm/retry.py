"""The one retry policy for every path that calls a model (the chat client and the Agents SDK runner).

Bounded attempts (`max_retries` retries after the first try), exponential backoff
with jitter, a server's Retry-After honoured up to the same cap, and only errors
worth another try are retried: timeouts, connection errors, 408, 429 and 5xx.
The retrying itself is tenacity's; the `sleep` is injectable so tests never wait.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, Callable, TypeVar

import openai
import tenacity

T = TypeVar("T")


def is_retryable(exc: BaseException) -> bool:
    """Timeouts, connection errors, 408, 429 and 5xx are worth another try; other errors are not."""
    if isinstance(exc, openai.APIConnectionError):  # APITimeoutError is a subclass
        return True
    if isinstance(exc, openai.APIStatusError):
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
class RetryPolicy:
    """How often and how long to retry a model call. `call(fn)` runs fn under the policy."""

    max_retries: int = 5
    base_delay: float = 1.0  #: the first wait; each further wait doubles it (plus up to base_delay of jitter)
    max_delay: float = 30.0  #: no wait is longer, Retry-After included
    sleep: Callable[[float], None] = time.sleep

    def wait(self, state: tenacity.RetryCallState) -> float:
        exponential = tenacity.wait_exponential(multiplier=self.base_delay, max=self.max_delay)
        backoff = (exponential + tenacity.wait_random(0, self.base_delay))(state)
        return min(self.max_delay, max(backoff, retry_after(state.outcome.exception())))

    def retrying(self) -> tenacity.Retrying:
        """A tenacity controller; the last error is re-raised as is when attempts run out."""
        return tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self.max_retries + 1),
            wait=self.wait,
            retry=tenacity.retry_if_exception(is_retryable),
            sleep=self.sleep,
            reraise=True,
        )

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return self.retrying()(fn, *args, **kwargs)
