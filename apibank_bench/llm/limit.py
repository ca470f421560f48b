"""How many model requests may be in flight at each endpoint: a limit learned from what the client observes.

A server has a number of completions it works on at once (llama-cpp-python's server: 1;
llama.cpp's `llama-server`: its slots; vLLM: its batch). Requests beyond that wait in the
server's queue, where a client-side timeout abandons them and nothing can cancel them; so
the requests beyond it should wait here instead. The limit of each endpoint follows TCP
Vegas, as Netflix's `concurrency-limits` (VegasLimit) does for RPC servers:

- the no-load latency is the smallest seen since the last probe; the current latency is the
  median of the last few answers (robust to one long answer). By Little's law the requests
  queued at the server are about `limit x (1 - TOLERANCE x no_load / current)`: latency up to
  `TOLERANCE` times the no-load one counts as none (as Gradient2's tolerance: a wide server's
  noise, a batch decoding a little slower, the client's own work on 2 cores would otherwise
  cut a wide server's limit);
- while that queue is at most `alpha` the limit grows (slow start first: +1 an answer, so it
  doubles every round trip, until the first queue is seen); above `beta` it is cut to
  `TOLERANCE` times the server's estimated parallelism plus `alpha`, at most once per round
  trip (requests sent before a cut, queued behind its old limit, cut nothing more);
- a request may wait at most `MAX_WAIT` services in the server's queue (a one-slot server at tens of seconds a
  completion would otherwise keep minutes of queue under the thresholds above): a median latency above
  1 + `MAX_WAIT` no-load latencies is a queue too, the cut is to at most `1 + MAX_WAIT` times the parallelism,
  and the limit grows only while one more request in flight would keep that wait (each answer's latency per
  request in flight when it was sent, by Little's law for a FIFO server);
- the first wave (the requests sent before any answer) is held until its answers say whether the server
  queues: an answer of it that was sent with fewer than half the limit in flight, or that was queued, frees no
  slot (the limit drops by one), a queue seen then is cut to from that answer's own parallelism (`in flight /
  its latency in no-load latencies`; by half at most, one answer being one sample), and a request sent into a loaded wave and answered at the no-load
  latency ends the hold (slow start goes on); so against a one-slot server nothing joins the wave's queue;
- answers of requests sent before the last cut's requests ended neither grow the limit nor enter the median:
  they timed the old limit;
- HTTP 429, 502-504, connection resets and timeouts are congestion: the limit halves, at most
  once per round trip (a burst of failed requests sent together is one signal, not forty), and
  the highest limit before the episode is regained at +1 an answer;
- a completion's latency grows with its length, so latencies are compared per completion
  token when the server reports them (a stand-in's or a constrained answer's length is fixed);
- the no-load latency can rise again (the server got slower, a second tenant arrived): once a
  queue has been seen (before, it holds nothing down and a probe would only cost), once a
  half-minute (alone: 30 s after the last measurement; sharing: at the same wall-clock times in every
  process; at most once every 30 no-load latencies), the endpoint drains and `PROBES` requests go
  alone, one after the other; the best of them is the new no-load latency (Envoy's adaptive concurrency does the same).
  Processes sharing an endpoint drain together, so one's probe does not time the other's queue.

Processes that share an endpoint (xdist workers) each see the whole queue in their latency,
and each estimates its own part of it (its share of the requests in flight); `sharing`
divides `alpha`, `beta` and the start among them, so their queues add up to what one process
would keep (sharing a file of state would need locking across processes for the same result).
A worker that started later timed the others' queue as its no-load latency, so processes that
share measure it again at the first `FIRST_SHARED_PROBE_S` wall-clock boundary.

A server known to answer one completion at a time and to keep the previous prompt's KV cache (the
embedded model: llama-cpp-python's server) learns nothing: it gets one request at a time, in the order of
`OneSlotQueue` (llm/one_slot.py), so that a team's nearly equal prompts reuse what the server has evaluated.

`--max-in-flight` stays the ceiling of all endpoints together (`CEILING`, or `WIDE_CEILING` at servers that
batch, when not given); the limit starts at `INITIAL`,
small enough that a server answering one slow completion at a time (60 s each: the eighth
answers in 480 s) does not time the first ones out, and slow start reaches a wide server's
parallelism in a few round trips; a server known to batch (vLLM, SGLang) starts at `WIDE_INITIAL`.
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections import deque
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Callable, ContextManager, Iterator, Sequence

from apibank_bench.llm.breaker import current_instance
from apibank_bench.llm.one_slot import OneSlotQueue, Place

INITIAL = 8  #: requests in flight at a new endpoint before anything is learned
CEILING = 128  #: requests in flight at once, all endpoints together, unless `--max-in-flight` says otherwise
#: ... when every server is known to batch (vLLM, SGLang): vLLM's default batch (`--max-num-seqs` 256), so that
#: its whole batch is used; beyond it requests wait in the server's queue, not ours
WIDE_CEILING = 256
WIDE_INITIAL = WIDE_CEILING  #: the limit's start at a server known to batch: its default batch, at once
TOLERANCE = 1.5  #: latency up to this many times the no-load latency is not taken for a queue
ALPHA, BETA = 2.0, 4.0  #: the queue (x log10 of the limit) below which the limit grows, above which it is cut
RECENT = 9  #: answers whose median is the current latency
PROBE_PERIOD_S = 30.0  #: how often the no-load latency is measured again (wall-clock aligned when shared)
FIRST_SHARED_PROBE_S = 5.0  #: ... the first time, when processes share the endpoint
PROBES = 2  #: requests sent alone in a probe (another process sharing the endpoint may still be draining)
PROBE_SPACING = 30  #: ... and at most once every this many no-load latencies (a slow model's minute is short)
CHANGES_KEPT = 200  #: changes of the limit kept for summary.json (then every other one is dropped)
MAX_WAIT = 2.0  #: services a request may wait in the server's queue once the limit is learned


def request_ceiling(given: int | None, batches: bool) -> int:
    """The ceiling of requests in flight: `--max-in-flight` as `given`, else wider where every server batches."""
    return given or (WIDE_CEILING if batches else CEILING)


@dataclass
class Ticket:
    """One request's slot: where it went, when it was sent, and how many were in flight there with it."""

    url: str
    sent: float
    in_flight: int  #: at that endpoint, this request included
    probe: bool = False  #: sent alone to measure the no-load latency
    serial: int = 0  #: its number at that endpoint
    latency: float | None = None  #: set by `answered`: the request succeeded
    tokens: int = 0
    congested: bool = False  #: set for 429, 503, a reset or a timeout

    def answered(self, latency: float, tokens: int) -> None:
        self.latency, self.tokens = latency, tokens


