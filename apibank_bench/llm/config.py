"""The model layer's settings: how to reach the model and how to sample from it.

Built from a run's settings (`agents.models.model_config`); nothing here reads the
environment.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from apibank_bench.core.settings import BY_NAME

#: Grammar dialects `grammar.grammar_extra_body` understands (see docs/model.md).
SERVER_KINDS = ("llama.cpp", "vllm", "vllm-structured", "none")


@dataclass
class ModelConfig:
    """How to reach the model and how to sample from it.

    Defaults are the settings table's. `base_urls` empty means "use the embedded
    local model" (see local_server).
    `cache_dir` None turns the response cache off.
    `constrained` None means "auto": constrain with a grammar when the server
    kind supports grammars (llama.cpp, vLLM), not for plain OpenAI endpoints.
    `fold_system` moves system messages into the first user message, for chat
    templates that drop them (llama-cpp-python's `gemma` format does).
    """

    base_urls: list[str] = field(default_factory=list)
    model: str = ""
    api_key: str = ""
    temperature: float = BY_NAME["temperature"].default
    top_p: float = BY_NAME["top_p"].default
    max_tokens: int = BY_NAME["max_tokens"].default
    seed: int = BY_NAME["seed"].default
    extra_body: dict[str, Any] = field(default_factory=dict)
    timeout: float = BY_NAME["timeout"].default
    max_retries: int = BY_NAME["max_retries"].default
    max_in_flight: int = BY_NAME["max_in_flight"].default
    cache_dir: Path | None = None
    constrained: bool | None = None
    server_kind: str = BY_NAME["server_kind"].default
    fold_system: bool = False
    #: What identifies the endpoint to the response cache (answers cached under one deployment are
    #: never given for another); empty: the base URLs.
    deployment: str = ""
    #: Failed attempts in a row (no success between) after which every request stops (0 = never).
    max_consecutive_errors: int = BY_NAME["max_consecutive_errors"].default

    def __post_init__(self) -> None:
        self.base_urls = [url.strip().rstrip("/") for url in self.base_urls if url and url.strip()]
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
