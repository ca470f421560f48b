"""Why a request gave no answer (`Failure`), named by the exception's type where the request failed;
a row's reason code is `error:<failure>` (scoring.stage), never recovered from the message's text."""

from __future__ import annotations

from enum import StrEnum

from apibank_bench.llm.http import APIError, APITimeoutError, ContextLengthError, MalformedResponse


class Failure(StrEnum):
    TIMEOUT = "timeout"  #: the request timed out (after its retries)
    CONTEXT_LENGTH = "context_length"  #: the prompt did not fit the server's context
    ENDPOINT = "endpoint"  #: connection, HTTP status, malformed answer
    INTERRUPTED = "interrupted"  #: not asked (or no longer retried): the run or the instance stopped
    MODEL = "model"  #: another kind (an agent SDK's own failure)


def failure_of(exc: BaseException) -> Failure:
    """The kind of failure a request's exception is."""
    if isinstance(exc, ContextLengthError):
        return Failure.CONTEXT_LENGTH
    if isinstance(exc, APITimeoutError):
        return Failure.TIMEOUT
    if isinstance(exc, (APIError, MalformedResponse)) or getattr(exc, "status_code", None):
        return Failure.ENDPOINT
    return Failure.MODEL
