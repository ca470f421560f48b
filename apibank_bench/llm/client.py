"""One chat-completion client for any OpenAI-compatible endpoint.

`http.py` does the HTTP (one POST per attempt, no retries of its own);
this module adds what a benchmark run needs around it: the retry policy of
`retry.py`, a limit on requests in flight learned per endpoint (`limit.Limiter`, shared by every
caller of one client, Agents SDK agents included: requests beyond what the server works on at
once wait here, not in its queue; it backs off on 429, 503 and resets), one
request for identical requests in flight at once, the choice among several base URLs
(`router.py`: by load, a retry elsewhere), per-call token/latency accounting and the
on-disk response cache (a hit makes no HTTP request; `completion.py` reads an answer from either), and
early stops (`breaker.py`): the run's circuit breaker and one instance's stop end retries at once;
answers are cached per deployment.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Sequence

from apibank_bench.core.redact import redact
from apibank_bench.llm.cache import ResponseCache, request_key
from apibank_bench.llm.config import ModelConfig
from apibank_bench.llm.failure import Failure, failure_of
from apibank_bench.llm.completion import Completion, read_completion
from apibank_bench.llm.http import APIConnectionError, APIStatusError, ChatEndpoint, ConnectionClosed, RateLimitError
from apibank_bench.llm.limit import INITIAL, WIDE_INITIAL, Limiter
from apibank_bench.core.text import SURROGATES
from apibank_bench.llm.retry import RetryPolicy, is_retryable
from apibank_bench.llm.router import EndpointReport, Router
from apibank_bench.llm.breaker import Breaker, Stopped, current_instance

#: Placeholder key for local servers, which accept any key (some servers want the header).
NO_KEY = "sk-no-key"


class ModelError(Exception):
    """The model could not answer this request; the caller records it for this instance only."""

    def __init__(self, message: str, completion: Completion):
        super().__init__(message)
        self.completion = completion

    @property
    def failure(self) -> Failure:
        """Its kind, as the request that failed named it."""
        return Failure(self.completion.failure or Failure.MODEL)


@dataclass
class UsageStats:
    """Totals over all calls of one client (thread-safe via `add`)."""

    calls: int = 0
    cache_hits: int = 0
    requests: int = 0  # HTTP requests, retries included
    retries: int = 0
    errors: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, completion: Completion) -> None:
        with self._lock:
            self.calls += 1
            self.cache_hits += completion.cached
            self.requests += completion.attempts
            self.retries += max(0, completion.attempts - 1)
            self.errors += completion.error is not None
            self.prompt_tokens += completion.prompt_tokens
            self.completion_tokens += completion.completion_tokens
            self.latency_s += completion.latency_s

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "_lock"}


@dataclass
class ClosedConnections:
    """Connections the server closed without an answer (resets, empty replies), and how many requests were in
    flight when it did: a server that closes connections under load (thread-safe via `add`)."""

    count: int = 0
    most_in_flight: int = 0  #: the most requests in flight when one was closed
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, in_flight: int) -> None:
        with self._lock:
            self.count += 1
            self.most_in_flight = max(self.most_in_flight, in_flight)


def fold_system(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """System messages joined and put in front of the first user message (as Gemma's own template does)."""
    system = "\n\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "system")
    rest = [dict(m) for m in messages if m.get("role") != "system"]
    if not system:
        return rest
    for message in rest:
        if message.get("role") == "user":
            message["content"] = f"{system}\n\n{message.get('content') or ''}"
            return rest
    return [{"role": "user", "content": system}, *rest]


def _sendable(value: Any) -> Any:
    """`value` with lone surrogates (which UTF-8 cannot carry) replaced by U+FFFD.

    A model may answer with one, and a team shows answers to other agents; as
    is, such a request could not even be encoded.
    """
    if isinstance(value, str):
        return SURROGATES.sub("\ufffd", value)
    if isinstance(value, dict):
        return {key: _sendable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_sendable(item) for item in value]
    return value


#: Statuses that say the endpoint is overloaded (or a proxy in front of it is): fewer requests in flight.
CONGESTION_STATUSES = (429, 502, 503, 504)


def is_congestion(exc: BaseException) -> bool:
    """Overload, not a bad request: 429/502/503/504, a reset or refused connection, a timeout."""
    if isinstance(exc, APIConnectionError):
        return True
    return isinstance(exc, APIStatusError) and exc.status_code in CONGESTION_STATUSES


def describe_error(exc: BaseException, secrets: Sequence[str | None] = ()) -> str:
    """One line for a failed request, without the key (an endpoint may echo it) or URL credentials."""
    status = getattr(exc, "status_code", None)
    prefix = f"HTTP {status}: " if status else ""
    return redact(f"{prefix}{type(exc).__name__}: {exc}", secrets)


class ChatClient:
    """Thread-safe; share one instance between the worker threads of a run.

    `retry_base_delay` / `retry_max_delay` shape the backoff (see `RetryPolicy`,
    kept as `.retry` for other callers); `limiter` is the gate that limits
    requests in flight (default: one learning each endpoint's limit under the ceiling
    `config.ceiling` for this client; pass one to several clients to limit them together).
    `breaker` stops every request once the endpoint has answered nothing for
    `config.down_after` seconds while requests kept failing (`breaker.on_trip` tells the run);
    `sleep` replaces the wait between attempts (tests), which otherwise ends early
    when the run or the request's instance stops.
    """

    def __init__(
        self,
        config: ModelConfig,
        *,
        retry_base_delay: float = 1.0,
        retry_max_delay: float = 30.0,
        limiter: Limiter | None = None,
        sleep: Callable[[float], None] | None = None,
        breaker: Breaker | None = None,
    ):
        if not config.base_urls:
            raise ValueError("ModelConfig.base_urls is empty (start the local server first)")
        if not config.model:
            raise ValueError("ModelConfig.model is empty")
        self.config = config
        self._sleep = sleep
        self.retry = RetryPolicy(config.max_retries, retry_base_delay, retry_max_delay, self._wait)
        # A batching server (vLLM, SGLang) starts wide; any other (llama.cpp's slots, Ollama, a hosted API
        # whose kind is unknown) at a few, so that a one-at-a-time server's first answers come within the timeout.
        initial = WIDE_INITIAL if config.kind.batches else INITIAL
        self.limiter = limiter if limiter is not None else Limiter(config.ceiling, config.sharing, initial,
                                                                   one_slot=config.one_slot)
        self.breaker = breaker if breaker is not None else Breaker(config.down_after)
        self.waiting = 0  #: requests waiting to retry now (the progress line shows them)
        self.abandoned: str | None = None  #: why every request was abandoned (`abandon`), once they were
        self._waiting_lock = threading.Lock()
        self._throttled = threading.local()  #: `.url`: the endpoint whose 429 this thread's next wait honours
        self._in_flight: dict[str, Future[Completion]] = {}  # cache key -> the request being made for it
        self._in_flight_lock = threading.Lock()
        self.stats = UsageStats()
        self.closed = ClosedConnections()
        self.cache = ResponseCache(config.cache_dir) if config.cache_dir is not None else None
        self._endpoints = {url: ChatEndpoint(url, config.api_key or NO_KEY, config.timeout)
                           for url in config.base_urls}
        self.router = Router(config.base_urls, config.routing)

    def endpoint_report(self) -> dict[str, EndpointReport]:
        """Per endpoint: the router's counts and, under `in_flight_limit`, how the learned limit moved
        (one record per process: `merge_snapshots` joins the workers')."""
        limits = self.limiter.report()
        return {url: {**counts, "in_flight_limit": [limits[url]] if url in limits else []}
                for url, counts in self.router.snapshot().items()}

    # -- stopping early ----------------------------------------------------------------

    def in_flight_limit(self) -> int:
        """The requests this client lets in flight now (the limiter's current limit)."""
        return self.limiter.limit

    def abandon(self, reason: str) -> None:
        """Stop now, without waiting for the server: requests in flight are cut off (their sockets shut down),
        none is made or retried from now on, and none of it counts as the endpoint's failure. For a run that
        ends (Ctrl-C, SIGTERM, the session's end): what is in flight then would never get a row anyway."""
        self.abandoned = self.abandoned or reason
        for endpoint in self._endpoints.values():
            endpoint.abort()

    def _check_stop(self) -> None:
        """Raise Stopped if the run (abandoned, or its breaker) or this request's instance has stopped."""
        if self.abandoned:
            raise Stopped(f"abandoned: {self.abandoned}", "run")
        if self.breaker.reason:
            raise Stopped(f"the run was stopped: {self.breaker.reason}", "run")
        instance = current_instance()
        if instance is not None and instance.cause:
            raise Stopped(f"not asked: another request of this instance failed ({instance.cause})", "instance")

    def _wait(self, seconds: float) -> None:
        """The wait before a retry; it ends early, raising Stopped, when the run or the instance stops. After a
        429 the router counts the time waited against that endpoint (summary.json's `rate_limit_wait_s`)."""
        throttled, self._throttled.url = getattr(self._throttled, "url", None), None
        began = time.monotonic()
        with self._waiting_lock:
            self.waiting += 1
        try:
            if self._sleep is not None:
                self._sleep(seconds)
            else:
                deadline = time.monotonic() + seconds
                while (left := deadline - time.monotonic()) > 0:
                    self.breaker.check()  # the endpoint may be found down while every request waits to retry
                    self._check_stop()
                    time.sleep(min(left, 0.05))
            self._check_stop()
        finally:
            with self._waiting_lock:
                self.waiting -= 1
            if throttled:
                self.router.waited(throttled, seconds if self._sleep is not None else time.monotonic() - began)

    def request_body(
        self, messages: Sequence[dict[str, Any]], *, extra_body: dict[str, Any] | None = None,
        seed: int | None = None, tools: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """The whole request as sent (and hashed for the cache); `tools` only when there are some."""
        cfg = self.config
        body = {
            "model": cfg.model,
            "messages": _sendable(fold_system(messages) if cfg.fold_system else [dict(m) for m in messages]),
            "temperature": cfg.temperature,
            "top_p": cfg.top_p,
            "max_tokens": cfg.max_tokens,
            "seed": cfg.seed if seed is None else seed,
            # The server-specific sampling fields, then the user's --extra-body, then this call's grammar.
            "extra_body": {**cfg.sampling(), **cfg.extra_body, **(extra_body or {})},
        }
        if tools:
            body["tools"] = list(tools)
        return body

    def cache_key(self, body: dict[str, Any]) -> str:
        """The request's key in the response cache. The deployment is part of it: another server's
        answers under the same model name are not this one's."""
        return request_key({**body, "deployment": self.config.deployment or sorted(self.config.base_urls)})

    def complete(
        self, messages: Sequence[dict[str, Any]], *, extra_body: dict[str, Any] | None = None,
        seed: int | None = None, tools: list[dict[str, Any]] | None = None,
    ) -> Completion:
        """Answer one chat request; raise ModelError (with `.completion`) if it cannot.

        `tools` (OpenAI function tools) go into the request, and so into the cache key.
        """
        started = time.monotonic()
        body = self.request_body(messages, extra_body=extra_body, seed=seed, tools=tools)
        key = self.cache_key(body) if self.cache is not None else ""
        if self.cache is not None:
            entry = self.cache.get(key)
            if entry is not None:
                completion = Completion.from_cache(entry, time.monotonic() - started)
                self.stats.add(completion)
                return completion

        completion = self._request_once(key, body, started)
        self.stats.add(completion)
        if completion.error is not None:
            instance = current_instance()
            if instance is not None and completion.stopped != "instance":
                instance.fail(completion.error, completion.failure)  # an error row: its other requests stop
            raise ModelError(completion.error, completion)
        if self.cache is not None and (completion.text or completion.tool_calls):  # an empty answer is asked again
            self.cache.put(key, completion.cache_entry(body))
        return completion

    def _request_once(self, key: str, body: dict[str, Any], started: float) -> Completion:
        """`_request`, except that a request identical to one in flight waits for that one's answer
        (with the cache on: the answer is the same either way, and it is paid for once)."""
        if not key:
            return self._request(body, started)
        with self._in_flight_lock:
            pending = self._in_flight.get(key)
            owner = pending is None
            if pending is None:
                pending = self._in_flight[key] = Future()
        if not owner:
            shared = pending.result()
            if shared.stopped == "instance":  # the owner's instance stopped, not ours: ask for ourselves
                return self._request_once(key, body, started)
            return dataclasses.replace(shared, latency_s=time.monotonic() - started, attempts=0, cached=True)
        try:
            completion = self._request(body, started)
            pending.set_result(completion)
            return completion
        except BaseException as exc:
            pending.set_exception(exc)
            raise
        finally:
            with self._in_flight_lock:
                self._in_flight.pop(key, None)

    def _request(self, body: dict[str, Any], started: float) -> Completion:
        # What goes on the wire: the fields, with extra_body merged in at the top (as openai's SDK sends it).
        sent_body = {**{k: v for k, v in body.items() if k != "extra_body"}, **body["extra_body"]}
        attempts, url = 0, ""

        def attempt() -> Completion:
            nonlocal attempts, url
            self._check_stop()
            # a slot at an endpoint with room (limit.py), the router choosing among those; a retry goes elsewhere
            with self.limiter.slot(self.router.urls, lambda room: self.router.request(avoid=url, among=room)) as slot:
                self._check_stop()  # the run may have stopped while this request waited for a slot
                attempts += 1
                url = slot.url
                sent = self.breaker.sent()  # the request's clock (and its timeout's) starts now, not while waiting
                try:
                    completion = read_completion(self._endpoints[url].create(sent_body), url, attempts, started)
                except BaseException as exc:
                    if self.abandoned:  # cut off by `abandon`: not the endpoint's failure, nor congestion
                        self.breaker.done(sent, throttled=True)  # (counted as neither success nor failure)
                        raise Stopped(f"abandoned: {self.abandoned}", "run") from None
                    slot.congested = is_congestion(exc)
                    self._throttled.url = url if isinstance(exc, RateLimitError) else None
                    if isinstance(exc, ConnectionClosed):
                        self.closed.add(self.limiter.active)
                    self.breaker.done(sent, describe_error(exc, [self.config.api_key]),
                                      throttled=isinstance(exc, RateLimitError))  # a throttling endpoint is alive
                    raise
                slot.answered(time.monotonic() - slot.sent, completion.completion_tokens)
                self.breaker.done(sent)
            return completion

        try:
            return self.retry.call(attempt)
        except Stopped as exc:
            return Completion(text="", latency_s=time.monotonic() - started, attempts=attempts, base_url=url,
                              error=str(exc.args[0]), stopped=exc.args[1], failure=Failure.INTERRUPTED)
        except Exception as exc:  # noqa: BLE001 - every failure becomes this request's error
            error = describe_error(exc, [self.config.api_key])
            if is_retryable(exc):
                error = f"gave up after {attempts} attempts: {error}"
            return Completion(text="", latency_s=time.monotonic() - started, attempts=attempts,
                              base_url=url, error=error, failure=failure_of(exc))
