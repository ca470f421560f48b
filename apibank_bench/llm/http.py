"""The HTTP of a chat completion: one POST to `<base_url>/chat/completions`, over the standard library.

This is all of the OpenAI protocol a run needs (Agents SDK agents reach the endpoint
through `ChatClient` too), so the `openai` package stays off the request path. The body
sent is the one `openai.OpenAI().chat.completions.create` sends (`extra_body` merged at the
top level), with the same `Authorization: Bearer` key.

The request goes through `urllib.request`, as the endpoint probe's does (`probe.py`): the
proxy the environment names (`HTTPS_PROXY`, `NO_PROXY`...), the system's certificates
(`SSL_CERT_FILE`), a connection of its own per request, and no redirects followed (a 3xx is
an error, as with the SDK's client). A run makes hundreds of requests from as many threads
under one GIL, so their CPU is the run's wall time: against a local server one request cost
0.55 ms of CPU here, against 1.1 ms through httpx2 (the SDK's HTTP client) and 5.7 ms through
the SDK, and importing httpx2's transport (h2's tables among it) cost 0.2 s of every run's
start. A connection per request costs a TCP (or TLS) handshake, small beside a completion's
seconds. `benchmarks/bench_llm_pieces.py` weighs this module against httpx and httpx2 (figures in
docs/architecture.md, "Hand-built parts, weighed").

Errors are this module's own, named after the SDK's classes so that an error row reads
as the SDK's would: `APIConnectionError` (no connection; `ConnectionClosed`: a reset, an answer cut off),
`APITimeoutError` (one of those), `APIStatusError` (a non-2xx answer, with its
`status_code` and `response`, whose Retry-After the retry policy reads), and a subclass
per status (`RateLimitError` for 429, `InternalServerError` for 5xx, ...). A 400 that says the
prompt does not fit the server's context is a `ContextLengthError`, whose message names both
sizes and what to change (servers word it differently: see `context_overflow`).

A run that stops (Ctrl-C, SIGTERM) does not wait for the server: `ChatEndpoint.abort` shuts
down the sockets of the requests in flight, so a thread blocked reading a slow answer wakes
at once (with an `APIConnectionError`), and refuses every later connection. Closing a socket
from another thread would not wake its reader; shutting it down does.
"""

from __future__ import annotations

import functools
import http.client
import json
import re
import socket
import ssl
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass
from email.message import Message
from typing import Any, Callable, Mapping

#: How much of an error's body the message keeps (an HTML error page can be long).
ERROR_BODY_CHARS = 500


class APIError(Exception):
    """Any failed request."""


class APIConnectionError(APIError):
    def __init__(self, message: str = "Connection error.") -> None:
        super().__init__(message)


class ConnectionClosed(APIConnectionError):
    """The server closed the connection without a whole answer (a reset, an empty reply, a body cut off): what
    a server does when more connections arrive than it can take (a full accept queue, a proxy's limit)."""


#: The errors of a connection the server closed (a refused one is not: nobody took it).
_CLOSED = (ConnectionResetError, ConnectionAbortedError, BrokenPipeError)


class APITimeoutError(APIConnectionError):
    def __init__(self) -> None:
        super().__init__("Request timed out.")


@dataclass(frozen=True)
class ErrorAnswer:
    """A non-2xx answer, as much of it as the error and the retry policy read."""

    status_code: int
    headers: Mapping[str, str] | Message  #: a Message (urllib's) is case-insensitive
    text: str


class APIStatusError(APIError):
    """The server answered with a non-2xx status."""

    def __init__(self, message: str, response: ErrorAnswer) -> None:
        super().__init__(message)
        self.response = response
        self.status_code = response.status_code


class BadRequestError(APIStatusError): ...
class AuthenticationError(APIStatusError): ...
class PermissionDeniedError(APIStatusError): ...
class NotFoundError(APIStatusError): ...
class ConflictError(APIStatusError): ...
class UnprocessableEntityError(APIStatusError): ...
class RateLimitError(APIStatusError): ...
class InternalServerError(APIStatusError): ...


class ContextLengthError(BadRequestError):
    """HTTP 400: the prompt (with room for the completion) does not fit the server's context."""

    def __init__(self, message: str, response: ErrorAnswer, prompt_tokens: int | None, context_tokens: int | None,
                 completion_tokens: int | None = None) -> None:
        super().__init__(message, response)
        self.prompt_tokens, self.context_tokens = prompt_tokens, context_tokens
        self.completion_tokens = completion_tokens


