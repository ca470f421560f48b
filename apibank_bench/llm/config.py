"""The model layer's settings: how to reach the model and how to sample from it.

Built from a run's settings (`agents.models.model_config`); nothing here reads the
environment.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from apibank_bench.core.settings import BY_NAME
from apibank_bench.llm.limit import default_ceiling


@dataclass(frozen=True)
class ServerKind:
    """What one kind of server accepts beyond the OpenAI fields (temperature, top_p, max_tokens, seed).

    `penalty`: the request field of the repetition penalty (None: not sent);
    `template_kwargs`: whether `chat_template_kwargs` (the thinking switch) is sent;
    `grammar`: whether `grammar.grammar_extra_body` has a dialect for it;
    `batches`: it works on many completions at once (continuous batching, 256 by default in vLLM and
    SGLang), so the in-flight limit may start wide (`limit.py`).
    A hosted OpenAI-style API rejects unknown fields with HTTP 400, so it gets none.
    """

    penalty: str | None = None
    template_kwargs: bool = False
    grammar: bool = False
    batches: bool = False


#: The kinds `--apibank-server-kind` names (`auto` is resolved from the endpoint, see `server_kind_of`).
SERVER_KINDS: dict[str, ServerKind] = {
    "vllm": ServerKind("repetition_penalty", True, True, batches=True),
    "vllm-structured": ServerKind("repetition_penalty", True, True, batches=True),  # vLLM >= 0.12's grammar field
    "sglang": ServerKind("repetition_penalty", True, batches=True),
    "llama.cpp": ServerKind("repeat_penalty", True, True),  # llama.cpp's llama-server, llama-cpp-python
    "openai": ServerKind(),  # a hosted OpenAI-style API: the standard fields only
    "none": ServerKind(),  # the old name for an endpoint without grammars, kept for existing commands
}
AUTO = "auto"
#: What `--server-kind` accepts.
SERVER_CHOICES = (AUTO, *SERVER_KINDS)
#: `owned_by` in a server's `/v1/models` answer -> its kind; any other owner is taken as a hosted API.
OWNERS = {"vllm": "vllm", "sglang": "sglang", "llamacpp": "llama.cpp"}


def server_kind_of(setting: str, models: Any) -> tuple[str, str]:
    """The kind of server a run talks to, and how that was decided.

    `setting` other than `auto` wins; otherwise the owners in `models` (the endpoint's
    `/v1/models` answer, or None) decide, and an unknown or missing answer means a
    hosted OpenAI-style API, which is sent nothing it could reject.
    """
    if setting != AUTO:
        return setting, "--apibank-server-kind"
    data = models.get("data") if isinstance(models, dict) else None
    owners = sorted({str(item.get("owned_by")) for item in data or () if isinstance(item, dict)})
    kinds = {OWNERS.get(owner.lower()) for owner in owners}
    kind = kinds.pop() if len(kinds) == 1 else None  # one owner, and a known one
    if kind is not None:
        return kind, f"/v1/models owned_by {owners[0]!r}"
    return "openai", (f"/v1/models owned_by {owners!r}: not a known server" if owners
                      else "/v1/models names no owner")


@dataclass
class ModelConfig:
    """How to reach the model and how to sample from it.

    Defaults are the settings table's. `base_urls` empty means "use the embedded
    local model" (see embedded_launcher).
    `cache_dir` None turns the response cache off.
    `constrained` None means "auto": constrain with a grammar when the server
    kind supports grammars (llama.cpp, vLLM), not for plain OpenAI endpoints.
    `server_kind` decides the extra sampling fields (`sampling`) and the grammar's field.
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
    max_in_flight: int | None = None  #: the ceiling of requests in flight; None: `ceiling` by the server kind
    cache_dir: Path | None = None
    constrained: bool | None = None
    server_kind: str = BY_NAME["server_kind"].default
    repetition_penalty: float = BY_NAME["repetition_penalty"].default
    thinking: bool = BY_NAME["thinking"].default
    fold_system: bool = False
    routing: str = BY_NAME["routing"].default  #: how requests are spread over `base_urls` (llm/router.py)
    #: What identifies the endpoint to the response cache (answers cached under one deployment are
    #: never given for another); empty: the base URLs.
    deployment: str = ""
    #: Seconds with no success while requests keep failing after which every request stops (0 = never).
    down_after: float = BY_NAME["down_after"].default
    #: Processes sending to the same endpoints at once (xdist workers): they share its queue (limit.py).
    sharing: int = 1
    #: The server answers one completion at a time and reuses the previous prompt's KV cache (the embedded
    #: model): one request at a time, an instance's back to back (one_slot.OneSlotQueue).
    one_slot: bool = False

    def __post_init__(self) -> None:
        self.base_urls = [url.strip().rstrip("/") for url in self.base_urls if url and url.strip()]
        if self.cache_dir is not None:
            self.cache_dir = Path(self.cache_dir).expanduser()
        if self.server_kind != AUTO and self.server_kind not in SERVER_KINDS:
            raise ValueError(f"server_kind must be one of {(AUTO, *SERVER_KINDS)}, got {self.server_kind!r}")
        if self.max_in_flight is not None and self.max_in_flight < 1:
            raise ValueError("max_in_flight must be >= 1")
        if self.timeout <= 0:
            raise ValueError("timeout must be > 0 seconds")
        if self.max_retries < 0:
            raise ValueError("max_retries must be >= 0")

    @property
    def kind(self) -> ServerKind:
        """What the server accepts; an unresolved `auto` (a config built by hand) is sent the standard fields only."""
        return SERVER_KINDS.get(self.server_kind, SERVER_KINDS["openai"])

    @property
    def ceiling(self) -> int:
        """Requests in flight at most: `max_in_flight`, or the default of the server's kind (wider where it batches)."""
        return self.max_in_flight or default_ceiling(self.kind.batches)

    @property
    def use_grammar(self) -> bool:
        """Whether requests carry a grammar: asked for (None: where the server kind takes one), and the server kind
        has a field for it (`--constrained` to a hosted API's kind sends none)."""
        return self.kind.grammar and (self.constrained is None or self.constrained)

    def sampling(self) -> dict[str, Any]:
        """The sampling fields of every request beyond the OpenAI ones, in the form this server takes
        (the reference sends `repetition_penalty` and `chat_template_kwargs` to its vLLM server)."""
        fields: dict[str, Any] = {}
        if self.kind.penalty:
            fields[self.kind.penalty] = self.repetition_penalty
        if self.kind.template_kwargs:
            fields["chat_template_kwargs"] = {"enable_thinking": self.thinking}
        return fields
