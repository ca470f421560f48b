"""Which model a run talks to: a remote OpenAI-compatible endpoint, or the embedded one."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any, Callable

from apibank_bench.llm import ChatClient, ModelConfig
from apibank_bench.core.redact import redact
from apibank_bench.core.settings import RunConfig

#: The embedded default: Gemma 3 270M served by llama.cpp (a smoke model, not a contender).
LOCAL_MODEL = "gemma-3-270m-it-q4_k_m"
#: What of a `/models` entry identifies the model served (not `created`, which some servers set to
#: the time of asking, nor vLLM's per-request `permission` IDs).
MODEL_FIELDS = ("id", "root", "parent", "owned_by", "max_model_len", "meta")


def needs_local_server(cfg: RunConfig) -> bool:
    return not cfg.is_gold and not cfg.base_url


def model_config(cfg: RunConfig, local_url: str | None = None) -> ModelConfig:
    """The model layer's settings for a run.

    Grammar-constrained decoding defaults on for the embedded model and off for
    remote endpoints (a hosted API may reject the extra field).
    """
    local = local_url is not None
    model = cfg.model or (LOCAL_MODEL if local else None)
    if not model:
        raise ValueError("no model name: pass --apibank-model NAME (or set APIBANK_MODEL) for a remote endpoint")
    return ModelConfig(
        base_urls=[local_url] if local else list(cfg.base_url),
        model=model, api_key=cfg.api_key or "", temperature=cfg.temperature, top_p=cfg.top_p,
        max_tokens=cfg.max_tokens, seed=cfg.seed, extra_body=dict(cfg.extra_body), timeout=cfg.timeout,
        max_retries=cfg.max_retries, max_in_flight=cfg.max_in_flight,
        cache_dir=cfg.cache_root / "responses" if cfg.cache else None,
        constrained=local if cfg.constrained is None else cfg.constrained,
        server_kind=cfg.server_kind,
        # llama.cpp's gemma chat format drops system messages: fold them into the user turn.
        fold_system=local,
        # The embedded server gets a new port each run, but it is always the same model.
        deployment=cfg.deployment or (f"embedded llama.cpp: {model}" if local else ""),
        max_consecutive_errors=cfg.max_consecutive_errors,
    )


def model_client(cfg: RunConfig, local_url: Callable[[], str]) -> ChatClient | None:
    """The run's shared client, None for the gold self-check; starts the embedded model if needed."""
    if cfg.is_gold:
        return None
    config = model_config(cfg, local_url() if needs_local_server(cfg) else None)
    served = {url: reachable(url) for url in config.base_urls}
    if not config.deployment:
        config.deployment = deployment(served)
    return ChatClient(config)


def deployment(served: dict[str, Any]) -> str:
    """What identifies a remote endpoint to the response cache: each address (without credentials)
    and what its `/models` says it serves. Two servers sharing a model name never share answers."""
    return json.dumps({redact(url): models for url, models in served.items()}, sort_keys=True)


class EndpointUnreachable(RuntimeError):
    """No server answers at a configured base URL (a run would only collect connection errors)."""


def reachable(base_url: str, timeout: float = 10.0) -> Any:
    """Fail fast, once per run, when nothing listens at `base_url` (any HTTP answer will do).

    Returns what `/models` says identifies the models served there (`MODEL_FIELDS` of each
    entry), or the status it answered with.
    """
    try:
        with urllib.request.urlopen(base_url.rstrip("/") + "/models", timeout=timeout) as response:
            body = json.loads(response.read().decode("utf-8", "replace"))
    except urllib.error.HTTPError as exc:
        return {"status": exc.code}  # it answered (401, 404...): the endpoint is there
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise EndpointUnreachable(f"cannot reach the model endpoint {redact(base_url)}: {redact(reason)}") from None
    except ValueError:
        return {"status": "not JSON"}
    entries = body.get("data") if isinstance(body, dict) else None
    if not isinstance(entries, list):
        return {"status": "no model list"}
    return sorted((json.dumps({key: entry[key] for key in MODEL_FIELDS if key in entry}, sort_keys=True, default=str)
                   for entry in entries if isinstance(entry, dict)))


def describe_model(cfg: RunConfig) -> dict:
    """The model part of a run's summary (no API key)."""
    if cfg.is_gold:
        return {"model": "gold", "note": "harness self-check: the gold call is replayed, no model runs"}
    try:
        model = model_config(cfg, "embedded" if needs_local_server(cfg) else None)
    except ValueError as exc:
        return {"error": str(exc)}
    return {
        "model": model.model,
        "base_urls": (["embedded llama.cpp server"] if needs_local_server(cfg)
                      else [redact(url) for url in model.base_urls]),  # no user:password@ in summary.json
        "temperature": model.temperature, "top_p": model.top_p, "max_tokens": model.max_tokens,
        "seed": model.seed, "constrained": model.constrained, "cache": model.cache_dir is not None,
        "extra_body": model.extra_body,
    }
