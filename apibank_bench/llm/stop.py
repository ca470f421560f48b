"""Stopping model requests early: the run's circuit breaker and one instance's stop.

A request waiting to retry wakes up and fails at once, and no new attempt is made,
when either says stop:

- the run's `Breaker`, once the endpoint has failed `limit` attempts in a row with
  no success between them (a dead endpoint then stops the run in seconds, instead of
  after every request in flight has waited out all its retries);
- the instance's `InstanceStop`, once one of its requests has failed for good: a
  team with a failed member is an error row whatever the others answer, so its
  other requests are not worth waiting for.

HTTP 429 neither counts nor resets the streak: a throttling endpoint is alive.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable, Iterator


class Stopped(Exception):
    """A request not made (or no longer retried): `Stopped(message, "run" | "instance")`."""


class Breaker:
    """Counts failed attempts in a row across every request of a client; trips at `limit` (0 = never)."""

    def __init__(self, limit: int = 0) -> None:
        self.limit = limit
        self.reason: str | None = None  #: why the run stopped, once it has
        self._streak = 0
        self._lock = threading.Lock()
        self._listeners: list[Callable[[str], None]] = []

    def succeeded(self) -> None:
        with self._lock:
            self._streak = 0

    def failed(self, error: str) -> None:
        with self._lock:
            self._streak += 1
            if not self.limit or self._streak < self.limit or self.reason:
                return
            self.reason = (f"stopped after {self._streak} model requests in a row failed at the endpoint "
                           f"(last: {error}); fix the endpoint and rerun with --apibank-resume")
            listeners = list(self._listeners)
        for listener in listeners:
            listener(self.reason)

    def on_trip(self, listener: Callable[[str], None]) -> None:
        """Call `listener(reason)` when the breaker trips (at once if it has)."""
        with self._lock:
            self._listeners.append(listener)
            reason = self.reason
        if reason:
            listener(reason)


class InstanceStop:
    """One instance's stop: set by its first request that fails for good."""

    def __init__(self) -> None:
        self.cause: str | None = None  #: that request's error

    def fail(self, cause: str) -> None:
        if self.cause is None:
            self.cause = cause


_INSTANCE: ContextVar[InstanceStop | None] = ContextVar("apibank_instance_stop", default=None)


@contextmanager
def instance_scope() -> Iterator[InstanceStop]:
    """Requests made inside (in this thread, and in threads that copy its context, as LangGraph's
    do) belong to one instance."""
    stop = InstanceStop()
    token = _INSTANCE.set(stop)
    try:
        yield stop
    finally:
        _INSTANCE.reset(token)


def current_instance() -> InstanceStop | None:
    return _INSTANCE.get()
