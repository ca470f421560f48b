"""A real HTTP server on 127.0.0.1 that speaks OpenAI chat completions, for tests.

Answers are scripted per request (a queue of `Reply`, then `default`); every
request is recorded (`requests`), and the number of requests being handled at
the same time is tracked (`max_concurrent`).

It also injects faults: error statuses with any body (`error`, `echo_key`),
connections closed without a response (`reset`), slow, empty (`content: null`),
surrogate-bearing and oversized answers, bodies cut off halfway (`cut`), and a server
that dies (`dead_after=N`: the request after the first N is reset and later ones are
refused). `port` fixes the port (a server restarted where it was). A slow answer notices a
client that leaves before it is ready (`closed_early`), as a real server does.

Like a real local server (llama-cpp-python's: one completion at a time; llama.cpp's
`llama-server`: its slots; vLLM at its batch limit), `slots=K` works on K completions at
once and queues the rest in arrival order, each taking `hold` seconds of service once it
has a slot; `backlog=B` answers 503 to a request that finds B already waiting. The
server records its queue as each request arrives (`queue_seen`: how many were waiting
for a slot, itself included; `max_queued`) and how long each waited (`waits`). Failures (error statuses, resets) are
answered at once, before the queue, as a server still loading or a proxy in front of
it does: `burst(40, error(503))` as the first replies fails the first 40 requests.

The run's system-message probe (two one-token requests, `llm.probe.probe_system`) is answered at once, outside
the script, the queue and `requests` (kept in `probes`), with prompt tokens counted as words of the messages
its chat template keeps: all of them, or none of the system ones with `drops_system=True` (as
llama-cpp-python's `gemma` chat format does).
"""

from __future__ import annotations

import json
import select
import socket
import struct
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from apibank_bench.llm.probe import SYSTEM_PROBE_USER


@dataclass
class Reply:
    text: str | None = "[GetToday()]"  # None: `content: null`
    status: int = 200
    delay: float = 0.0  # seconds to sleep before answering
    raw: bytes | None = None  # body sent as is (for malformed answers, or an error's own body)
    headers: dict[str, str] = field(default_factory=dict)
    tool_calls: list[dict[str, Any]] | None = None  # OpenAI `tool_calls` ({name, arguments}) instead of text
    reset: bool = False  # close the connection without any response
    echo_key: bool = False  # the error body repeats the request's Authorization header, as some servers do
    cut: bool = False  # send the headers and half the body, then reset the connection
    finish_reason: str | None = None  # the choice's finish_reason (default: "stop", or "tool_calls")


def correct(text: str = "[GetToday()]") -> Reply:
    return Reply(text=text)


def wrong(text: str = "[AddAlarm(time='never')]") -> Reply:
    return Reply(text=text)


def malformed() -> Reply:
    return Reply(raw=b"{this is not json", headers={"Content-Type": "application/json"})


def slow(delay: float, text: str = "[GetToday()]") -> Reply:
    return Reply(text=text, delay=delay)


def tool_call(name: str, arguments: dict[str, Any] | str | None = None, *more: tuple[str, Any]) -> Reply:
    """A `tool_calls` answer: one call (arguments as a dict or raw JSON text), then `more` (name, arguments)."""
    calls = [(name, arguments), *more]
    return Reply(text="", tool_calls=[
        {"name": n, "arguments": a if isinstance(a, str) else json.dumps(a or {})} for n, a in calls
    ])


#: How a model writes one tool call in each common format: the raw text a server's tool parser reads
#: (hermes: Qwen 2.5/3, Hermes; llama3_json: Llama 3.1/3.2; mistral: Mistral 7B v0.3's tokenizer).
RAW_TOOL_FORMATS = ("hermes", "llama3_json", "mistral")


def raw_tool_text(format: str, name: str, arguments: dict[str, Any]) -> str:
    call = {"name": name, "parameters" if format == "llama3_json" else "arguments": arguments}
    if format == "hermes":
        return f"<tool_call>\n{json.dumps(call)}\n</tool_call>"
    if format == "mistral":
        return f"[TOOL_CALLS] [{json.dumps(call)}]"
    return json.dumps(call)


