"""The model layer's settings: how to reach the model and how to sample from it.

Built from a run's settings (`model_config`, which also decides the server kind and the embedded model's
folding and deployment); nothing here reads the environment.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from apibank_bench.core.redact import redact
from apibank_bench.core.settings import BY_NAME, flag
from apibank_bench.llm.embedded_models import embedded_choice, embedded_deployment
from apibank_bench.llm.limit import request_ceiling

if TYPE_CHECKING:
    from apibank_bench.core.settings import RunConfig


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
        return request_ceiling(self.max_in_flight, self.kind.batches)

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


def model_config(cfg: RunConfig, local_url: str | None = None, models: Any = None, sharing: int = 1,
                 fold: bool | None = None) -> ModelConfig:
    """The model layer's settings for a run.

    Grammar-constrained decoding defaults on for the embedded model and off for remote endpoints: the
    reference harness sends its vLLM server no grammar, and a hosted API may reject the extra field
    (`--constrained` sends it to a server kind that takes one: llama.cpp, vLLM). `models` is the
    endpoint's `/v1/models` answer, which tells its server kind under `--server-kind auto`.
    `sharing`: the processes of this run sending to the endpoint at once (xdist workers).
    `fold`: whether system messages go into the first user message (`system_folding`; None: for an embedded
    model whose chat format drops them, llama-cpp-python's `gemma`).
    """
    local = local_url is not None
    choice = embedded_choice(cfg) if local else None
    model = choice.name if choice else cfg.model or ""  # a remote endpoint has a name: check_model_and_endpoint
    return ModelConfig(
        base_urls=[local_url] if local_url is not None else list(cfg.base_url),
        model=model, api_key=cfg.api_key or "", temperature=cfg.temperature, top_p=cfg.top_p,
        max_tokens=cfg.max_tokens, seed=cfg.seed, extra_body=dict(cfg.extra_body), timeout=cfg.timeout,
        max_retries=cfg.max_retries, max_in_flight=cfg.max_in_flight,
        cache_dir=cfg.cache_root / "responses" if cfg.cache else None,
        constrained=local if cfg.constrained is None else cfg.constrained,
        server_kind=server_kind(cfg, models, local)[0], routing=cfg.routing,
        repetition_penalty=cfg.repetition_penalty, thinking=cfg.thinking,
        # llama-cpp-python's gemma chat format drops system messages: fold them into the user turn.
        fold_system=(choice.fold_system if choice else False) if fold is None else fold,
        # The embedded server gets a new port each run, but it is always the same file.
        deployment=cfg.deployment or (embedded_deployment(choice) if choice else ""),
        down_after=down_after(cfg), sharing=sharing,
        one_slot=local,  # llama-cpp-python's server: one completion at a time, the previous prompt's cache kept
    )


def request_fields(model: ModelConfig) -> dict:
    """The sampling fields every request of a client carries (summary.json's `request_fields`)."""
    return {"temperature": model.temperature, "top_p": model.top_p, "max_tokens": model.max_tokens,
            "seed": "per agent (see Protocol)", **model.sampling(), **model.extra_body}


def no_grammar_field(cfg: RunConfig, models: Any, local: bool = False) -> str:
    """Why `--constrained` sends no grammar here, and the flag that would."""
    kind, decided_by = server_kind(cfg, models, local)
    return (f"{flag('constrained')} sends no grammar to {', '.join(redact(url) for url in cfg.base_url)}: its server "
            f"kind {kind} ({decided_by}) has no grammar field; add {flag('server_kind')} llama.cpp if it takes "
            f"llama.cpp's GBNF grammar (llama-cpp-python, llama.cpp's llama-server), or vllm")


def down_after(cfg: RunConfig) -> float:
    """The breaker's window; the deprecated `max_consecutive_errors` only still turns it off (0)."""
    if cfg.max_consecutive_errors is None:
        return cfg.down_after
    warnings.warn(f"{flag('max_consecutive_errors')} is deprecated: the run now stops when the endpoint has answered "
                  f"nothing for {flag('down_after')} seconds (default 20) while requests fail"
                  + ("; 0 still turns that off" if cfg.max_consecutive_errors == 0 else "; the count is ignored"),
                  DeprecationWarning, stacklevel=2)
    return 0.0 if cfg.max_consecutive_errors == 0 else cfg.down_after


def server_kind(cfg: RunConfig, models: Any, local: bool = False) -> tuple[str, str]:
    """The run's server kind and how it was decided (the embedded model is llama-cpp-python's server)."""
    if local and cfg.server_kind == "auto":
        return "llama.cpp", "the embedded llama-cpp-python server"
    return server_kind_of(cfg.server_kind, models)
