"""Which endpoint answers the next request, when a run has several `--base-url`s.

Round-robin lets the slowest replica set the pace; here each request goes to the
endpoint where it should be answered soonest. Its expected latency there is the
endpoint's moving-average latency plus, for each request outstanding there, that
endpoint's moving-average latency per request in flight (a request's latency
divided by the number of requests it shared the endpoint with, on average over its
life): least outstanding requests, weighted by latency. The per-request weight is
what makes one rule fit both kinds of server: one that answers a request at a time
has a latency per request in flight of its service time (each request ahead adds
one), while a batching server (vLLM, llama.cpp with slots) answering N at once in
about the time of one has L / N (by Little's law, its throughput is N / L), so its
queue is cheap. Weighting the outstanding count by the whole latency instead, as
plain load balancers do, would send a batching fast server's overflow to a slow
one. An endpoint's latency counts as at least the age of its oldest outstanding
request (so an endpoint that stalls, or a slow one not yet measured, stops drawing
requests before its first answer comes). An endpoint not yet measured counts as
fast as the fastest one and wins ties, so every endpoint gets tried.

An endpoint whose requests keep failing at the connection or with a 5xx
(`FAILURES_TO_EJECT` in a row) is taken out of rotation for a cooldown that
doubles with every ejection in a row (up to `MAX_COOLDOWN_S`); when it ends the
endpoint is tried again with one request at a time, and one success brings it
fully back. When every
endpoint is out, the one due back soonest is used (the retry policy still
decides whether to try at all). A retry avoids the endpoint that just failed.

`--routing round_robin` keeps the plain rotation of earlier releases (each request,
retries included, to the next URL in turn; nothing taken out). Either way the
router counts requests, errors (a 429 is counted apart, as `rate_limited`, with the time spent waiting
after it) and latency per endpoint; `snapshot()` is what
`summary.json` records under `endpoints`.
"""

from __future__ import annotations

import itertools
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, NotRequired, Sequence, TypedDict

from apibank_bench.llm.http import APIConnectionError, APIStatusError

FAILURES_TO_EJECT = 3
COOLDOWN_S = 5.0
MAX_COOLDOWN_S = 120.0
EWMA_WEIGHT = 0.3  #: the weight of the newest latency in the moving average
ROUTINGS = ("load", "round_robin")


def is_rate_limit(exc: BaseException) -> bool:
    """HTTP 429: the endpoint throttles (it answered, and may say when to come back)."""
    return isinstance(exc, APIStatusError) and exc.status_code == 429


def is_endpoint_failure(exc: BaseException) -> bool:
    """The endpoint, not the request, is at fault: no connection, a timeout, or a 5xx."""
    if isinstance(exc, APIConnectionError):  # APITimeoutError is one
        return True
    return isinstance(exc, APIStatusError) and exc.status_code >= 500


class EndpointReport(TypedDict):
    """One endpoint's counts under `endpoints` in summary.json (one process's, or several joined by
    `merge_snapshots`: they travel from xdist workers as JSON)."""

    requests: int
    errors: int
    mean_latency_s: float | None
    ewma_latency_s: float | None
    ejections: int
    rate_limited: NotRequired[int]  #: requests answered HTTP 429: throttled, not failed (not in `errors`)
    rate_limit_wait_s: NotRequired[float]  #: seconds spent waiting to retry after a 429 (its Retry-After honoured)
    in_flight_limit: NotRequired[list[dict[str, Any]]]  #: the learned limit, one record per process (the client's)