def vllm_tool_reply(format: str, name: str, arguments: dict[str, Any], parsed: bool = True) -> Reply:
    """vLLM's answer to a model that wrote one tool call in `format`: with a tool parser that reads it
    (`--tool-call-parser hermes|llama3_json|mistral`), the call in `tool_calls` and `content` null, the
    arguments re-serialized as JSON; without one, or a parser that failed on it, the raw text in `content`."""
    if parsed:
        return Reply(text=None, tool_calls=[{"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)}])
    return Reply(text=raw_tool_text(format, name, arguments))


def error(status: int, headers: dict[str, str] | None = None, body: str | bytes | None = None) -> Reply:
    raw = body.encode() if isinstance(body, str) else body
    return Reply(status=status, headers=headers or {}, raw=raw)


def echo_key(status: int = 401) -> Reply:
    return Reply(status=status, echo_key=True)


def reset() -> Reply:
    return Reply(reset=True)


def cut(text: str = "[GetToday()]") -> Reply:
    """A 200 answer whose body stops halfway (the connection is reset)."""
    return Reply(text=text, cut=True)


def empty() -> Reply:
    """A 200 answer whose message content is null."""
    return Reply(text=None)


def surrogate(text: str = "[GetToday(x='\ud800')] \udfff") -> Reply:
    return Reply(text=text)  # sent as \ud800-style escapes, legal JSON


def oversized(size: int = 10_000_000) -> Reply:
    return Reply(text="[GetToday()]" + "x" * size)


def burst(count: int, reply: Reply | None = None) -> list[Reply]:
    """The first `count` requests' replies: a failure each (503 unless told), e.g. `OpenAIStub(*burst(40))`."""
    return [reply or Reply(status=503)] * count


def completion_body(text: str, model: str = "stub-model", prompt_tokens: int = 11, completion_tokens: int = 7,
                    tool_calls: list[dict[str, Any]] | None = None, finish_reason: str | None = None) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": text}  # text None: content null
    if tool_calls:
        message = {"role": "assistant", "content": text or None, "tool_calls": [
            {"id": f"call_{i}", "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for i, c in enumerate(tool_calls)
        ]}
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{
            "index": 0,
            "message": message,
            "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop"),
        }],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # a burst of new connections (a team's requests at once) is not refused


class OpenAIStub:
    def __init__(self, *replies: Reply, default: Reply | Callable[[dict], Reply] = Reply(), hold: float = 0.0,
                 dead_after: int | None = None, owned_by: str | None = None, port: int = 0,
                 slots: int | None = None, backlog: int | None = None, drops_system: bool = False):
        self.script: deque[Reply] = deque(replies)
        self.default = default
        self.hold = hold  # extra seconds every request takes (for concurrency tests)
        self.dead_after = dead_after  # chat requests answered before the server dies
        self.owned_by = owned_by  # what /models says owns the model ("vllm", "openai"...; None: no such field)
        self.port = port
        self.slots = slots  # completions worked on at once (None: every request at once)
        self.backlog = backlog  # requests allowed to wait for a slot before more are answered 503 (None: no bound)
        self.queue_seen: list[int] = []  # at each queued request's arrival: requests waiting for a slot, itself included
        self.max_queued = 0
        self.waits: list[tuple[float, float]] = []  # per queued request: (arrival, seconds it waited for a slot)
        self.rejected = 0  # answered 503 because the backlog was full
        self._tickets = 0  # queued requests, in arrival order
        self._started = 0  # ... of which given a slot
        self._finished = 0  # ... of which done with it
        self._slot_free = threading.Condition(threading.Lock())
        self.requests: list[dict[str, Any]] = []
        self.drops_system = drops_system  # the chat template drops system messages (the probe sees it)
        self.probes: list[dict[str, Any]] = []  # the system-message probe's requests
        self.active = 0
        self.max_concurrent = 0
        self.closed_early = 0  # requests whose client closed the connection before the answer was ready
        self.last_answer = 0.0  # when the last request was answered (monotonic)
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- scripting -------------------------------------------------------
    def push(self, *replies: Reply) -> None:
        with self._lock:
            self.script.extend(replies)

    def _next_reply(self, body: dict) -> Reply:
        with self._lock:
            if self.script:
                return self.script.popleft()
        return self.default(body) if callable(self.default) else self.default

    def _serve_in_turn(self, delay: float) -> bool:
        """Wait for a slot in arrival order, then take `hold` (+ `delay`) seconds of service; False if the backlog
        was full (not served)."""
        with self._slot_free:
            waiting = self._tickets - self._started
            if self.backlog is not None and waiting >= self.backlog:
                self.rejected += 1
                return False
            ticket = self._tickets
            self._tickets += 1
            arrived = time.monotonic()
            self.queue_seen.append(waiting + 1 if ticket >= self._finished + self.slots else 0)
            self.max_queued = max(self.max_queued, self.queue_seen[-1])
            while ticket >= self._finished + self.slots:
                self._slot_free.wait()
            self._started += 1
            self.waits.append((arrived, time.monotonic() - arrived))
        try:
            time.sleep(self.hold + delay)
        finally:
            with self._slot_free:
                self._finished += 1
                self._slot_free.notify_all()
        return True

    def _is_probe(self, body: dict) -> bool:
        messages = body.get("messages") if isinstance(body, dict) else None
        return bool(messages) and body.get("max_tokens") == 1 and messages[-1].get("content") == SYSTEM_PROBE_USER

    def _probe_answer(self, body: dict) -> dict:
        kept = [m for m in body["messages"] if not (self.drops_system and m.get("role") == "system")]
        with self._lock:
            self.probes.append(body)
        return completion_body("Yes", body.get("model", "stub-model"), completion_tokens=1,
                               prompt_tokens=sum(len(str(m.get("content")).split()) + 3 for m in kept))

    @property
    def url(self) -> str:
        assert self._server is not None, "stub not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        return [r["json"] for r in self.requests if r["path"].endswith("/chat/completions")]

    def kill(self) -> None:
        """Stop listening at once: connections are refused from now on (the URL stays)."""
        server = self._server
        if server is not None and not getattr(server, "dead", False):
            server.dead = True
            threading.Thread(target=lambda: (server.shutdown(), server.server_close()), daemon=True).start()

    # -- lifecycle -------------------------------------------------------
    def start(self) -> "OpenAIStub":
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def _send(self, status: int, payload: bytes, headers: dict[str, str]) -> None:
                try:
                    self.send_response(status)
                    headers = {"Content-Type": "application/json", **headers}
                    for key, value in headers.items():
                        self.send_header(key, value)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

            def _cut(self, payload: bytes) -> None:
                """The headers of the whole body, half of it, then a reset."""
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload[: len(payload) // 2])
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass
                self._reset()

            def _reset(self) -> None:
                """Close the socket with a TCP reset and no response at all."""
                try:
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.connection.close()
                except OSError:
                    pass
                self.close_connection = True

            def _wait(self, seconds: float) -> bool:
                """Take `seconds` to answer, as a server computing it would; False if the client closed the
                connection meanwhile (counted in `closed_early`, as a real server notices a disconnect)."""
                deadline = time.monotonic() + seconds
                while (left := deadline - time.monotonic()) > 0:
                    readable, _, _ = select.select([self.connection], [], [], left)
                    if readable:  # the request was read whole: only its end (EOF or reset) can be readable
                        try:
                            gone = not self.connection.recv(1, socket.MSG_PEEK)
                        except OSError:
                            gone = True
                        if gone:
                            with stub._lock:
                                stub.closed_early += 1
                            self.close_connection = True
                            return False
                        time.sleep(min(left, 0.01))  # pipelined bytes (no client of ours sends any)
                return True

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    model = {"id": "stub-model", "object": "model"}
                    if stub.owned_by is not None:
                        model["owned_by"] = stub.owned_by
                    body = {"object": "list", "data": [model]}
                    self._send(200, json.dumps(body).encode(), {})
                else:
                    self._send(404, b'{"error": {"message": "not found"}}', {})

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"_unparsed": raw.decode("utf-8", "replace")}
                if stub._is_probe(body):
                    return self._send(200, json.dumps(stub._probe_answer(body)).encode(), {})
                with stub._lock:
                    stub.requests.append({"path": self.path, "json": body, "time": time.monotonic()})
                    stub.active += 1
                    stub.max_concurrent = max(stub.max_concurrent, stub.active)
                    dying = stub.dead_after is not None and len(stub.requests) > stub.dead_after
                done: list[bool] = []

                def answered() -> None:
                    """The request stops counting as in flight before its answer is written: once the client
                    has the answer it may send the next one, and that one must not find this one counted."""
                    if not done:
                        done.append(True)
                        with stub._lock:
                            stub.active -= 1
                            stub.last_answer = time.monotonic()

                try:
                    if dying:
                        stub.kill()
                        answered()
                        return self._reset()
                    reply = stub._next_reply(body)
                    if stub.slots and not (reply.reset or reply.status >= 400):
                        if not stub._serve_in_turn(reply.delay):
                            answered()
                            return self._send(503, b'{"error": {"message": "server busy: backlog full"}}', {})
                    elif not self._wait(stub.hold + reply.delay):
                        return  # the client is gone: nobody to answer
                    answered()
                    if reply.reset:
                        return self._reset()
                    if reply.echo_key:
                        payload = json.dumps({"error": {
                            "message": f"invalid credentials: {self.headers.get('Authorization')}", "type": "stub",
                        }}).encode()
                    elif reply.raw is not None:
                        payload = reply.raw
                    elif reply.status >= 400:
                        payload = json.dumps({"error": {
                            "message": f"scripted error {reply.status}", "type": "stub", "code": reply.status,
                        }}).encode()
                    else:
                        payload = json.dumps(completion_body(reply.text, body.get("model", "stub-model"),
                                                            tool_calls=reply.tool_calls,
                                                            finish_reason=reply.finish_reason)).encode()
                    if reply.cut:
                        return self._cut(payload)
                    self._send(reply.status, payload, reply.headers)
                finally:
                    answered()

        server = _Server(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        server.block_on_close = False
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="openai-stub", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> "OpenAIStub":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
