"""The HTTP of a chat completion: one POST to `<base_url>/chat/completions` over httpx2.

This is all of the OpenAI protocol a run needs (Agents SDK agents reach the endpoint
through `ChatClient` too), so the `openai` package stays off the request path. On
this machine importing it took 0.7 s of every run's start, and one request through its
typed client 5.7 ms of CPU against 1.9 ms here (client and a local server together, one
thread); at hundreds of requests in flight, sharing one GIL, that is seconds of a run.
httpx2 is the HTTP client the SDK itself uses, and under 128 threads with keep-alive
connections it stayed correct and cheap where httpx 0.28 failed reads ("Bad file
descriptor") and cost twice the CPU. The body sent is the one
`openai.OpenAI().chat.completions.create` sends (`extra_body` merged at the top level),
with the same `Authorization: Bearer` key.

Errors are this module's own, named after the SDK's classes so that an error row reads
as before: `APIConnectionError` (no connection, a reset, an answer cut off),
`APITimeoutError` (one of those), `APIStatusError` (a non-2xx answer, with its
`status_code` and `response`, whose Retry-After the retry policy reads), and a subclass
per status (`RateLimitError` for 429, `InternalServerError` for 5xx, ...).
"""

from __future__ import annotations

import json
from typing import Any

import httpx2

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


class APIStatusError(APIError):
    """The server answered with a non-2xx status."""

    def __init__(self, message: str, response: httpx2.Response) -> None:
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


def status_error(response: httpx2.Response) -> APIStatusError:
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


class ChatEndpoint:
    """One base URL's connection pool; thread-safe (httpx2's Client is)."""

    def __init__(self, base_url: str, api_key: str, timeout: float, connections: int) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self._headers = {"Authorization": f"Bearer {api_key}"}
        # The in-flight cap is the model layer's (limit.py); the pool only keeps that many alive.
        self._http = httpx2.Client(timeout=httpx2.Timeout(timeout),
                                  limits=httpx2.Limits(max_connections=None, max_keepalive_connections=connections))

    def create(self, body: dict[str, Any]) -> Any:
        """POST one chat request; the parsed JSON answer of a 2xx (MalformedResponse if it is not JSON)."""
        try:
            response = self._http.post(self.url, json=body, headers=self._headers)
        except httpx2.TimeoutException:
            raise APITimeoutError() from None
        except httpx2.TransportError as exc:  # refused, reset, or the answer cut off mid-body
            raise APIConnectionError(f"Connection error: {type(exc).__name__}: {exc}") from None
        if not response.is_success:
            raise status_error(response)
        try:
            return response.json()
        except ValueError:
            raise MalformedResponse(f"malformed chat completion: not JSON: {response.text[:200]!r}") from None


class MalformedResponse(Exception):
    """The server answered 2xx but not with a chat completion (not retried)."""