@dataclass
class Endpoint:
    url: str
    started: dict = field(default_factory=dict)  #: outstanding request -> when it was sent
    ewma_s: float | None = None  #: moving average of successful requests' latency
    per_request_s: float | None = None  #: moving average of latency / requests in flight with it (routes)
    requests: int = 0
    errors: int = 0
    rate_limited: int = 0  #: answered HTTP 429 (throttled: counted apart from errors)
    rate_limit_wait_s: float = 0.0  #: waited before retrying after a 429
    latency_total_s: float = 0.0  #: over all requests, failed ones included
    failures_in_row: int = 0
    ejections: int = 0  #: times taken out of rotation
    ejected_in_row: int = 0
    back_at: float = 0.0  #: out of rotation until this monotonic time

    @property
    def outstanding(self) -> int:
        return len(self.started)

    def report(self) -> EndpointReport:
        return {"requests": self.requests, "errors": self.errors,
                "mean_latency_s": round(self.latency_total_s / self.requests, 4) if self.requests else None,
                "ewma_latency_s": None if self.ewma_s is None else round(self.ewma_s, 4),
                "ejections": self.ejections, "rate_limited": self.rate_limited,
                "rate_limit_wait_s": round(self.rate_limit_wait_s, 3)}


def _average(average: float | None, sample: float) -> float:
    return sample if average is None else EWMA_WEIGHT * sample + (1 - EWMA_WEIGHT) * average


class Router:
    """Thread-safe; one per client."""

    def __init__(self, urls: Sequence[str], policy: str = "load", clock: Callable[[], float] = time.monotonic) -> None:
        if not urls:
            raise ValueError("no endpoints to route to")
        if policy not in ROUTINGS:
            raise ValueError(f"routing must be one of {ROUTINGS}, got {policy!r}")
        self.urls = list(urls)
        self.endpoints = {url: Endpoint(url) for url in urls}
        self.policy = policy
        self._turn = itertools.cycle(self.endpoints.values())
        self._clock = clock
        self._lock = threading.Lock()

    def _cost(self, endpoint: Endpoint, now: float, fastest: tuple[float, float]) -> float:
        """The expected latency of one more request at `endpoint` (see the module's text)."""
        latency = fastest[0] if endpoint.ewma_s is None else endpoint.ewma_s
        if endpoint.started:
            latency = max(latency, now - min(endpoint.started.values()))
        each = fastest[1] if endpoint.per_request_s is None else endpoint.per_request_s
        return latency + endpoint.outstanding * each

    def _choose(self, avoid: str, among: Sequence[str] | None = None) -> Endpoint:
        allowed = [self.endpoints[url] for url in among] if among is not None else list(self.endpoints.values())
        if self.policy == "round_robin":
            while (endpoint := next(self._turn)) not in allowed:
                pass
            return endpoint
        now = self._clock()
        # back from a cooldown, an endpoint is tried with one request at a time until one succeeds
        live = [e for e in allowed
                if e.back_at <= now and not (e.failures_in_row >= FAILURES_TO_EJECT and e.outstanding)]
        if not live:  # all out of rotation: the one due back first
            return min(allowed, key=lambda e: e.back_at)
        if len(live) > 1:
            live = [e for e in live if e.url != avoid] or live
        measured = [(e.ewma_s, e.per_request_s) for e in self.endpoints.values()
                    if e.ewma_s is not None and e.per_request_s is not None]  # (both set by a success)
        fastest = (min(m[0] for m in measured), min(m[1] for m in measured)) if measured else (1.0, 1.0)
        # ties: an unmeasured endpoint first (so each gets measured), then the order given
        return min(live, key=lambda e: (self._cost(e, now, fastest), e.ewma_s is not None))

    @contextmanager
    def request(self, avoid: str = "", among: Sequence[str] | None = None) -> Iterator[str]:
        """Choose an endpoint (one of `among`, the endpoints with room in the client's limit) and count the
        request there; yields its URL. An exception raised inside is the request's failure (re-raised)."""
        token = object()
        with self._lock:
            endpoint = self._choose(avoid, among)
            started = endpoint.started[token] = self._clock()
            sharing = endpoint.outstanding  # requests in flight there as it starts, itself included
        try:
            yield endpoint.url
        except BaseException as exc:
            self._finish(endpoint, token, self._clock() - started, sharing, exc)
            raise
        self._finish(endpoint, token, self._clock() - started, sharing, None)

    def _finish(self, endpoint: Endpoint, token: object, latency: float, sharing: int,
                exc: BaseException | None) -> None:
        with self._lock:
            shared = (sharing + endpoint.outstanding) / 2  # requests in flight with it: at its start and at its end
            del endpoint.started[token]
            endpoint.requests += 1
            endpoint.latency_total_s += latency
            if exc is None:
                endpoint.ewma_s = _average(endpoint.ewma_s, latency)
                endpoint.per_request_s = _average(endpoint.per_request_s, latency / shared)
                endpoint.failures_in_row = endpoint.ejected_in_row = 0
                return
            if is_rate_limit(exc):  # throttled: the endpoint is alive and said when to come back
                endpoint.rate_limited += 1
                return
            endpoint.errors += 1
            if self.policy == "round_robin" or not is_endpoint_failure(exc):
                return  # round-robin takes nothing out
            endpoint.failures_in_row += 1
            if endpoint.failures_in_row >= FAILURES_TO_EJECT:
                cooldown = min(MAX_COOLDOWN_S, COOLDOWN_S * 2 ** endpoint.ejected_in_row)
                endpoint.back_at = self._clock() + cooldown
                endpoint.ejections += 1
                endpoint.ejected_in_row += 1

    def waited(self, url: str, seconds: float) -> None:
        """Time spent waiting to retry a request `url` answered with a 429."""
        with self._lock:
            if url in self.endpoints:
                self.endpoints[url].rate_limit_wait_s += seconds

    def eject(self, url: str) -> None:
        """Out of rotation now (an endpoint found dead before the run)."""
        with self._lock:
            endpoint = self.endpoints[url]
            endpoint.failures_in_row = FAILURES_TO_EJECT
            endpoint.back_at = self._clock() + COOLDOWN_S
            endpoint.ejections += 1
            endpoint.ejected_in_row += 1

    def snapshot(self) -> dict[str, EndpointReport]:
        with self._lock:
            return {url: endpoint.report() for url, endpoint in self.endpoints.items()}


