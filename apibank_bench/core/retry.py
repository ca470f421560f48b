"""The one retry policy (tenacity's) for everything that asks a server: model calls and data downloads.

Bounded attempts (`max_retries` retries after the first try), exponential backoff with
jitter, a server's hint (Retry-After) honoured up to the same cap, and only errors the
caller's `retryable` accepts are tried again. The `sleep` is injectable so tests never wait.
Each layer supplies what its errors look like (llm/retry.py: the chat endpoint's; data/lock.py: urllib's).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

import tenacity

from apibank_bench.core.settings import BY_NAME

T = TypeVar("T")


def _never(exc: BaseException) -> bool:
    return False


def _no_hint(exc: BaseException | None) -> float:
    return 0.0


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry. `call(fn)` runs fn under the policy."""

    max_retries: int = BY_NAME["max_retries"].default
    base_delay: float = 1.0  #: the first wait; each further wait doubles it (plus up to base_delay of jitter)
    max_delay: float = 30.0  #: no wait is longer, a server's hint included
    sleep: Callable[[float], None] = time.sleep
    retryable: Callable[[BaseException], bool] = _never  #: which errors are worth another try
    hinted_wait: Callable[[BaseException | None], float] = _no_hint  #: the wait a failed answer asks for (seconds)

    def wait(self, state: tenacity.RetryCallState) -> float:
        exponential = tenacity.wait_exponential(multiplier=self.base_delay, max=self.max_delay)
        backoff = (exponential + tenacity.wait_random(0, self.base_delay))(state)
        failed = state.outcome.exception() if state.outcome is not None else None  # set once an attempt ended
        return min(self.max_delay, max(backoff, self.hinted_wait(failed)))

    def retrying(self) -> tenacity.Retrying:
        """A tenacity controller; the last error is re-raised as is when attempts run out."""
        return tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self.max_retries + 1),
            wait=self.wait,
            retry=tenacity.retry_if_exception(self.retryable),
            sleep=self.sleep,
            reraise=True,
        )

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return self.retrying()(fn, *args, **kwargs)