class EndpointLimit:
    """The learned limit of one endpoint (not thread-safe: `Limiter` holds the lock)."""

    def __init__(self, ceiling: int, sharing: int = 1, initial: int = INITIAL,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time) -> None:
        self.ceiling = ceiling
        self.sharing = max(1, sharing)
        self.limit = float(max(1, min(ceiling, initial // self.sharing)))  # together, no more than one process
        self.slow_start = True  #: +1 an answer until the first queue is seen (congestion does not end it)
        self.slow_start_to = 0.0  #: after congestion: +1 an answer again up to the highest limit before it
        self.no_load: float | None = None  #: seconds (per completion token, when reported) with no queue
        self.no_load_s = 0.0  #: the same answer's whole latency (how long a probe takes)
        self.recent: deque[float] = deque(maxlen=RECENT)
        self.in_flight = 0
        self._serial = 0
        self._out: set[int] = set()  #: requests in flight (their serial numbers)
        self.probing = False  #: draining to send requests alone, one after the other
        self._probes_left, self._probe_best = 0, (math.inf, 0.0)
        self.queue = 0.0  #: the last estimate of requests queued at the server (this process's share)
        #: The first wave (the requests sent before the first answer) is held until its answers tell whether the
        #: server queues: an answer that cannot say (sent with few in flight, or queued) frees no slot.
        self.holding = True
        self._wave = 0  #: requests in the first wave (known at the first answer)
        self._clock, self._wall = clock, wall
        #: Requests sent before this time cut the limit no more: they were queued behind the requests of
        #: the limit before the last cut, so they time that limit, not this one (set once those have ended).
        self._cut_clear = -math.inf
        self._before_cut: set[int] = set()  #: requests still out that were sent before the last cut
        #: when the no-load latency was last measured: never; a process alone counts its first answer, one sharing
        #: the endpoint probes at the first period's end (its first answers may have queued behind another
        #: process's, as they started together)
        self._probed_at = -math.inf
        self._probed_wall = wall()
        started = round(self.limit)
        self.changes: list[tuple[float, int]] = [(0.0, started)]  #: (seconds since start, limit) on each change
        self.low = self.high = started
        self._born = clock()

    @property
    def allowed(self) -> int:
        """Requests that may be in flight here now (1 while draining for a probe)."""
        return 1 if self.probing else max(1, min(self.ceiling, int(self.limit)))

    def has_room(self) -> bool:
        self._maybe_probe()
        return self.in_flight < self.allowed

    def sent(self) -> Ticket:
        self.in_flight += 1
        self._serial += 1
        ticket = Ticket("", self._clock(), self.in_flight, probe=self.probing and self.in_flight == 1)
        ticket.serial = self._serial
        self._out.add(ticket.serial)
        return ticket

    def _ended(self, ticket: Ticket) -> None:
        self.in_flight -= 1
        self._out.discard(ticket.serial)
        if ticket.serial in self._before_cut:
            self._before_cut.discard(ticket.serial)
            if not self._before_cut:
                self._cut_clear = self._clock()
                self.recent.clear()  # their latencies timed the old limit

    def _maybe_probe(self) -> None:
        if self.probing or self.no_load is None:
            return
        now, wall = self._clock(), self._wall()
        # Processes sharing the endpoint start at different moments: a later one's first answers waited behind
        # the others' queue, so its first no-load latency is too high, and it is measured again soon.
        first_shared = self.sharing > 1 and self._probed_at == -math.inf
        if self.slow_start and not first_shared:
            return  # no queue seen yet: the limit is not held down by the no-load latency, nothing to correct
        period = FIRST_SHARED_PROBE_S if first_shared else PROBE_PERIOD_S
        if self.sharing > 1:  # at the same wall-clock times in every process, so that they drain together
            due = int(wall // period) != int(self._probed_wall // period)
        else:  # alone: a whole period after the last measurement (the first answers are one), not at a boundary
            due = now - self._probed_at >= period  # that may fall a moment after them, while requests are unsent
        if due and now - self._probed_at >= PROBE_SPACING * self.no_load_s:
            self.probing, self._probes_left, self._probe_best = True, PROBES, (math.inf, 0.0)

    def answered(self, ticket: Ticket, latency: float, tokens: int) -> None:
        """A success: `latency` seconds from sending to the whole answer, `tokens` completion tokens (0: unknown)."""
        self._ended(ticket)
        cost = latency / tokens if tokens > 0 else latency
        if self.no_load is None and self.sharing == 1:
            self._probed_at = self._clock()  # measured: the first answer (alone, the wall clock plays no part)
        if self.no_load is None or cost < self.no_load:
            self.no_load, self.no_load_s = cost, latency
        if ticket.probe:
            self._probe_best = min(self._probe_best, (cost, latency))
            self._probes_left -= 1
            if not self._probes_left:  # the best of the probes, lower or higher than before
                (self.no_load, self.no_load_s), self.probing = self._probe_best, False
                self._probed_at, self._probed_wall = self._clock(), self._wall()
                self.recent.clear()  # latencies from before are compared with the old no-load one
        fresh = ticket.sent >= self._cut_clear  # sent after the last cut's requests ended: it times this limit
        if fresh:
            self.recent.append(cost)
        current = statistics.median(self.recent) if self.recent else cost
        limit = self.limit
        if not self._wave:
            self._wave = self._serial
        # Latency up to TOLERANCE x the no-load one is no queue: a wide server's own noise, a batch
        # decoding a little slower, the client's own work on 2 cores (Netflix's Gradient2 tolerates 1.5x too).
        self.queue = max(0.0, limit * (1 - TOLERANCE * self.no_load / current)) if current > 0 else 0.0
        step = max(1.0, math.log10(limit))
        alpha, beta = ALPHA * step / self.sharing, BETA * step / self.sharing
        in_use = max(ticket.in_flight, self.in_flight + 1)  # (an idle limit learns nothing: not grown unless used)
        ratio, own = current / self.no_load, cost / self.no_load  # latency in no-load latencies (median, this one)
        # Little's law per request (a FIFO server): it was sent with `in_flight` ahead of and with it, and took
        # `own` no-load latencies, so the server works on about in_flight / own at once.
        parallel = ticket.in_flight / max(1.0, own) if self.holding else limit / max(1.0, ratio)
        first = self.holding and ticket.serial <= self._wave
        queued = self.queue > beta or ratio - 1 > MAX_WAIT or (first and ratio > TOLERANCE)
        if queued and fresh:  # a queue: to the server's parallelism + alpha, and no more than MAX_WAIT services
            target = min(limit - 1, TOLERANCE * parallel + alpha, parallel * (1 + MAX_WAIT))
            self._set(max(1.0, limit / 2 if self.holding else 1.0, target), cut=True)  # (one answer: half at most)
            self.slow_start, self.slow_start_to, self.holding = False, 0.0, False  # its parallelism is known now
        elif (self.queue <= alpha and in_use * 2 >= limit and fresh
              and (not self.slow_start or (ticket.in_flight * 2 >= limit and own <= TOLERANCE))
              and own * (math.floor(limit) + 1) / ticket.in_flight - 1 <= MAX_WAIT):  # one more: still in bounds
            fast = self.slow_start or limit < self.slow_start_to
            if not fast:
                self.slow_start_to = 0.0  # regained: a later congestion episode starts afresh
            self._set(limit + (1.0 if fast else step / limit))
            self.holding = self.holding and not (self.slow_start and own <= TOLERANCE)  # no queue: known too
        elif first:  # the first wave's answer says nothing yet: its slot stays empty
            self._set(max(1.0, limit - 1))
        if self.holding and ticket.serial >= self._wave and not self._out & set(range(1, self._wave + 1)):
            self.holding = False  # the whole first wave is in

    def congested(self, ticket: Ticket) -> None:
        """429, 503, a reset or a timeout: halve, once per round trip."""
        self._ended(ticket)
        if ticket.sent >= self._cut_clear:
            # then regained at +1 an answer up to the highest limit before this episode (a burst cuts 8 to 1
            # in three round trips: all of it is regained), or further still while no queue has been seen
            self.slow_start_to = max(self.slow_start_to, self.limit)
            self._set(max(1.0, self.limit / 2), cut=True)

    def failed(self, ticket: Ticket) -> None:
        """Any other failure: the slot is free, the limit unchanged."""
        self._ended(ticket)

    def _set(self, limit: float, cut: bool = False) -> None:
        if cut:
            self._before_cut = set(self._out)
            self._cut_clear = math.inf if self._before_cut else self._clock()
        self.limit = min(float(self.ceiling), limit)
        rounded = round(self.limit)
        if rounded != self.changes[-1][1]:
            self.changes.append((round(self._clock() - self._born, 3), rounded))
            if len(self.changes) > CHANGES_KEPT:
                self.changes = self.changes[:1] + self.changes[2::2]
            self.low, self.high = min(self.low, rounded), max(self.high, rounded)

    def report(self) -> dict:
        return {"initial": self.changes[0][1], "min": self.low, "max": self.high, "final": round(self.limit),
                "changes": [list(change) for change in self.changes]}


class Limiter:
    """The gate every model request passes: room at an endpoint (its learned limit) and under the ceiling.

    Thread-safe; one per client, or one shared by several clients (they then share each
    endpoint's limit and the ceiling).
    """

    def __init__(self, ceiling: int, sharing: int = 1, initial: int = INITIAL,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                 one_slot: bool = False) -> None:
        if ceiling < 1:
            raise ValueError("the in-flight cap must be >= 1")
        self.ceiling = ceiling
        self.sharing = sharing
        self.active = 0  #: requests in flight now, at every endpoint
        self.peak = 0  #: the most ever in flight at once
        self.endpoints: dict[str, EndpointLimit] = {}
        # A one-slot server: one request at a time, nothing to learn (see `OneSlotQueue`).
        self._new = ((lambda: EndpointLimit(1, 1, 1, clock, wall)) if one_slot
                     else (lambda: EndpointLimit(ceiling, sharing, initial, clock, wall)))
        self.queue = OneSlotQueue(clock, self._wake) if one_slot else None
        self._cond = threading.Condition()

    def _endpoint(self, url: str) -> EndpointLimit:
        if url not in self.endpoints:
            self.endpoints[url] = self._new()
        return self.endpoints[url]

    @property
    def limit(self) -> int:
        """Requests allowed in flight now, all endpoints together (the progress line shows it)."""
        with self._cond:
            return min(self.ceiling, sum(e.allowed for e in self.endpoints.values())) if self.endpoints else 0

    def _room(self, urls: Sequence[str], place: Place | None = None) -> list[str]:
        """The endpoints among `urls` with room now (none while the ceiling is reached, nor while another request
        is first in a one-slot server's queue)."""
        if self.active >= self.ceiling or (place is not None and self.queue is not None and not self.queue.first(place)):
            return []
        return [url for url in urls if self._endpoint(url).has_room()]

    def _wake(self) -> None:
        """An instance a one-slot server was holding for finished: its queue's next request may go."""
        with self._cond:
            self._cond.notify_all()

    @contextmanager
    def slot(self, urls: Sequence[str], route: Callable[[list[str]], ContextManager[str]]) -> Iterator[Ticket]:
        """Wait for room at one of `urls`; `route(open_urls)` picks one of them (entered here, so that
        the router counts the request at once), and the request is counted there until it ends."""
        with ExitStack() as stack:
            with self._cond:
                instance = current_instance()
                place = self.queue.join(instance) if self.queue is not None else None
                room: list[str] = []
                try:
                    if not (room := self._room(urls, place)):
                        with instance.held() if instance is not None else nullcontext():  # its time limit pauses
                            while not (room := self._room(urls, place)):
                                # a probe (or the end of a one-slot server's hold) falls due with time, not only
                                # as slots free
                                self._cond.wait(timeout=self.queue.wait_s() if self.queue is not None else 1.0)
                finally:
                    if self.queue is not None and place is not None:
                        self.queue.leave(place, served=bool(room))
                url = stack.enter_context(route(room))
                endpoint = self._endpoint(url)
                ticket = endpoint.sent()
                ticket.url = url
                self.active += 1
                self.peak = max(self.peak, self.active)
            try:
                yield ticket
            finally:
                with self._cond:
                    self.active -= 1
                    before = endpoint.allowed
                    if ticket.latency is not None:
                        endpoint.answered(ticket, ticket.latency, ticket.tokens)
                    elif ticket.congested:
                        endpoint.congested(ticket)
                    else:
                        endpoint.failed(ticket)
                    if self.queue is not None:  # only the first in its order may go: each looks
                        self.queue.ended(instance)
                        self._cond.notify_all()
                    else:  # wake as many waiters as there are new openings (waking all would wake 100 threads for one)
                        self._cond.notify(1 + max(0, endpoint.allowed - before))

    def report(self) -> dict[str, dict]:
        """Each endpoint's limit: initial, min, max, final and its changes over time (for summary.json)."""
        with self._cond:
            return {url: endpoint.report() for url, endpoint in self.endpoints.items()}