def merge_snapshots(snapshots: Sequence[Mapping[str, EndpointReport]]) -> dict[str, EndpointReport]:
    """Several processes' snapshots (xdist workers) as one: counts add, latencies are weighted by requests."""
    merged: dict[str, EndpointReport] = {}
    latency: dict[str, float] = {}  #: per URL, seconds over all its requests
    ewmas: dict[str, list[float]] = {}
    for snapshot in snapshots:
        for url, part in snapshot.items():
            into = merged.setdefault(url, {"requests": 0, "errors": 0, "mean_latency_s": None,
                                           "ewma_latency_s": None, "ejections": 0, "rate_limited": 0,
                                           "rate_limit_wait_s": 0.0, "in_flight_limit": []})
            into["in_flight_limit"] += part.get("in_flight_limit") or []  # one record per process
            into["requests"] += part["requests"]
            into["errors"] += part["errors"]
            into["ejections"] += part["ejections"]
            into["rate_limited"] = into.get("rate_limited", 0) + (part.get("rate_limited") or 0)
            into["rate_limit_wait_s"] = round(into.get("rate_limit_wait_s", 0.0) + (part.get("rate_limit_wait_s") or 0.0), 3)
            latency[url] = latency.get(url, 0.0) + (part["mean_latency_s"] or 0.0) * part["requests"]
            if part["ewma_latency_s"] is not None:
                ewmas.setdefault(url, []).append(part["ewma_latency_s"])
    for url, part in merged.items():
        part["mean_latency_s"] = round(latency[url] / part["requests"], 4) if part["requests"] else None
        part["ewma_latency_s"] = round(sum(ewmas[url]) / len(ewmas[url]), 4) if ewmas.get(url) else None
    return merged
