"""Which model a run talks to: a remote OpenAI-compatible endpoint, or the embedded one."""

from __future__ import annotations

import urllib.error
import urllib.request
import warnings
from typing import Callable

from apibank_bench.llm import ChatClient, ModelConfig
from apibank_bench.core.redact import redact
from apibank_bench.core.settings import RunConfig, flag

#: The embedded default: Gemma 3 270M served by llama.cpp (a smoke model, not a contender).
LOCAL_MODEL = "gemma-3-270m-it-q4_k_m"


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
        raise ValueError(f"no model name: pass {flag('model')} NAME (or set APIBANK_MODEL) for a remote endpoint")
    return ModelConfig(
        base_urls=[local_url] if local else list(cfg.base_url),
        model=model, api_key=cfg.api_key or "", temperature=cfg.temperature, top_p=cfg.top_p,
        max_tokens=cfg.max_tokens, seed=cfg.seed, extra_body=dict(cfg.extra_body), timeout=cfg.timeout,
        max_retries=cfg.max_retries, max_in_flight=cfg.max_in_flight,
        cache_dir=cfg.cache_root / "responses" if cfg.cache else None,
        constrained=local if cfg.constrained is None else cfg.constrained,
        server_kind=cfg.server_kind, routing=cfg.routing,
        # llama.cpp's gemma chat format drops system messages: fold them into the user turn.
        fold_system=local,
    )


def model_client(cfg: RunConfig, local_url: Callable[[], str]) -> ChatClient | None:
    """The run's shared client, None for the gold self-check; starts the embedded model if needed."""
    if cfg.is_gold:
        return None
    config = model_config(cfg, local_url() if needs_local_server(cfg) else None)
    dead = []
    for url in config.base_urls:
        try:
            reachable(url)
        except EndpointUnreachable as exc:
            dead.append((url, exc))
    if len(dead) == len(config.base_urls):
        raise dead[0][1]
    client = ChatClient(config)
    for url, exc in dead:  # one of several replicas is down: the run goes on with the others
        warnings.warn(f"{exc}; it is left out of rotation and tried again later", RuntimeWarning, stacklevel=2)
        client.router.eject(url)
    return client


class EndpointUnreachable(RuntimeError):
    """No server answers at a configured base URL (a run would only collect connection errors)."""


def reachable(base_url: str, timeout: float = 10.0) -> None:
    """Fail fast, once per run, when nothing listens at `base_url` (any HTTP answer will do)."""
    try:
        urllib.request.urlopen(base_url.rstrip("/") + "/models", timeout=timeout).close()
    except urllib.error.HTTPError:
        return  # it answered (401, 404...): the endpoint is there
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise EndpointUnreachable(f"cannot reach the model endpoint {redact(base_url)}: {redact(reason)}") from None


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
