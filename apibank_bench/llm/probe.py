"""One `GET /models` per endpoint per run: whether anything answers there, and what it says it serves.

Asked once (the first time any part of the run wants it) and remembered for the rest of the run:
the start of a run checks that the endpoint is reachable, its summary records the endpoint's own
model list, and server-kind detection can read the same answer.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

TIMEOUT = 10.0  #: seconds to wait for the answer


@dataclass(frozen=True)
class Probe:
    """The endpoint's answer to GET {base_url}/models."""

    base_url: str
    status: int | None  #: the HTTP status; None when nothing answered
    body: Any = None  #: the answer's JSON (None if it had none)
    error: str | None = None  #: why there is no JSON answer ("TypeName: message")

    @property
    def reachable(self) -> bool:
        """Something answers there (any HTTP status will do: a 401 or 404 is an endpoint too)."""
        return self.status is not None


_PROBES: dict[str, Probe] = {}
_LOCK = threading.Lock()


def _ask(base_url: str, timeout: float) -> Probe:
    try:
        with urllib.request.urlopen(base_url + "/models", timeout=timeout) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as exc:
        exc.close()
        return Probe(base_url, exc.code, error=f"{type(exc).__name__}: {exc}")
    except (OSError, ValueError) as exc:  # URLError (refused, unknown host), timeouts, a bad URL
        return Probe(base_url, None, error=f"{type(getattr(exc, 'reason', exc)).__name__}: "
                                           f"{getattr(exc, 'reason', exc)}")
    try:
        return Probe(base_url, status, json.loads(raw.decode("utf-8", "replace")))
    except ValueError as exc:
        return Probe(base_url, status, error=f"{type(exc).__name__}: {exc}")


def probe_models(base_url: str, timeout: float = TIMEOUT) -> Probe:
    """The endpoint's GET /models answer, asked the first time and remembered for the run."""
    base_url = base_url.rstrip("/")
    with _LOCK:
        if base_url not in _PROBES:
            _PROBES[base_url] = _ask(base_url, timeout)
        return _PROBES[base_url]


def forget_probes() -> None:
    """A new run starts: its endpoints are asked again."""
    with _LOCK:
        _PROBES.clear()