#: How servers say a request does not fit their context (each answers HTTP 400), with the sizes they name.
#: OpenAI, vLLM and llama-cpp-python's server: "This model's maximum context length is N tokens. However, you
#: requested T tokens (P in the messages, C in the completion)" / "your messages resulted in P tokens" /
#: "your request has P input tokens" / "you requested C output tokens and your prompt contains at least P
#: input tokens"; llama.cpp's server: "request (P tokens) exceeds the available context size (N tokens)", with
#: `n_prompt_tokens` and `n_ctx` fields (older builds: the same words without the numbers); SGLang:
#: "Requested token count exceeds the model's maximum context length of N tokens. You requested a total of T
#: tokens: P tokens from the input messages and C tokens for the completion", or "The input (P tokens) is
#: longer than the model's context length (N tokens)". Matched on the lowercased text.
_CONTEXT = re.compile(r"maximum context length (?:is|of) (\d+)|available context size \((\d+) tokens\)"
                      r"|model's context length \((\d+) tokens\)")
_PROMPT = re.compile(r"(\d+) in the messages|messages resulted in (\d+) tokens|has (\d+) input tokens"
                     r"|at least (\d+) input tokens|request \((\d+) tokens\)|input \((\d+) tokens\)"
                     r"|(\d+) tokens from the input|(\d+) in your prompt")
_COMPLETION = re.compile(r"(\d+) in the completion|requested (\d+) output tokens"
                         r"|(\d+) (?:tokens )?for the completion|too large: (\d+)")
_OVERFLOW_WORDS = ("context length", "context size", "context_length_exceeded", "exceed_context_size_error")


def _first_number(pattern: re.Pattern[str], text: str) -> int | None:
    match = pattern.search(text)
    return int(next(group for group in match.groups() if group)) if match else None


def context_overflow(status: int, body: Any, text: str) -> tuple[int | None, int | None, int | None] | None:
    """(prompt, context, completion) tokens as the server names them (None where it names none) if a 400 says
    the request does not fit the context; None for any other answer."""
    text = text.lower()
    if status != 400 or not any(word in text for word in _OVERFLOW_WORDS):
        return None
    fields = body if isinstance(body, dict) else {}
    prompt, context = fields.get("n_prompt_tokens"), fields.get("n_ctx")  # llama.cpp's server
    return (prompt if isinstance(prompt, int) else _first_number(_PROMPT, text),
            context if isinstance(context, int) else _first_number(_CONTEXT, text),
            _first_number(_COMPLETION, text))


def _overflow_message(prompt: int | None, context: int | None, completion: int | None) -> str:
    """What to do about a request that does not fit, with both sizes."""
    def size(tokens: int | None) -> str:
        return f"{tokens} tokens" if tokens is not None else "a size it did not say"

    needs = f"the prompt ({size(prompt)})" + (f" plus the completion's max_tokens ({completion})" if completion else "")
    return (f"{needs} does not fit the server's context ({size(context)}): start the server with a larger context "
            "(llama.cpp's llama-server -c, llama-cpp-python --n_ctx, vLLM --max-model-len, SGLang --context-length, "
            "Ollama num_ctx) or lower --max-tokens")


_BY_STATUS = {400: BadRequestError, 401: AuthenticationError, 403: PermissionDeniedError, 404: NotFoundError,
              409: ConflictError, 422: UnprocessableEntityError, 429: RateLimitError}


def status_error(response: ErrorAnswer) -> APIStatusError:
    """The error for a non-2xx answer; its message is the server's body, which says why."""
    text = response.text.strip()
    try:
        body: Any = json.loads(text)
    except ValueError:
        body = text
    if isinstance(body, dict) and "error" in body:  # OpenAI's `{"error": {...}}` envelope
        body = body["error"]
    detail = str(body)[:ERROR_BODY_CHARS] if body not in ("", None) else "(no body)"
    overflow = context_overflow(response.status_code, body, text)
    if overflow is not None:
        return ContextLengthError(f"Error code: 400 - {_overflow_message(*overflow)} (the server said: {detail})",
                                  response, *overflow)
    kind = InternalServerError if response.status_code >= 500 else _BY_STATUS.get(response.status_code,
                                                                                  APIStatusError)
    return kind(f"Error code: {response.status_code} - {detail}", response)


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A 3xx is the answer, as with the SDK's client: a chat request is not re-sent elsewhere."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # urllib then raises the 3xx as an HTTPError


class OpenSockets:
    """The sockets of one endpoint's requests in flight; `abort` shuts them all down, and every socket opened
    after it, so no request outlives it by more than a context switch."""

    def __init__(self) -> None:
        self.aborted = False
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()

    def opened(self, sock: socket.socket, mine: list[socket.socket]) -> socket.socket:
        with self._lock:
            if not self.aborted:
                self._open.add(sock)
                mine.append(sock)
                return sock
        _shut(sock)  # the request then fails at its first read or write
        return sock

    def closed(self, mine: list[socket.socket]) -> None:
        with self._lock:
            self._open.difference_update(mine)

    def abort(self) -> None:
        with self._lock:
            self.aborted = True
            sockets, self._open = list(self._open), set()
        for sock in sockets:
            _shut(sock)


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # already closed (its fd is gone: shutting down cannot reach another socket)
        pass


