"""`RunConfig`: one benchmark run's settings, a frozen dataclass whose fields are the run's rows of
the settings table. Each field is declared once, by `setting(...)`: its type here, and in its
metadata what the table needs (help, parser, default, choices, role, commands), from which come
the flags, pytest options, environment names and the docs table (`core.settings.table`)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Mapping

from apibank_bench.core.settings.parsers import (
    above, at_least, model_role_parts, parse_alpha, parse_bool, parse_json_object, parse_list, parse_model_roles,
    parse_prices, parse_shard, parse_urls,
)
from apibank_bench.core.settings.setting import (
    DATA_COMMANDS, HANDED_DOWN, OPERATIONAL, RUN_COMMANDS, SELECTION, TEAM_COMMANDS, Setting,
)

#: The key of a field's table row in its metadata.
SETTING = "apibank_setting"
#: What `--server-kind` accepts: `auto` and the kinds `llm.config.SERVER_KINDS` knows (a test checks they agree).
SERVER_KINDS = ("auto", "vllm", "vllm-structured", "sglang", "llama.cpp", "openai", "none")

_NO_CACHE = {"APIBANK_NO_CACHE": lambda text: not parse_bool(text)}
_RUN, _TEAM, _DATA = RUN_COMMANDS, TEAM_COMMANDS, DATA_COMMANDS
_OP, _SEL = OPERATIONAL, SELECTION


def _fresh(value: Any) -> Any:
    return value.copy() if isinstance(value, (list, dict)) else value


def setting(help: str, parse: Callable[[Any], Any] = str, default: Any = None, **row: Any) -> Any:
    """A RunConfig field and its row of the settings table (a `Setting` named as the field)."""
    metadata = {SETTING: {"help": help, "parse": parse, "default": default, **row}}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: _fresh(default), metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass(frozen=True)
class RunConfig:
    """One run's settings; build it with `resolve` (which parses and checks), or from a record (`from_record`)."""

    # what to run
    root: str | None = setting(
        "the API-Bank data root", default_text="the data shipped in the package", role=_OP, commands=_DATA)
    level: str = setting(
        "`all` = the 100-task eval manifest (33/33/34); `1`, `2`, `3` = that level's curated list "
        "(`score`: the level of IDs without a `level-N::` prefix)",
        default="all", choices=("all", "1", "2", "3"), role=_SEL, commands=(*_RUN, "summary", "score"))
    limit: int | None = setting(
        "run at most N instances of the selection (`apibank-bench run`: default 2, 0 = all)",
        at_least(0), default_text="all", role=_SEL, commands=(*_RUN, "summary"))
    offset: int = setting(
        "skip the first K instances of the manifest", at_least(0), 0, role=_SEL,
        commands=(*_RUN, "summary"))
    only: list[str] = setting(
        "only these task IDs (as in the manifest, or without the `level-N::` prefix)", parse_list, [],
        role=_SEL, commands=(*_RUN, "summary"))
    shard: tuple[int, int] | None = setting(
        "`i/n`: every n-th instance starting at the i-th", parse_shard, role=_SEL)
    topology: str = setting(
        "the agent topology", default="single",
        choices=HANDED_DOWN, commands=_TEAM)
    team_size: int = setting(
        "agents in a team: 2, 4, 8 or 10", int, 4, commands=_TEAM)
    rounds: int = setting(
        "debate rounds in all, the first answers included (decentralized; the reference's R)",
        at_least(1), 2, commands=_TEAM)
    team_protocol: str = setting(
        "`topology`: the topology's own graph; `replicas`: the reference's team-size "
        "runners, N independent calls with the topology's final-role prompt (seeds 0..N-1) and the team vote",
        default="topology", choices=("topology", "replicas"), commands=_TEAM)
    message_format: str = setting(
        "what agents pass each other", default="freeform",
        choices=("freeform", "semi_structured", "structured_soft"), commands=_TEAM)
    agent_kind: str = setting(
        "what answers at each node of every topology", default="chat",
        choices=HANDED_DOWN)
    tool_parse: str = setting(
        "where an `sdk` agent's tool call is read: `server` (only the server's `tool_calls`), `client` (the "
        "raw text, parsed here: hermes/Qwen `<tool_call>`, Llama 3 JSON, Mistral `[TOOL_CALLS]`, a bare JSON "
        "object) or `both` (`tool_calls` first, then the text); see [Function calling](function-calling.md)",
        default="both", choices=("server", "client", "both"))
    history: str = setting(
        "how the dialogue's earlier API calls reach an `sdk` agent: `text` (`API_RESULT` lines in the task prompt, "
        "the reference's protocol) or `tools` (assistant `tool_calls` and `tool` messages); see "
        "[Function calling](function-calling.md)", default="text", choices=("text", "tools"))
    vote: str = setting(
        "how voting teams count calls: `reference` (exact arguments, as the reference harness) or "
        "`normalized` (string values trimmed)", default="reference", choices=("reference", "normalized"))
    prompts_dir: str | None = setting(
        "a folder `<topology>/<role>.txt` (or the reference's `<topology>/apibank/<role>.txt`, "
        "e.g. a MAS-PromptBench `configs/prompts`) overriding the packaged role prompts")
    toolsearcher_scorer: str | None = setting(
        "how a ToolSearcher call is scored",
        choices=HANDED_DOWN,
        default_text="`keyword` for Level 1, else `official`", commands=(*_RUN, "score"))
    out_dir: str | None = setting(
        "where results go: one run per folder (a fresh run into a folder holding another run's "
        "results is refused)", default_text="`results/apibank/<model>/<topology>` (see "
        "[Results](results.md)); `show`: the run's folder (default: the one under results/apibank "
        "holding the ID)", role=_OP, commands=("run", "score", "show"))
    resume: bool = setting(
        "continue the run in the out dir: skip instances already finished in `results.jsonl` "
        "(errored ones run again); settings not given are that run's (`run.json`), and one given that differs "
        "from a measured one refuses it; `optimize`: continue a "
        "killed job from its finished phases", parse_bool, False, flag=True, role=_OP,
        commands=("run", "optimize"))
    overwrite: bool = setting(
        "replace the results in the out dir with a fresh run", parse_bool, False, flag=True,
        role=_OP, commands=("run",))
    force: bool = setting(
        "resume (or rerun part of) a run made with other settings, the differences recorded in "
        "`run.json` and `summary.json`; `compare`: compare runs whose data, manifest or ToolSearcher scorer "
        "differ (with a warning)", parse_bool, False, flag=True, role=_OP, commands=("run", "compare"))
    concurrency: int | None = setting(
        "instances in flight at once in each process", at_least(1),
        default_text="remote: 32 (vLLM, SGLang: as many as `--max-in-flight` requests take, 256 single agents), "
                     "embedded model and gold: 1; `optimize`: 8", role=_OP, commands=_TEAM)
    instance_timeout: float = setting(
        "seconds one instance may take before it becomes an error row (0 = no limit)",
        at_least(0, float), 600.0, role=_OP)
    down_after: float = setting(
        "stop the run once the endpoint has answered no model request for this many seconds "
        "while requests kept failing (and none sent before is still being answered); a shorter burst of failures "
        "stops nothing (0 = never); requests in flight then stop retrying", at_least(0, float), 20.0, role=_OP)
    max_consecutive_errors: int | None = setting(
        "deprecated, replaced by `--down-after` (the breaker decides on time, not on a "
        "count of failures): accepted and ignored, except that 0 still turns the breaker off", at_least(0),
        role=_OP)
    epochs: int = setting(
        "solve every instance K times; epoch e samples with every seed moved by e x 10000 (epoch 0: "
        "the protocol's seeds); one row, case and trace per (instance, epoch)", at_least(1), 1)
    baseline: str | None = setting(
        "a results folder to gate against: after the run, pair on the shared instances and fail "
        "the session only if the run is significantly worse (exact McNemar)", role=_OP)
    gate_alpha: float = setting(
        "the regression gate's significance level (with `--apibank-baseline`)", parse_alpha, 0.05,
        role=_OP)

    # the model
    model: str | None = setting(
        "model name; `gold` replays the gold calls (a harness self-check); without `--base-url`: the "
        "embedded model, `embedded:smollm2` or `embedded:gemma`, or `local:PATH.gguf` (a GGUF of yours, served "
        "the same way); `optimize`: also a grid alias (`qwen`, `llama`)", group="model",
        default_text="the embedded model", commands=_TEAM)
    chat_format: str | None = setting(
        "the chat format of a `local:PATH.gguf` without a chat template in its metadata (llama-cpp-python's "
        "names: `chatml`, `gemma`, `llama-3`, ...)", group="model", default_text="the file's own template",
        commands=_TEAM)
    base_url: list[str] = setting(
        "OpenAI-compatible endpoint(s), comma separated (spread by `--routing`); none = the embedded "
        "model", parse_urls, [], env=("OPENAI_BASE_URL",),
        deprecated_env={"APIBANK_BASE_URLS": parse_urls}, group="model", role=_OP, commands=_TEAM)
    routing: str = setting(
        "how requests are spread over several base URLs: `load` (to the fewest outstanding requests "
        "weighted by each endpoint's moving-average latency; an endpoint that keeps failing is left out for a "
        "while) or `round_robin` (each in turn)", default="load", choices=("load", "round_robin"), group="model",
        role=_OP)
    api_key: str | None = setting(
        "the endpoint's API key", env=("OPENAI_API_KEY",), secret=True, group="model", role=_OP)
    temperature: float = setting(
        "sampling temperature", float, 0.2, group="model")
    top_p: float = setting(
        "nucleus sampling", float, 0.9, group="model")
    max_tokens: int = setting(
        "completion token limit", at_least(1), 1024, group="model")
    seed: int = setting(
        "sampling seed: each agent samples with this plus its place in the reference's numbering "
        "(see Protocol); `optimize`, `manifests split`: also the splits' seed; `compare`, `report`: the "
        "bootstrap's seed", int, 0, group="model", commands=(*_TEAM, "manifests", "compare", "report"))
    repetition_penalty: float = setting(
        "repetition penalty, sent as `repetition_penalty` (vLLM, SGLang) or "
        "`repeat_penalty` (llama.cpp), never to a hosted OpenAI-style API", float, 1.05, group="model")
    thinking: bool = setting(
        "the chat template's thinking mode (`chat_template_kwargs.enable_thinking`; vLLM, SGLang, "
        "llama.cpp)", parse_bool, False, flag=True, group="model")
    timeout: float = setting(
        "seconds one HTTP request may wait for the server (connecting, then between bytes of the "
        "answer), counted from when it is sent, not while it waits in the client for a slot; the openai SDK's "
        "default", above(0.0, float), 600.0, group="model", role=_OP)
    max_retries: int = setting(
        "retries of a failed request (timeouts, connection errors, 408, 429, 5xx)",
        at_least(0), 5, group="model", role=_OP)
    max_in_flight: int | None = setting(
        "the ceiling of model requests in flight at once, per process; under it the limit is "
        "learned per endpoint (from 8, or from the ceiling at vLLM and SGLang: grown while latency stays near its "
        "floor, cut when it shows a queue at the server or on 429/503/resets)", at_least(1), group="model",
        role=_OP, default_text="128; 256 when every server batches (vLLM, SGLang: vLLM's default batch)")
    extra_body: dict[str, Any] = setting(
        "JSON object merged into every request", parse_json_object, {}, group="model",
        default_text="-")
    server_kind: str = setting(
        "the kind of server: which sampling fields it takes and how a grammar is sent; "
        "`auto` reads `owned_by` of the endpoint's `/v1/models` (vllm, sglang, llamacpp; anything else is a "
        "hosted API, sent the standard fields only)", default="auto",
        choices=SERVER_KINDS, group="model",
        default_text="`auto` (embedded: `llama.cpp`)")
    constrained: bool | None = setting(
        "grammar-constrained decoding from the visible API schemas", parse_bool, None,
        flag=True, default_text="embedded: on, remote: off", group="model", commands=_TEAM)
    cache: bool = setting(
        "the on-disk response cache (re-runs make no repeated model calls)", parse_bool, True,
        flag=True, deprecated_env=_NO_CACHE, group="model", role=_OP, commands=_TEAM)
    cache_dir: str = setting(
        "the cache folder (responses, the assembled embedded model, the ToolSearcher model)",
        default="~/.cache/apibank-bench", group="model", role=_OP, commands=(*_TEAM, "score"))
    deployment: str | None = setting(
        "the name the response cache keeps this endpoint's answers under; endpoints given the "
        "same name share answers", group="model", role=_OP,
        default_text="the addresses, the model name and what `/models` says about it")
    model_role: list[str] = setting(
        "`ROLE=MODEL` or `ROLE=MODEL@BASE_URL`, repeatable: the model (and endpoint) of one role "
        "of the topology, as traces and `show` name it (`manager`, `caller_worker`, `debater`, one agent as "
        "`debater#1`), or `final`, the role whose answer is scored; MODEL `embedded` (`embedded:KEY`, "
        "`local:PATH.gguf`) is an embedded model; "
        "roles not named use `--model` (`sweep`: `;` between an axis's alternatives, `-` for none)",
        parse_model_roles, [], group="model", repeat=True, default_text="-", commands=_TEAM)
    price: list[str] = setting(
        "`MODEL=INPUT/OUTPUT`, repeatable: the price of a million input and of a million output "
        "tokens of a model; with prices a run's cost is money, without them tokens (no price is built in)",
        parse_prices, [], group="model", repeat=True, role=_OP, default_text="-", commands=(*_RUN, "report"))
    price_file: str | None = setting(
        "a JSON price table `{\"date\": \"YYYY-MM-DD\", \"prices\": {\"MODEL\": [INPUT, OUTPUT]}}` "
        "(per million tokens; prices change, so it names its date); `--price` entries win",
        group="model", role=_OP, commands=(*_RUN, "report"))

    @property
    def is_gold(self) -> bool:
        """Whether the run replays the gold calls (the harness self-check) instead of asking a model."""
        return self.model == "gold"

    @property
    def default_model(self) -> bool:
        """No model, endpoint or role given: the default embedded model answers, and the settings' check of the
        models a run names (handed down: agents.models.check_models) has nothing to check but its install."""
        return not (self.model or self.base_url or self.model_role)

    @property
    def cache_root(self) -> Path:
        return Path(self.cache_dir).expanduser()

    def to_dict(self) -> dict[str, Any]:
        """The settings as `summary.json` records them: secrets left out, URL credentials masked."""
        from apibank_bench.core.redact import redact

        values = {s.name: getattr(self, s.name) for s in RUN_SETTINGS if not s.secret}
        values["base_url"] = [redact(url) for url in self.base_url]
        # What a role's model measures is the model; where it answered is operational, as `base_url` is.
        values["model_role"] = sorted("=".join(model_role_parts(item)[:2]) for item in self.model_role)
        return values

    def to_record(self) -> dict[str, Any]:
        """Every value as plain data, secrets included: for a process of this run (an xdist worker)."""
        return {s.name: getattr(self, s.name) for s in RUN_SETTINGS}


#: The settings of a benchmark run (RunConfig's fields, the pytest options), in the table's order.
RUN_SETTINGS = tuple(Setting(f.name, **f.metadata[SETTING]) for f in fields(RunConfig))


def from_record(record: Mapping[str, Any]) -> RunConfig:
    """The RunConfig `to_record` described (already resolved and checked: nothing is parsed again)."""
    values = {s.name: _fresh(record.get(s.name, s.default)) for s in RUN_SETTINGS}
    if values["shard"] is not None:
        values["shard"] = tuple(values["shard"])
    return RunConfig(**values)
