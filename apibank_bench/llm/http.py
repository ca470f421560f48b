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
seconds.

Errors are this module's own, named after the SDK's classes so that an error row reads
as the SDK's would: `APIConnectionError` (no connection, a reset, an answer cut off),
`APITimeoutError` (one of those), `APIStatusError` (a non-2xx answer, with its
`status_code` and `response`, whose Retry-After the retry policy reads), and a subclass
per status (`RateLimitError` for 429, `InternalServerError` for 5xx, ...).
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, Mapping

#: How much of an error's body the message keeps (an HTML error page can be long).
ERROR_BODY_CHARS = 500


class APIError(Exception):
    """Any failed request."""


class APIConnectionError(APIError):
    def __init__(self, message: str = "Connection error.") -> None:
        super().__init__(message)


class APITimeoutError(APIConnectionError):
    def __init__(self) -> None:
        super().__init__("Request timed out.")


@dataclass(frozen=True)
class ErrorAnswer:
    """A non-2xx answer, as much of it as the error and the retry policy read."""

    status_code: int
    headers: Mapping[str, str]  #: case-insensitive in practice (an `email.message.Message`)
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
    kind = InternalServerError if response.status_code >= 500 else _BY_STATUS.get(response.status_code,
                                                                                  APIStatusError)
    return kind(f"Error code: {response.status_code} - {detail}", response)


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A 3xx is the answer, as with the SDK's client: a chat request is not re-sent elsewhere."""

    def redirect_request(self, *args, **kwargs):
        return None  # urllib then raises the 3xx as an HTTPError


class ChatEndpoint:
    """One base URL's chat completions; thread-safe (nothing is shared between requests but the opener,
    whose handlers keep no state)."""

    def __init__(self, base_url: str, api_key: str, timeout: float) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self._headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json",
                         "Accept": "application/json"}
        self._timeout = timeout  #: seconds for the connection and for each read, as the SDK's timeout
        self._opener = urllib.request.build_opener(_NoRedirects)

    def create(self, body: dict[str, Any]) -> Any:
        """POST one chat request; the parsed JSON answer of a 2xx (MalformedResponse if it is not JSON)."""
        request = urllib.request.Request(self.url, data=json.dumps(body).encode("utf-8"), headers=self._headers,
                                         method="POST")
        try:
            with self._opener.open(request, timeout=self._timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            raise status_error(ErrorAnswer(exc.code, exc.headers, _body_text(exc))) from None
        except urllib.error.URLError as exc:  # refused, unresolvable, a TLS failure, or a connect timeout
            if isinstance(exc.reason, TimeoutError):
                raise APITimeoutError() from None
            raise APIConnectionError(f"Connection error: {_describe(exc.reason)}") from None
        except TimeoutError:  # a read that waited longer than the timeout
            raise APITimeoutError() from None
        except (http.client.HTTPException, OSError) as exc:  # a reset, or the answer cut off mid-body
            raise APIConnectionError(f"Connection error: {_describe(exc)}") from None
        try:
            return json.loads(raw)
        except ValueError:
            text = raw.decode("utf-8", "replace")
            raise MalformedResponse(f"malformed chat completion: not JSON: {text[:200]!r}") from None


def _describe(reason: object) -> str:
    return f"{type(reason).__name__}: {reason}" if isinstance(reason, BaseException) else str(reason)


def _body_text(error: urllib.error.HTTPError) -> str:
    """An error answer's body as text ("" if it cannot be read: the status alone still says what failed)."""
    try:
        return error.read().decode("utf-8", "replace")
    except (http.client.HTTPException, OSError):
        return ""


class MalformedResponse(Exception):
    """The server answered 2xx but not with a chat completion (not retried)."""