class _TrackedHTTP(http.client.HTTPConnection):
    """A connection that registers its sockets (the TCP one, then the TLS one over it) with its request's
    endpoint: urllib hands the socket to the response and drops it from the connection, so the connection
    itself could not be closed later."""

    _create_connection: Callable[..., socket.socket]  #: set by HTTPConnection (socket.create_connection)

    def __init__(self, *args: Any, sockets: OpenSockets, mine: list[socket.socket], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        create = self._create_connection
        self._create_connection = lambda *a, **k: sockets.opened(create(*a, **k), mine)
        self._register = functools.partial(sockets.opened, mine=mine)

    def connect(self) -> None:
        super().connect()
        if self.sock is not None:  # TLS wraps the TCP socket into a new object (a socket of its own)
            self._register(self.sock)


class _TrackedHTTPS(_TrackedHTTP, http.client.HTTPSConnection): ...


class _ChatRequest(urllib.request.Request):
    """A request with its endpoint's open sockets, and its own (registered as its connection opens them)."""

    def __init__(self, url: str, data: bytes, headers: dict[str, str], sockets: OpenSockets) -> None:
        super().__init__(url, data=data, headers=headers, method="POST")
        self.sockets = sockets
        self.mine: list[socket.socket] = []


class _TrackingHTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        if not isinstance(req, _ChatRequest):  # (the opener sends nothing else)
            return super().http_open(req)
        return self.do_open(functools.partial(_TrackedHTTP, sockets=req.sockets, mine=req.mine), req)


class _TrackingHTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, context: ssl.SSLContext | None = None) -> None:
        super().__init__(context=context)
        self._tls = context  #: (HTTPSHandler keeps it too, privately)

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        if not isinstance(req, _ChatRequest):
            return super().https_open(req)
        return self.do_open(functools.partial(_TrackedHTTPS, sockets=req.sockets, mine=req.mine), req,
                            context=self._tls)


class ChatEndpoint:
    """One base URL's chat completions; thread-safe (nothing is shared between requests but the opener,
    whose handlers keep no state, and the set of open sockets)."""

    def __init__(self, base_url: str, api_key: str, timeout: float) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self._headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json",
                         "Accept": "application/json"}
        self._timeout = timeout  #: seconds for the connection and for each read, as the SDK's timeout
        self._opener = urllib.request.build_opener(_NoRedirects, _TrackingHTTPHandler, _TrackingHTTPSHandler)
        self._sockets = OpenSockets()

    def abort(self) -> None:
        """End every request in flight now, and every later one at once (each fails with APIConnectionError)."""
        self._sockets.abort()

    def create(self, body: dict[str, Any]) -> Any:
        """POST one chat request; the parsed JSON answer of a 2xx (MalformedResponse if it is not JSON)."""
        request = _ChatRequest(self.url, json.dumps(body).encode("utf-8"), self._headers, self._sockets)
        try:
            with self._opener.open(request, timeout=self._timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            raise status_error(ErrorAnswer(exc.code, exc.headers, _body_text(exc))) from None
        except urllib.error.URLError as exc:  # refused, unresolvable, a TLS failure, or a connect timeout
            if isinstance(exc.reason, TimeoutError):
                raise APITimeoutError() from None
            if isinstance(exc.reason, _CLOSED):  # closed while the request was being sent
                raise ConnectionClosed(f"Connection error: {_describe(exc.reason)}") from None
            raise APIConnectionError(f"Connection error: {_describe(exc.reason)}") from None
        except TimeoutError:  # a read that waited longer than the timeout
            raise APITimeoutError() from None
        except (http.client.HTTPException, *_CLOSED) as exc:  # a reset, or the answer cut off mid-body
            raise ConnectionClosed(f"Connection error: {_describe(exc)}") from None
        except OSError as exc:
            raise APIConnectionError(f"Connection error: {_describe(exc)}") from None
        finally:
            self._sockets.closed(request.mine)
        try:
            return json.loads(raw)
        except ValueError:
            text = raw.decode("utf-8", "replace")
            quoted = json.dumps(text[:200], ensure_ascii=False) + ("..." if len(text) > 200 else "")
            raise MalformedResponse(f"not a chat completion: not JSON: {quoted}") from None


def _describe(reason: object) -> str:
    return f"{type(reason).__name__}: {reason}" if isinstance(reason, BaseException) else str(reason)


def _body_text(error: urllib.error.HTTPError) -> str:
    """An error answer's body as text ("" if it cannot be read: the status alone still says what failed)."""
    try:
        return error.read().decode("utf-8", "replace")
    except (http.client.HTTPException, OSError):
        return ""


class MalformedResponse(Exception):
    """The server answered 2xx but not with a chat completion (an empty `choices`, a proxy's page): a transient
    failure, retried as a 5xx is (`retry.is_retryable`)."""
