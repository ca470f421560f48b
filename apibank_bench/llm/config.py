"""Model settings: one dataclass, filled from the environment and CLI overrides."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

#: Root folder for everything apibank-bench caches (assembled model, responses).
DEFAULT_CACHE_ROOT = Path("~/.cache/apibank-bench")

#: Grammar dialects `grammar.grammar_extra_body` understands (see docs/model.md).
SERVER_KINDS = ("llama.cpp", "vllm", "vllm-structured", "none")

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def cache_root(env: Mapping[str, str] | None = None) -> Path:
    """APIBANK_CACHE_DIR, else ~/.cache/apibank-bench."""
    env = os.environ if env is None else env
    return Path(env.get("APIBANK_CACHE_DIR") or DEFAULT_CACHE_ROOT).expanduser()


def split_urls(value: str | list[str] | tuple[str, ...] | None) -> list[str]:
    """"a, b" or ["a", "b"] -> ["a", "b"]; trailing slashes dropped."""
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else list(value)
    return [item.strip().rstrip("/") for item in items if item and item.strip()]


def parse_flag(value: str | bool | None, name: str = "flag") -> bool | None:
    """'1'/'true'/'yes' -> True, '0'/'false'/'no' -> False, 'auto'/None -> None."""
    if value is None or isinstance(value, bool):
        return value
    text = value.strip().lower()
    if text == "auto":
        return None
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"{name}: expected 1/0/true/false/auto, got {value!r}")


@dataclass
class ModelConfig:
    """How to reach the model and how to sample from it.

    `base_urls` empty means "use the embedded local model" (see local_server).
    `cache_dir` None turns the response cache off.
    `constrained` None means "auto": constrain with a grammar when the server
    kind supports grammars (llama.cpp, vLLM), not for plain OpenAI endpoints.
    `fold_system` moves system messages into the first user message, for chat
    templates that drop them (llama-cpp-python's `gemma` format does).
    """

    base_urls: list[str] = field(default_factory=list)
    model: str = ""
    api_key: str = ""
    temperature: float = 0.2
    top_p: float = 0.9
    max_tokens: int = 1024
    seed: int = 0
    extra_body: dict[str, Any] = field(default_factory=dict)
    timeout: float = 60.0
    max_retries: int = 5
    max_in_flight: int = 8
    cache_dir: Path | None = None
    constrained: bool | None = None
    server_kind: str = "llama.cpp"
    fold_system: bool = False

    def __post_init__(self) -> None:
        self.base_urls = split_urls(self.base_urls)
        if self.cache_dir is not None:
            self.cache_dir = Path(self.cache_dir).expanduser()
        if self.server_kind not in SERVER_KINDS:
            raise ValueError(f"server_kind must be one of {SERVER_KINDS}, got {self.server_kind!r}")
        if self.max_in_flight < 1:
            raise ValueError("max_in_flight must be >= 1")
        if self.max_retries < 0:
            raise ValueError("max_retries must be >= 0")

    @property
    def use_grammar(self) -> bool:
        """Whether requests should carry a grammar (resolves constrained=None)."""
        if self.constrained is None:
            return self.server_kind != "none"
        return self.constrained

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> "ModelConfig":
        """Read the APIBANK_* / OPENAI_* variables; non-None `overrides` win.

        An override `no_cache=True` turns the response cache off like APIBANK_NO_CACHE=1.
        """
        env = os.environ if env is None else env
        values: dict[str, Any] = {}

        urls = env.get("APIBANK_BASE_URLS") or env.get("OPENAI_BASE_URL")
        if urls:
            values["base_urls"] = split_urls(urls)
        if env.get("OPENAI_API_KEY"):
            values["api_key"] = env["OPENAI_API_KEY"]
        if env.get("APIBANK_MODEL"):
            values["model"] = env["APIBANK_MODEL"]
        for name, var, kind in (
            ("temperature", "APIBANK_TEMPERATURE", float),
            ("top_p", "APIBANK_TOP_P", float),
            ("max_tokens", "APIBANK_MAX_TOKENS", int),
            ("seed", "APIBANK_SEED", int),
            ("timeout", "APIBANK_TIMEOUT", float),
            ("max_retries", "APIBANK_MAX_RETRIES", int),
            ("max_in_flight", "APIBANK_MAX_IN_FLIGHT", int),
        ):
            if env.get(var, "").strip():
                try:
                    values[name] = kind(env[var])
                except ValueError:
                    raise ValueError(f"{var}: expected {kind.__name__}, got {env[var]!r}") from None
        if env.get("APIBANK_EXTRA_BODY", "").strip():
            try:
                extra = json.loads(env["APIBANK_EXTRA_BODY"])
            except json.JSONDecodeError as exc:
                raise ValueError(f"APIBANK_EXTRA_BODY: not JSON ({exc})") from None
            if not isinstance(extra, dict):
                raise ValueError("APIBANK_EXTRA_BODY: must be a JSON object")
            values["extra_body"] = extra
        if env.get("APIBANK_CONSTRAINED", "").strip():
            values["constrained"] = parse_flag(env["APIBANK_CONSTRAINED"], "APIBANK_CONSTRAINED")
        if env.get("APIBANK_FOLD_SYSTEM", "").strip():
            values["fold_system"] = bool(parse_flag(env["APIBANK_FOLD_SYSTEM"], "APIBANK_FOLD_SYSTEM"))
        if env.get("APIBANK_SERVER_KIND", "").strip():
            values["server_kind"] = env["APIBANK_SERVER_KIND"].strip()

        # The response cache is on by default, under the cache root.
        values["cache_dir"] = cache_root(env) / "responses"
        if parse_flag(env.get("APIBANK_NO_CACHE"), "APIBANK_NO_CACHE"):
            values["cache_dir"] = None

        no_cache = overrides.pop("no_cache", None)
        known = {f.name for f in fields(cls)}
        unknown = set(overrides) - known
        if unknown:
            raise TypeError(f"unknown ModelConfig override(s): {sorted(unknown)}")
        values.update({k: v for k, v in overrides.items() if v is not None})
        if no_cache:
            values["cache_dir"] = None
        return cls(**values)
