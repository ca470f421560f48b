"""One `GET /models` per endpoint per run: whether anything answers there, and what it says it serves; and, where
a server's own chat formats may drop a system message, whether its template keeps one (`probe_system`). And
what a run's client takes from those answers: an endpoint that does not answer (`EndpointUnreachable`), the
models it serves as the response cache's deployment (`served_models`, `deployment`), whether the run folds
system messages (`system_folding`).

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
from typing import TYPE_CHECKING, Any

from apibank_bench.core.redact import redact
from apibank_bench.llm.client import NO_KEY
from apibank_bench.llm.config import server_kind
from apibank_bench.llm.embedded_models import embedded_choice

if TYPE_CHECKING:
    from apibank_bench.core.settings import RunConfig

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
        _SYSTEM_PROBES.clear()


#: The system-message probe: the same user turn asked with and without a system message, one token each.
SYSTEM_PROBE_SYSTEM = "You are a helpful assistant. Answer every question in one word, without punctuation."
SYSTEM_PROBE_USER = "Is the sky blue?"


@dataclass(frozen=True)
class SystemProbe:
    """Whether the server's chat template keeps a system message, from the prompt tokens it reports for the
    same user turn with and without one (a template that drops it counts the same tokens both times)."""

    with_system: int | None  #: prompt tokens reported with the system message (None: no count)
    without: int | None  #: ... without it
    error: str | None = None  #: why there is no count ("TypeName: message")

    @property
    def kept(self) -> bool | None:
        """True: kept; False: dropped; None: could not tell (an error, or no token counts)."""
        if self.with_system is None or self.without is None:
            return None
        return self.with_system > self.without

    def describe(self) -> str:
        if self.kept is None:
            return f"unknown: {self.error or 'the server reports no prompt tokens'}"
        return (f"{self.with_system} prompt tokens with a system message, {self.without} without")


_SYSTEM_PROBES: dict[tuple[str, str], SystemProbe] = {}


def _prompt_tokens(endpoint: Any, model: str, messages: list[dict[str, str]]) -> int | None:
    answer = endpoint.create({"model": model, "messages": messages, "max_tokens": 1, "temperature": 0.0})
    usage = answer.get("usage") if isinstance(answer, dict) else None
    tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return tokens if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens > 0 else None


def probe_system(base_url: str, model: str, api_key: str, timeout: float) -> SystemProbe:
    """Two one-token chat requests, asked the first time and remembered for the run: does the chat template
    keep a system message? (llama-cpp-python's `gemma` format drops it silently.)"""
    from apibank_bench.llm.http import APIError, ChatEndpoint, MalformedResponse

    base_url = base_url.rstrip("/")
    with _LOCK:
        if (base_url, model) in _SYSTEM_PROBES:
            return _SYSTEM_PROBES[base_url, model]
    endpoint = ChatEndpoint(base_url, api_key, timeout)
    user = {"role": "user", "content": SYSTEM_PROBE_USER}
    try:
        probe = SystemProbe(_prompt_tokens(endpoint, model, [{"role": "system", "content": SYSTEM_PROBE_SYSTEM}, user]),
                            _prompt_tokens(endpoint, model, [user]))
    except (APIError, MalformedResponse) as exc:
        probe = SystemProbe(None, None, f"{type(exc).__name__}: {exc}"[:300])
    with _LOCK:
        return _SYSTEM_PROBES.setdefault((base_url, model), probe)


#: What of a `/models` entry identifies the model served (not `created`, which some servers set to
#: the time of asking, nor vLLM's per-request `permission` IDs).
MODEL_FIELDS = ("id", "root", "parent", "owned_by", "max_model_len", "meta")


class EndpointUnreachable(RuntimeError):
    """No server answers at a configured base URL (a run would only collect connection errors)."""


def endpoint_models(base_url: str | None, require: bool = False) -> Any:
    """The endpoint's answer to GET /models (which model serves, and which server: `owned_by`): the run's
    one probe (`probe_models`). An HTTP error or an answer that is not JSON gives `{"error": ...}` (the
    endpoint is there); with `require`, nothing listening raises EndpointUnreachable (a run would only
    collect connection errors), else it is an error answer too."""
    if not base_url:
        return None
    probe = probe_models(base_url)
    if not probe.reachable and require:
        reason = redact((probe.error or "no answer").split(": ", 1)[-1])
        raise EndpointUnreachable(f"cannot reach the model endpoint {redact(base_url)}: {reason}")
    return probe.body if probe.body is not None else {"error": redact(probe.error or "no answer")}


def served_models(answer: Any) -> Any:
    """What a `/models` answer says identifies the models served (`MODEL_FIELDS` of each entry), or
    that it gave none (an error answer; None: the endpoint did not answer when the run started)."""
    entries = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(entries, list):
        return {"status": (answer or {}).get("error", "no model list") if isinstance(answer, dict) else "unreachable"}
    return sorted(json.dumps({key: entry[key] for key in MODEL_FIELDS if key in entry}, sort_keys=True, default=str)
                  for entry in entries if isinstance(entry, dict))


def deployment(served: dict[str, Any]) -> str:
    """What identifies a remote endpoint to the response cache: each address (without credentials)
    and what its `/models` says it serves. Two servers sharing a model name never share answers."""
    return json.dumps({redact(url): models for url, models in served.items()}, sort_keys=True)


def system_folding(cfg: RunConfig, models: Any, local: bool = False) -> tuple[bool, str]:
    """Whether the run folds system messages into the first user message, and why.

    An embedded model's are folded when its chat format drops them (llama-cpp-python's `gemma`; a file's own
    template, SmolLM2's, keeps them). A server of the llama.cpp kind, or
    llama-cpp-python's (`owned_by: "me"`), formats chats with templates of its own, some of which drop them
    silently: each of its endpoints is asked once with and without a system message (`probe_system`),
    and a template that drops it is folded for. Other servers apply the model's own template; hosted APIs
    keep system messages."""
    if local:
        choice = embedded_choice(cfg)
        if choice.fold_system:
            return True, f"the embedded model's chat format ({choice.template}) drops system messages"
        return False, "kept: the embedded model's chat template " + (
            f"({choice.template}) keeps them" if choice.template else "(the file's own) is given them")
    kind = server_kind(cfg, models)[0]
    data = models.get("data") if isinstance(models, dict) else None
    owners = {str(item.get("owned_by")) for item in data or () if isinstance(item, dict)}
    if kind != "llama.cpp" and owners != {"me"}:
        return False, "not probed: the server applies the model's own chat template"
    probes = {url: probe_system(url, cfg.model or "", cfg.api_key or NO_KEY, cfg.timeout) for url in cfg.base_url}
    dropped = [url for url, probe in probes.items() if probe.kept is False]
    said = "; ".join(f"{redact(url)}: {probe.describe()}" for url, probe in probes.items())
    if dropped:
        return True, f"folded: the server's chat template drops system messages ({said})"
    return False, f"kept: {said}" if any(p.kept for p in probes.values()) else f"not folded, {said}"
