"""The cap on model requests in flight, which backs off when the endpoint says it is overloaded.

A semaphore whose size moves: HTTP 429 halves it (never below 1), and every
`size` successes in a row grow it back by one, up to the configured ceiling
(additive increase, multiplicative decrease, as TCP does). A rate-limited API
thus settles near the rate it accepts, and a local server keeps the whole cap.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator


class AdaptiveLimit:
    def __init__(self, ceiling: int) -> None:
        if ceiling < 1:
            raise ValueError("the in-flight cap must be >= 1")
        self.ceiling = ceiling
        self.size = ceiling  #: requests allowed in flight now
        self.active = 0  #: requests in flight now
        self.peak = 0  #: the most ever in flight at once
        self._successes = 0
        self._cond = threading.Condition()

    @contextmanager
    def slot(self) -> Iterator[None]:
        with self._cond:
            while self.active >= self.size:
                self._cond.wait()
            self.active += 1
            self.peak = max(self.peak, self.active)
        try:
            yield
        finally:
            with self._cond:
                self.active -= 1
                self._cond.notify()

    def throttled(self) -> None:
        """The endpoint answered 429: halve the cap."""
        with self._cond:
            self.size = max(1, self.size // 2)
            self._successes = 0

    def succeeded(self) -> None:
        """A request succeeded: after `size` in a row, allow one more in flight."""
        with self._cond:
            if self.size >= self.ceiling:
                return
            self._successes += 1
            if self._successes >= self.size:
                self.size += 1
                self._successes = 0
                self._cond.notify()
