"""The in-flight limit learned per endpoint (llm/limit.py), on simulated servers with a simulated clock:
a server that serves K completions at a time and queues the rest, a wide one, one that gets slower,
bursts of congestion, and processes sharing one server. No wall clock: time is the simulation's."""

from __future__ import annotations

import heapq
import itertools
import threading

import pytest

from apibank_bench.llm.limit import INITIAL, MAX_WAIT, TOLERANCE, EndpointLimit, Limiter, Ticket


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Simulation:
    """Clients that send `requests` requests through their `EndpointLimit`s to one server that works
    on `slots` requests at once (None: all) for `service(now)` seconds each, the rest waiting in order."""

    def __init__(self, limits: list[EndpointLimit], clock: Clock, slots: int | None,
                 service=lambda now: 1.0) -> None:
        self.limits, self.clock, self.slots, self.service = limits, clock, slots, service
        self.waiting: list = []  # FIFO of (limit, ticket) waiting for a slot at the server
        self.busy = 0
        self.done: list = []  # heap of (finish time, order, limit, ticket)
        self.order = itertools.count()
        self.queue_seen: list[int] = []  # requests waiting at the server as each arrives, itself included
        self.limit_seen: list[int] = []  # the limits' sum at each answer
        self.waits: list[tuple[float, float]] = []  # (sent, seconds waited for a slot) of each request

    def _start(self) -> None:
        while self.waiting and (self.slots is None or self.busy < self.slots):
            limit, ticket = self.waiting.pop(0)
            self.waits.append((ticket.sent, self.clock.now - ticket.sent))
            self.busy += 1
            heapq.heappush(self.done, (self.clock.now + self.service(self.clock.now), next(self.order), limit, ticket))

    def run(self, requests: int, starts: list[float] | None = None) -> float:
        """Send `requests` in all, split evenly; process i starts at `starts[i]` (default: all at 0)."""
        left = [requests // len(self.limits)] * len(self.limits)
        starts = starts or [0.0] * len(self.limits)
        while any(left) or self.done:
            for i, limit in enumerate(self.limits):
                while left[i] and starts[i] <= self.clock.now and limit.has_room():
                    left[i] -= 1
                    ticket = limit.sent()
                    self.waiting.append((limit, ticket))
                    free = self.slots is None or self.busy < self.slots
                    self.queue_seen.append(0 if free and len(self.waiting) == 1 else len(self.waiting))
            self._start()
            if not self.done:  # nothing in flight: the next process to start
                self.clock.now = min(start for start, n in zip(starts, left) if n and start > self.clock.now)
                continue
            self.clock.now, _, limit, ticket = heapq.heappop(self.done)
            self.busy -= 1
            limit.answered(ticket, self.clock.now - ticket.sent, 7)
            self.limit_seen.append(sum(limit.allowed for limit in self.limits))
            self._start()
        return self.clock.now


def endpoint(clock: Clock, ceiling: int = 128, sharing: int = 1, wall: Clock | None = None) -> EndpointLimit:
    return EndpointLimit(ceiling, sharing, clock=clock, wall=wall or clock)


@pytest.mark.parametrize("slots", [1, 2, 4, 8])
def test_against_a_server_that_queues_requests_wait_in_the_client_and_the_server_stays_busy(slots):
    clock = Clock()
    sim = Simulation([endpoint(clock)], clock, slots)
    took = sim.run(400)
    ideal = 400 * 1.0 / slots
    assert took <= ideal * 1.1, (took, ideal)  # the server seldom idles (probes for the no-load latency cost a little)
    # Once learned, a short queue at the server: the latency it tolerates (TOLERANCE x the no-load one) is
    # half a service more per request, K/2 queued, plus a few (a moment longer after each probe).
    learned = sorted(sim.queue_seen[len(sim.queue_seen) // 4:])
    assert learned[len(learned) // 2] <= (TOLERANCE - 1) * slots + 4 and learned[-1] <= slots + 9, learned
    assert max(sim.limit_seen[len(sim.limit_seen) // 4:]) <= slots + 9


@pytest.mark.parametrize("service", [20.0, 50.0])
def test_a_one_slot_server_at_tens_of_seconds_keeps_every_later_request_within_two_services_of_queue(service):
    """llama-cpp-python's server answers one completion at a time: once the first answer is in, no request sent
    waits longer than two services in its queue (the first wave, sent before anything was known, waits its turn:
    its answers are held, not refilled, until they show the queue), and the server never idles."""
    clock = Clock()
    sim = Simulation([endpoint(clock)], clock, 1, service=lambda now: service)
    took = sim.run(100)
    late = [wait for sent, wait in sim.waits if sent >= service]  # sent once the first answer was in
    assert late and max(late) <= MAX_WAIT * service + 1e-9, [round(wait / service, 2) for wait in late]
    assert took == pytest.approx(100 * service)


def test_against_a_wide_server_the_limit_grows_to_the_ceiling_in_a_few_round_trips():
    clock = Clock()
    limit = endpoint(clock, ceiling=64)
    sim = Simulation([limit], clock, None)
    sim.run(1000)
    assert INITIAL < 64 and limit.limit == 64
    assert limit.changes[0] == (0.0, INITIAL)
    grown = next(time for time, value in limit.changes if value == 64)
    assert grown <= 4.0  # round trips of 1 s: slow start doubles it each (8, 16, 32, 64)


def test_the_no_load_latency_rises_again_when_the_server_gets_slower():
    """A wide server whose every answer takes twice as long after 100 s: without measuring the no-load latency
    again, the doubled latency would read as a queue of half the limit and the limit would fall to a few."""
    clock = Clock()
    limit = endpoint(clock, ceiling=64)
    sim = Simulation([limit], clock, None, service=lambda now: 1.0 if now < 100 else 2.0)
    sim.run(10000)  # about 250 s
    assert clock.now > 200
    assert limit.no_load == pytest.approx(2.0 / 7)  # per completion token
    assert limit.limit >= 32, limit.changes[-10:]


def test_a_burst_of_congestion_halves_the_limit_once_and_it_is_regained():
    clock = Clock()
    limit = endpoint(clock, ceiling=128)
    tickets = [limit.sent() for _ in range(8)]
    clock.now = 1.0
    for ticket in tickets:  # eight 503s for requests sent together: one signal
        limit.congested(ticket)
    assert limit.limit == INITIAL / 2
    clock.now = 2.0
    for _ in range(3):  # a round trip later, answers at no-load latency
        ticket = limit.sent()
        ticket.in_flight = int(limit.limit)
        clock.now += 1.0
        limit.answered(ticket, 1.0, 7)
    assert limit.limit >= INITIAL - 1  # +1 an answer back toward where it was
    later = limit.sent()
    clock.now += 1.0
    limit.congested(later)  # congestion after the cut, sent after it: a new signal
    assert limit.limit < INITIAL - 1


def test_processes_sharing_a_server_keep_its_queue_as_short_as_one_process_does():
    clock = Clock()
    alone = Simulation([endpoint(clock)], clock, 2)
    alone.run(400)
    clock = Clock()
    shared = Simulation([endpoint(clock, sharing=2), endpoint(clock, sharing=2)], clock, 2)
    took = shared.run(400)
    assert took <= 400 / 2 * 1.05
    alone_queue = max(alone.queue_seen[100:])
    assert max(shared.queue_seen[100:]) <= alone_queue + 1, (shared.queue_seen[100:], alone_queue)


def test_a_process_that_joins_later_measures_the_no_load_latency_again_soon():
    """0.1 s a completion; the second worker starts 0.5 s late: its first answers waited behind the first one's
    queue, so its no-load latency is too high, and it would keep a long queue until the half-minute probe."""
    clock = Clock()
    sim = Simulation([endpoint(clock, sharing=2), endpoint(clock, sharing=2)], clock, 2, service=lambda now: 0.1)
    sim.run(300, starts=[0.0, 0.5])
    assert clock.now < 30  # over before the regular probe
    later = sorted(sim.queue_seen[120:240])  # from 6 s on, before the last requests drain
    assert later[len(later) // 2] <= 5, sim.queue_seen


def test_unshared_processes_would_queue_more_at_the_server():
    """The reason for `sharing`: two processes each keeping one process's queue keep twice it."""
    clock = Clock()
    alone = Simulation([endpoint(clock)], clock, 2)
    alone.run(400)
    clock = Clock()
    unshared = Simulation([endpoint(clock), endpoint(clock)], clock, 2)
    unshared.run(400)
    assert sum(unshared.queue_seen[100:]) > sum(alone.queue_seen[100:]) * 1.3


def test_the_limiter_routes_only_to_endpoints_with_room_and_keeps_the_ceiling():
    limiter = Limiter(ceiling=3, initial=2)
    chosen: list[list[str]] = []

    class Route:
        def __init__(self, room):
            chosen.append(list(room))

        def __enter__(self):
            return chosen[-1][0]

        def __exit__(self, *exc):
            return False

    slots = [limiter.slot(["a", "b"], Route) for _ in range(3)]
    tickets = [slot.__enter__() for slot in slots]
    assert [ticket.url for ticket in tickets] == ["a", "a", "b"]  # a is full after two
    assert chosen == [["a", "b"], ["a", "b"], ["b"]]
    assert limiter.active == 3 == limiter.peak and limiter.limit == 3  # 2 + 2, under the ceiling of 3
    blocked = threading.Event()

    def fourth():
        with limiter.slot(["a", "b"], Route):
            blocked.set()

    thread = threading.Thread(target=fourth)
    thread.start()
    thread.join(0.2)
    assert not blocked.is_set()  # the ceiling holds it back, though b has room
    tickets[0].answered(1.0, 7)
    slots[0].__exit__(None, None, None)
    thread.join()
    assert blocked.is_set()
    for slot in slots[1:]:
        slot.__exit__(None, None, None)
    assert limiter.active == 0
    report = limiter.report()
    assert set(report) == {"a", "b"} and report["a"]["initial"] == 2


def test_a_failed_request_frees_its_slot_without_moving_the_limit():
    clock = Clock()
    limit = endpoint(clock)
    ticket = limit.sent()
    limit.failed(ticket)
    assert limit.in_flight == 0 and limit.limit == INITIAL


def test_the_ticket_records_its_outcome():
    ticket = Ticket("u", 0.0, 1)
    ticket.answered(2.0, 5)
    assert (ticket.latency, ticket.tokens, ticket.congested) == (2.0, 5, False)


def test_a_process_alone_probes_a_whole_period_after_its_first_answers_not_at_the_next_boundary():
    """A run's first answers measure the no-load latency. A process alone waited for the next half-minute of the
    wall clock, which may come a moment later: two quick answers that read as a queue (ending slow start), the
    boundary, and the run drained for a probe behind a request still in flight while the rest of its first
    requests were unsent (tests/test_stop.py's run waited 120 s for them in CI). It probes a period later."""
    clock, wall = Clock(), Clock()
    wall.now = 29.0  # a second before the wall clock's half-minute
    limit = EndpointLimit(128, 1, clock=clock, wall=wall)
    assert all(limit.has_room() for _ in range(3))
    first, second, slow = (limit.sent() for _ in range(3))
    for ticket, latency in ((first, 0.01), (second, 0.05)):
        clock.now, wall.now = clock.now + latency, wall.now + latency
        limit.answered(ticket, latency, 7)
    assert not limit.slow_start  # the second answer read as a queue
    clock.now, wall.now = clock.now + 2.0, wall.now + 2.0  # past the boundary, the slow request still out
    assert limit.has_room() and not limit.probing
    clock.now, wall.now = clock.now + 30.0, wall.now + 30.0
    assert not limit.has_room() and limit.probing  # a period on: it drains for its probe
