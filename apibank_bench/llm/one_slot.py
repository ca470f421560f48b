"""The order of requests to a server that answers one completion at a time and keeps the previous prompt's KV
cache (the embedded model: llama-cpp-python's server): `OneSlotQueue`, an instance's requests back to back, the
earliest-started instance first, the server held for the instance it serves between two of its requests. A
client with `ModelConfig.one_slot` learns no in-flight limit: its `Limiter` (llm/limit.py) lets one request go
at a time, in this order."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Callable

from apibank_bench.llm.breaker import InstanceStop, next_start

HOLD_S = 2.0  #: a one-slot server waits this long for the next request of the instance it serves (`OneSlotQueue`)


@dataclass(order=True)
class Place:
    """A request waiting for a one-slot server, in the order it is served: its instance's start, then its own."""

    start: int  #: its instance's place in start order (a request outside any instance: its own, as it arrives)
    request: int  #: its own, in arrival order
    instance: InstanceStop | None = field(compare=False)


class OneSlotQueue:
    """The order in which requests go to a server that answers one completion at a time and keeps the previous
    prompt's KV cache (llama-cpp-python's: the embedded model). It re-evaluates a prompt only from the first
    token that differs from the previous one's, and a team's agents send nearly the same prompt (a debate's
    round: one dialogue, the same role prompt; its next round differs only at its end). Interleaved with
    other instances' requests each would pay its whole prompt again; so the server works on one instance
    at a time: the earliest-started instance with a request waiting goes first, and while an instance is
    being served its requests go before any other's; between two of its requests (its client-side work, a
    team's step) the server is held for it, until it finishes (`InstanceStop.finish`) or `HOLD_S` pass
    without one (an instance waiting for another endpoint must not hold this one). The requests themselves
    are unchanged, so are their answers. Not thread-safe: the `Limiter` holds its lock."""

    def __init__(self, clock: Callable[[], float], wake: Callable[[], None]) -> None:
        self._clock, self._wake = clock, wake
        self.waiting: list[Place] = []
        self.serving: InstanceStop | None = None  #: the instance the server works for
        self._idle_since = -math.inf  #: when the last request of `serving` here ended
        self._requests = itertools.count()

    def join(self, instance: InstanceStop | None) -> Place:
        place = Place(instance.order if instance is not None else next_start(), next(self._requests), instance)
        self.waiting.append(place)
        return place

    def _held(self) -> bool:
        """The server waits for the next request of the instance it serves."""
        serving = self.serving
        return (serving is not None and not serving.finished and self._clock() - self._idle_since < HOLD_S
                and not any(place.instance is serving for place in self.waiting))

    def first(self, place: Place) -> bool:
        """Whether `place` is next: the served instance's earliest request, else the earliest of all."""
        if self._held():
            return False
        serving = self.serving
        own = [p for p in self.waiting if p.instance is serving] if serving is not None and not serving.finished else []
        return min(own or self.waiting) is place

    def leave(self, place: Place, served: bool) -> None:
        """`place` goes to the server (`served`) or gives up waiting."""
        self.waiting.remove(place)
        if served and place.instance is not self.serving:
            self.serving = place.instance
            if place.instance is not None:
                place.instance.on_finish(self._wake)  # the next instance need not wait out the hold

    def ended(self, instance: InstanceStop | None) -> None:
        """A request of `instance` ended: the hold for its next one starts."""
        if instance is not None and instance is self.serving:
            self._idle_since = self._clock()

    def wait_s(self) -> float:
        """How long a waiting request sleeps before it looks again (a hold ends with time)."""
        return max(0.01, HOLD_S - (self._clock() - self._idle_since)) if self._held() else 1.0
