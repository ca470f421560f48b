"""Stopping model requests early: the run's circuit breaker and one instance's stop.

A request waiting to retry wakes up and fails at once, and no new attempt is made,
when either says stop:

- the run's `Breaker`, once the endpoint looks down: no request has succeeded for
  `window` seconds while requests kept failing, and no request sent before the failures
  began is still being answered (a slow server working on one is alive). The decision is
  on time, not on a count of failures: with many requests in flight, a burst of failures
  shorter than the window (a server still loading, a load balancer's hiccup) is many
  failures at once and stops nothing, while a dead endpoint stops the run about `window`
  seconds after its death, instead of after every request in flight has waited out all
  its retries;
- the instance's `InstanceStop`, once one of its requests has failed for good: a
  team with a failed member is an error row whatever the others answer, so its
  other requests are not worth waiting for.

HTTP 429 neither counts as a failure nor as a success: a throttling endpoint is alive.
Only attempts that reached the endpoint count: a request's time waiting in the client
for a slot (`limit.py`) is not part of any attempt.
"""

from __future__ import annotations

import functools
import itertools
import math
import threading
import time
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable, Iterator


class Stopped(Exception):
    """A request not made (or no longer retried): `Stopped(message, "run" | "instance")`."""


class Breaker:
    """Decides when the endpoint is down, over every request of a client; `window` seconds (0 = never)."""

    def __init__(self, window: float = 0.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.window = window
        self.reason: str | None = None  #: why the run stopped, once it has
        self._clock = clock
        self._failing_since: float | None = None  #: the first failure since the last success
        self._failures = 0  #: failures since then
        self._last_error = ""
        self._sent: dict[object, float] = {}  #: attempts in flight -> when each was sent
        self._lock = threading.Lock()
        self._listeners: list[Callable[[str], None]] = []

    def sent(self) -> object:
        """An attempt goes to the endpoint now; pass the token to `done` when it ends."""
        token = object()
        with self._lock:
            self._sent[token] = self._clock()
        return token

    def done(self, token: object, error: str | None = None, *, throttled: bool = False) -> None:
        """The attempt ended: a success (`error` None), a failure, or a 429 (`throttled`: neither)."""
        with self._lock:
            self._sent.pop(token, None)
            if throttled:
                return
            if error is None:
                self._failing_since, self._failures = None, 0
                return
            if self._failing_since is None:
                self._failing_since = self._clock()
            self._failures += 1
            self._last_error = error
            notices = self._trip_if_down()
        for notice in notices:
            notice()

    def check(self) -> None:
        """Trip now if the endpoint is down, though no attempt just failed (requests waiting to retry call it:
        with every request in its backoff, the window may pass between two failures)."""
        with self._lock:
            notices = self._trip_if_down()
        for notice in notices:
            notice()

    def _trip_if_down(self) -> list[Callable[[], None]]:
        """(Under the lock.) Trip if failing for the window with no older attempt still out; the listeners' calls
        with the reason, to make outside the lock."""
        if not self.window or self.reason or self._failing_since is None:
            return []
        now = self._clock()
        oldest = min(self._sent.values(), default=math.inf)  # still being answered: the endpoint may be alive
        if now - self._failing_since < self.window or oldest < self._failing_since:
            return []
        self.reason = reason = (
            f"stopped: the endpoint answered no model request for {now - self._failing_since:.0f} s while "
            f"{self._failures} attempts failed (last: {self._last_error}); fix the endpoint and rerun with "
            "--apibank-resume")
        return [functools.partial(listener, reason) for listener in self._listeners]

    def on_trip(self, listener: Callable[[str], None]) -> None:
        """Call `listener(reason)` when the breaker trips (at once if it has)."""
        with self._lock:
            self._listeners.append(listener)
            reason = self.reason
        if reason:
            listener(reason)


#: Instances (and requests made outside one) numbered as they start: a one-slot server's queue order (`limit.py`).
_STARTS = itertools.count()


def next_start() -> int:
    """The next number in start order (`next` on a count is atomic under the GIL)."""
    return next(_STARTS)


class InstanceStop:
    """One instance's stop: set by its first request that fails for good. It also keeps how long the
    instance was held in the client, some request of it waiting for a slot (`limit.py`): its time limit
    does not count that (the server did not have the request). `order` is its place in start order and
    `finished` says that its solver returned: a one-slot server serves an instance's requests back to back,
    the earliest-started first, and moves on when it finishes (`limit.py`)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.cause: str | None = None  #: that request's error
        self.failure: str | None = None  #: its kind (llm.failure.Failure)
        self.order = next_start()
        self.finished = False
        self._on_finish: list[Callable[[], None]] = []
        self._clock = clock
        self._held = 0  #: requests of this instance waiting for a slot now
        self._held_since = 0.0
        self._held_s = 0.0  #: seconds with at least one waiting, before `_held_since`
        self._lock = threading.Lock()

    def fail(self, cause: str, failure: str | None = None) -> None:
        if self.cause is None:
            self.cause, self.failure = cause, failure

    @contextmanager
    def held(self) -> Iterator[None]:
        """A request of this instance waits for a slot in the client meanwhile."""
        with self._lock:
            self._held += 1
            if self._held == 1:
                self._held_since = self._clock()
        try:
            yield
        finally:
            with self._lock:
                self._held -= 1
                if not self._held:
                    self._held_s += self._clock() - self._held_since

    def on_finish(self, listener: Callable[[], None]) -> None:
        """Call `listener()` when the instance finishes (a waiting request of another instance may go then)."""
        with self._lock:
            self._on_finish.append(listener)

    def finish(self) -> None:
        with self._lock:
            self.finished, listeners, self._on_finish = True, self._on_finish, []
        for listener in listeners:
            listener()

    def held_s(self) -> float:
        """Seconds this instance has been held in the client so far."""
        with self._lock:
            return self._held_s + (self._clock() - self._held_since if self._held else 0.0)


_INSTANCE: ContextVar[InstanceStop | None] = ContextVar("apibank_instance_stop", default=None)


@contextmanager
def instance_scope(stop: InstanceStop | None = None) -> Iterator[InstanceStop]:
    """Requests made inside (in this thread, and in threads that copy its context, as LangGraph's
    do) belong to one instance (`stop`, or a new one)."""
    stop = stop if stop is not None else InstanceStop()
    token = _INSTANCE.set(stop)
    try:
        yield stop
    finally:
        _INSTANCE.reset(token)
        stop.finish()


def current_instance() -> InstanceStop | None:
    return _INSTANCE.get()
