"""Every setting of every command, declared once.

`SETTINGS` is the one table. From it come the flags of every `apibank-bench` command
(`--NAME`, one spelling everywhere), for the settings of a benchmark run also the pytest
options (`--apibank-NAME`) and ini keys (`apibank_NAME`), the environment variables
(`APIBANK_NAME`, and the OpenAI client's own `OPENAI_BASE_URL` / `OPENAI_API_KEY` where
noted), the README's settings table and the `config.run` part of `summary.json`.
Precedence: command line, then ini, then environment, then default.

This module is the only reader of the environment: lower layers receive values.
Each setting's `role` says what it is to a measurement: part of what is measured, how
the run is carried out (`operational`), or which instances it covers (`selection`);
sweep, resume and compare all ask that field.

Choices that name a registered thing (topologies, ToolSearcher scorers, agent kinds)
are read from that registry when first needed, so a new topology module is all it
takes to add a choice.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import re
import warnings
from dataclasses import dataclass, field, make_dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Iterable, Iterator, Mapping

from apibank_bench.core.memo import load_once

# -- value parsers -------------------------------------------------------------------------

_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


def parse_bool(text: Any) -> bool:
    if isinstance(text, bool):
        return text
    value = str(text).strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"expected a boolean (1/0, true/false, yes/no, on/off), got {text!r}")


def parse_list(text: Any) -> list[str]:
    """"a, b c" or ["a,b", "c"] -> ["a", "b", "c"]."""
    if isinstance(text, (list, tuple)):
        return [item for part in text for item in parse_list(part)]
    return [item for item in str(text).replace(",", " ").split() if item]


def parse_urls(text: Any) -> list[str]:
    return [url.rstrip("/") for url in parse_list(text)]


def parse_shard(text: Any) -> tuple[int, int]:
    index, sep, count = str(text).partition("/")
    try:
        shard = (int(index), int(count))
    except ValueError:
        shard = None
    if not sep or shard is None or not 1 <= shard[0] <= shard[1]:
        raise ValueError(f"expected i/n with 1 <= i <= n, got {text!r}")
    return shard


def parse_json_object(text: Any) -> dict:
    if isinstance(text, dict):
        return text
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ValueError("expected a JSON object")
    return value


#: `ROLE=MODEL` or `ROLE=MODEL@BASE_URL` (the URL starts at the first `@http`; a model name may hold `@`).
_MODEL_ROLE = re.compile(r"^(?P<role>[A-Za-z_][\w#]*)=(?P<model>[^@\s]+(?:@(?!https?://)[^@\s]+)*)(?:@(?P<url>https?://\S+))?$")
#: An alternative of a sweep's `--model-role` axis that assigns no role a model of its own.
NO_ROLE_MODELS = "-"


def parse_model_roles(text: Any) -> list[str]:
    """`--model-role ROLE=MODEL[@BASE_URL]`, repeatable (or several in one value, comma or space separated):
    the assignments, checked for form (which roles exist is the topology's business: agents/team_models.py).
    `-` alone is no assignment (a sweep axis's all-`--model` alternative)."""
    items = [item for item in parse_list(text) if item != NO_ROLE_MODELS]
    roles = []
    for item in items:
        match = _MODEL_ROLE.match(item)
        if not match:
            raise ValueError(f"expected ROLE=MODEL or ROLE=MODEL@BASE_URL, got {item!r}")
        roles.append(match["role"])
    repeated = sorted({role for role in roles if roles.count(role) > 1})
    if repeated:
        raise ValueError(f"a role is given two models: {', '.join(repeated)}")
    return [item.rstrip("/") for item in items]


def model_role_parts(item: str) -> tuple[str, str, str | None]:
    """One checked assignment as (role, model, base URL or None: `--base-url`'s)."""
    match = _MODEL_ROLE.match(item)
    assert match, item
    return match["role"], match["model"], match["url"]


def parse_prices(text: Any) -> list[str]:
    """`--price MODEL=INPUT/OUTPUT` (per million tokens), repeatable: checked for form, kept as given."""
    items = parse_list(text)
    for item in items:
        model, _, pair = item.rpartition("=")
        prices = pair.split("/")
        try:
            ok = bool(model) and len(prices) == 2 and all(float(price) >= 0 for price in prices)
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(f"expected MODEL=INPUT/OUTPUT (prices per million tokens), got {item!r}")
    return items


def _at_least(minimum: int, kind: Callable[[Any], Any] = int) -> Callable[[Any], Any]:
    def parse(text: Any) -> Any:
        value = kind(text)
        if value < minimum:
            raise ValueError(f"must be >= {minimum}, got {text!r}")
        return value
    parse.__name__ = kind.__name__
    return parse


def _above(bound: float, kind: Callable[[Any], Any] = float) -> Callable[[Any], Any]:
    def parse(text: Any) -> Any:
        value = kind(text)
        if not value > bound:
            raise ValueError(f"must be > {bound:g}, got {text!r}")
        return value
    parse.__name__ = kind.__name__
    return parse


def parse_alpha(text: Any) -> float:
    value = float(text)
    if not 0 < value < 1:
        raise ValueError(f"a significance level must be between 0 and 1, got {text!r}")
    return value


# -- the table ---------------------------------------------------------------------------

#: A setting's role: it defines what a run measures, only how the run is carried out, or which instances it covers.
MEASUREMENT, OPERATIONAL, SELECTION = "measurement", "operational", "selection"
ROLES = (MEASUREMENT, OPERATIONAL, SELECTION)
#: The commands that take every setting of a benchmark run as a flag.
RUN_COMMANDS = ("run", "sweep")
#: ... and those that also build a team and talk to a model.
TEAM_COMMANDS = (*RUN_COMMANDS, "optimize")
#: Every command that reads the API-Bank data.
DATA_COMMANDS = (*TEAM_COMMANDS, "score", "summary", "tasks", "manifests", "data", "show")


@dataclass(frozen=True)
class Setting:
    name: str
    help: str
    parse: Callable[[Any], Any] = str
    default: Any = None
    choices: tuple[str, ...] | str | None = None  #: a tuple, or "module:REGISTRY" read lazily
    flag: bool = False  #: a switch: --apibank-NAME / --apibank-no-NAME
    env: tuple[str, ...] = ()  #: extra environment names read after APIBANK_NAME
    deprecated_env: Mapping[str, Callable[[str], Any]] = field(default_factory=dict)  #: old name -> converter
    secret: bool = False  #: never written or printed
    default_text: str | None = None  #: the default as the README states it, where it is not a plain value
    group: str = "run"  #: "run" (what and how to run), "model" (how to reach and sample the model) or
    #: "sweep" (where a sweep's cells run: a flag of `sweep` only)
    role: str = MEASUREMENT  #: MEASUREMENT, OPERATIONAL or SELECTION (see the module's docstring)
    commands: tuple[str, ...] = RUN_COMMANDS  #: the `apibank-bench` commands that take it as `--NAME`
    of_run: bool = True  #: a setting of a benchmark run: a RunConfig field, a pytest option and an ini key
    short: str | None = None  #: a one-letter flag besides `--NAME` (`-n`, pytest-xdist's own)
    repeat: bool = False  #: a list setting whose flag may be given again, each time adding (`--model-role`)

    def __post_init__(self) -> None:
        assert self.role in ROLES, f"{self.name}: role {self.role!r} is not one of {ROLES}"

    @property
    def option(self) -> str:
        return "--apibank-" + self.name.replace("_", "-")

    @property
    def flag_name(self) -> str:
        """The command-line flag, the same in every command."""
        return "--" + self.name.replace("_", "-")

    @property
    def dest(self) -> str:
        return "apibank_" + self.name

    @property
    def env_names(self) -> tuple[str, ...]:
        return ("APIBANK_" + self.name.upper(), *self.env)

    @property
    def many(self) -> bool:
        return self.repeat or self.parse in (parse_list, parse_urls)

    def allowed(self) -> tuple[str, ...] | None:
        if isinstance(self.choices, str):
            module, _, attribute = self.choices.partition(":")
            registry = getattr(importlib.import_module(module), attribute)
            return tuple(registry.names() if hasattr(registry, "names") else registry)
        return self.choices

    def readme_default(self) -> str:
        if self.default_text is not None:
            return self.default_text
        if self.default is None or self.default == []:
            return "-"
        if isinstance(self.default, bool):
            return "on" if self.default else "off"
        return f"`{self.default}`"


_NO_CACHE = {"APIBANK_NO_CACHE": lambda text: not parse_bool(text)}
_RUN, _TEAM, _DATA = RUN_COMMANDS, TEAM_COMMANDS, DATA_COMMANDS
_OP, _SEL = OPERATIONAL, SELECTION

SETTINGS: tuple[Setting, ...] = (
    # what to run
    Setting("root", "the API-Bank data root", default_text="`vendor/api-bank`", role=_OP, commands=_DATA),
    Setting("level", "`all` = the 100-task eval manifest (33/33/34); `1`, `2`, `3` = that level's curated list "
            "(`score`: the level of IDs without a `level-N::` prefix)",
            default="all", choices=("all", "1", "2", "3"), role=_SEL, commands=(*_RUN, "summary", "score")),
    Setting("limit", "run at most N instances of the selection (`apibank-bench run`: default 2, 0 = all)",
            _at_least(0), default_text="all", role=_SEL, commands=(*_RUN, "summary")),
    Setting("offset", "skip the first K instances of the manifest", _at_least(0), 0, role=_SEL,
            commands=(*_RUN, "summary")),
    Setting("only", "only these task IDs (as in the manifest, or without the `level-N::` prefix)", parse_list, [],
            role=_SEL, commands=(*_RUN, "summary")),
    Setting("shard", "`i/n`: every n-th instance starting at the i-th", parse_shard, role=_SEL),
    Setting("topology", "the agent topology", default="single",
            choices="apibank_bench.agents.topologies:TOPOLOGIES", commands=_TEAM),
    Setting("team_size", "agents in a team: 2, 4, 8 or 10", int, 4, commands=_TEAM),
    Setting("rounds", "debate rounds in all, the first answers included (decentralized; the reference's R)",
            _at_least(1), 2, commands=_TEAM),
    Setting("team_protocol", "`topology`: the topology's own graph; `replicas`: the reference's team-size "
            "runners, N independent calls with the topology's final-role prompt (seeds 0..N-1) and the team vote",
            default="topology", choices=("topology", "replicas"), commands=_TEAM),
    Setting("message_format", "what agents pass each other", default="freeform",
            choices=("freeform", "semi_structured", "structured_soft"), commands=_TEAM),
    Setting("agent_kind", "what answers at each node of every topology", default="chat",
            choices="apibank_bench.agents.kinds:AGENT_KINDS"),
    Setting("vote", "how voting teams count calls: `reference` (exact arguments, as the reference harness) or "
            "`normalized` (string values trimmed)", default="reference", choices=("reference", "normalized")),
    Setting("prompts_dir", "a folder `<topology>/<role>.txt` (or the reference's `<topology>/apibank/<role>.txt`, "
            "e.g. a MAS-PromptBench `configs/prompts`) overriding the packaged role prompts"),
    Setting("toolsearcher_scorer", "how a ToolSearcher call is scored",
            choices="apibank_bench.scoring.toolsearcher_scorers:SCORERS",
            default_text="`keyword` for Level 1, else `official`", commands=(*_RUN, "score")),
    Setting("out_dir", "where results go: one run per folder (a fresh run into a folder holding another run's "
            "results is refused)", default_text="`results/apibank/<model>/<topology>` (see "
            "[Results](results.md)); `show`: the run's folder (default: the one under results/apibank "
            "holding the ID)", role=_OP, commands=("run", "score", "show")),
    Setting("resume", "continue the run in the out dir: skip instances already finished in `results.jsonl` "
            "(errored ones run again); refused if the run there measured other settings; `optimize`: continue a "
            "killed job from its finished phases", parse_bool, False, flag=True, role=_OP,
            commands=("run", "optimize")),
    Setting("overwrite", "replace the results in the out dir with a fresh run", parse_bool, False, flag=True,
            role=_OP, commands=("run",)),
    Setting("force", "resume (or rerun part of) a run made with other settings, the differences recorded in "
            "`run.json` and `summary.json`; `compare`: compare runs whose data, manifest or ToolSearcher scorer "
            "differ (with a warning)", parse_bool, False, flag=True, role=_OP, commands=("run", "compare")),
    Setting("concurrency", "instances in flight at once in each process", _at_least(1),
            default_text="remote: 32, embedded model and gold: 1; `optimize`: 8", role=_OP, commands=_TEAM),
    Setting("instance_timeout", "seconds one instance may take before it becomes an error row (0 = no limit)",
            _at_least(0, float), 600.0, role=_OP),
    Setting("down_after", "stop the run once the endpoint has answered no model request for this many seconds "
            "while requests kept failing (and none sent before is still being answered); a shorter burst of failures "
            "stops nothing (0 = never); requests in flight then stop retrying", _at_least(0, float), 20.0, role=_OP),
    Setting("max_consecutive_errors", "deprecated, replaced by `--down-after` (the breaker decides on time, not on a "
            "count of failures): accepted and ignored, except that 0 still turns the breaker off", _at_least(0),
            role=_OP),
    Setting("epochs", "solve every instance K times; epoch e samples with every seed moved by e x 10000 (epoch 0: "
            "the protocol's seeds); one row, case and trace per (instance, epoch)", _at_least(1), 1),
    Setting("baseline", "a results folder to gate against: after the run, pair on the shared instances and fail "
            "the session only if the run is significantly worse (exact McNemar)", role=_OP),
    Setting("gate_alpha", "the regression gate's significance level (with `--apibank-baseline`)", parse_alpha, 0.05,
            role=_OP),
    # the model
    Setting("model", "model name; `gold` replays the gold calls (a harness self-check); `optimize`: also a grid "
            "alias (`qwen`, `llama`)", group="model", default_text="the embedded model", commands=_TEAM),
    Setting("base_url", "OpenAI-compatible endpoint(s), comma separated (spread by `--routing`); none = the embedded "
            "model", parse_urls, [], env=("OPENAI_BASE_URL",),
            deprecated_env={"APIBANK_BASE_URLS": parse_urls}, group="model", role=_OP, commands=_TEAM),
    Setting("routing", "how requests are spread over several base URLs: `load` (to the fewest outstanding requests "
            "weighted by each endpoint's moving-average latency; an endpoint that keeps failing is left out for a "
            "while) or `round_robin` (each in turn)", default="load", choices=("load", "round_robin"), group="model",
            role=_OP),
    Setting("api_key", "the endpoint's API key", env=("OPENAI_API_KEY",), secret=True, group="model", role=_OP),
    Setting("temperature", "sampling temperature", float, 0.2, group="model"),
    Setting("top_p", "nucleus sampling", float, 0.9, group="model"),
    Setting("max_tokens", "completion token limit", _at_least(1), 1024, group="model"),
    Setting("seed", "sampling seed: each agent samples with this plus its place in the reference's numbering "
            "(see Protocol); `optimize`, `manifests split`: also the splits' seed; `compare`, `report`: the "
            "bootstrap's seed", int, 0, group="model", commands=(*_TEAM, "manifests", "compare", "report")),
    Setting("repetition_penalty", "repetition penalty, sent as `repetition_penalty` (vLLM, SGLang) or "
            "`repeat_penalty` (llama.cpp), never to a hosted OpenAI-style API", float, 1.05, group="model"),
    Setting("thinking", "the chat template's thinking mode (`chat_template_kwargs.enable_thinking`; vLLM, SGLang, "
            "llama.cpp)", parse_bool, False, flag=True, group="model"),
    Setting("timeout", "seconds one HTTP request may wait for the server (connecting, then between bytes of the "
            "answer), counted from when it is sent, not while it waits in the client for a slot; the openai SDK's "
            "default", _above(0.0, float), 600.0, group="model", role=_OP),
    Setting("max_retries", "retries of a failed request (timeouts, connection errors, 408, 429, 5xx)",
            _at_least(0), 5, group="model", role=_OP),
    Setting("max_in_flight", "the ceiling of model requests in flight at once, per process; under it the limit is "
            "learned per endpoint (from 8: grown while latency stays near its floor, cut when it shows a queue at the "
            "server or on 429/503/resets)", _at_least(1), 128, group="model", role=_OP),
    Setting("extra_body", "JSON object merged into every request", parse_json_object, {}, group="model",
            default_text="-"),
    Setting("server_kind", "the kind of server: which sampling fields it takes and how a grammar is sent; "
            "`auto` reads `owned_by` of the endpoint's `/v1/models` (vllm, sglang, llamacpp; anything else is a "
            "hosted API, sent the standard fields only)", default="auto",
            choices="apibank_bench.llm.config:SERVER_CHOICES", group="model",
            default_text="`auto` (embedded: `llama.cpp`)"),
    Setting("constrained", "grammar-constrained decoding from the visible API schemas", parse_bool, None,
            flag=True, default_text="embedded: on, remote: off", group="model", commands=_TEAM),
    Setting("cache", "the on-disk response cache (re-runs make no repeated model calls)", parse_bool, True,
            flag=True, deprecated_env=_NO_CACHE, group="model", role=_OP, commands=_TEAM),
    Setting("cache_dir", "the cache folder (responses, the assembled embedded model, the ToolSearcher model)",
            default="~/.cache/apibank-bench", group="model", role=_OP, commands=(*_TEAM, "score")),
    Setting("deployment", "the name the response cache keeps this endpoint's answers under; endpoints given the "
            "same name share answers", group="model", role=_OP,
            default_text="the addresses, the model name and what `/models` says about it"),
    Setting("model_role", "`ROLE=MODEL` or `ROLE=MODEL@BASE_URL`, repeatable: the model (and endpoint) of one role "
            "of the topology, as traces and `show` name it (`manager`, `caller_worker`, `debater`, one agent as "
            "`debater#1`), or `final`, the role whose answer is scored; MODEL `embedded` is the embedded model; "
            "roles not named use `--model` (`sweep`: `;` between an axis's alternatives, `-` for none)",
            parse_model_roles, [], group="model", repeat=True, default_text="-", commands=_TEAM),
    Setting("price", "`MODEL=INPUT/OUTPUT`, repeatable: the price of a million input and of a million output "
            "tokens of a model; with prices a run's cost is money, without them tokens (no price is built in)",
            parse_prices, [], group="model", repeat=True, role=_OP, default_text="-", commands=(*_RUN, "report")),
    Setting("price_file", "a JSON price table `{\"date\": \"YYYY-MM-DD\", \"prices\": {\"MODEL\": [INPUT, OUTPUT]}}` "
            "(per million tokens; prices change, so it names its date); `--price` entries win",
            group="model", role=_OP, commands=(*_RUN, "report")),
    # settings of one command, not of a benchmark run
    Setting("workers", "pytest-xdist worker processes (e.g. 2 or auto); per cell for `sweep`", short="-n",
            role=_OP, of_run=False),
    Setting("data_base_url", "`data fetch` downloads each file from URL/<owner>/<repo>/<commit>/<path> (a mirror)",
            default="https://raw.githubusercontent.com", role=_OP, commands=("data",), of_run=False),
    Setting("downloads", "parallel downloads of `data fetch`", _at_least(1), 8, role=_OP, commands=("data",),
            of_run=False),
    Setting("method", "the prompt optimizer", choices="apibank_bench.optimize.methods:METHODS",
            default_text="- (required)", commands=("optimize",), of_run=False),
    Setting("dataset", "accepted for the reference's command line (API-Bank is the only dataset)", default="apibank",
            choices=("apibank",), commands=("optimize",), of_run=False),
    Setting("model_aliases", "`NAME=MODEL` pairs overriding the experiment grid's model aliases", parse_list, [],
            commands=("optimize",), of_run=False),
    Setting("train", "training tasks (level-balanced, from the pool minus the eval set)", _at_least(0), 50,
            role=_SEL, commands=("optimize", "manifests"), of_run=False),
    Setting("validation", "validation tasks (from the same pool)", _at_least(0), 50, role=_SEL,
            commands=("optimize", "manifests"), of_run=False),
    Setting("eval_limit", "eval instances in optimize's final comparison of seed and optimized prompts",
            _at_least(1), 100, role=_SEL, commands=("optimize",), of_run=False),
    Setting("budget", "the optimizer's budget (see docs/optimizing.md)", _at_least(1),
            default_text="per method: 600 (GEPA, MASPO), 10 trials (MIPROv2)", commands=("optimize",), of_run=False),
    Setting("optimizer_model", "the reflection/proposal/judge model (alias or name)", default_text="the task model",
            group="model", commands=("optimize",), of_run=False),
    Setting("optimizer_base_url", "its endpoint(s)", parse_urls, [], default_text="the task model's", group="model",
            role=_OP, commands=("optimize",), of_run=False),
    Setting("allow_any_cell", "run an optimize cell outside the experiment grid", parse_bool, False, flag=True,
            role=_OP, commands=("optimize",), of_run=False),
    # where a sweep's cells run (`apibank-bench sweep` only)
    Setting("executor", "where a sweep's cells run: `local` (one after another here) or `slurm` (one Slurm array "
            "job, through submitit)", default="local", choices="apibank_bench.sweeps.executors:EXECUTORS",
            group="sweep", role=_OP, commands=("sweep",), of_run=False),
    Setting("slurm_partition", "the Slurm partition of the cells' jobs", default_text="the cluster's default",
            group="sweep", role=_OP, commands=("sweep",), of_run=False),
    Setting("slurm_time", "time limit of each cell's job, in minutes", _at_least(1), 240, group="sweep", role=_OP, commands=("sweep",), of_run=False),
    Setting("slurm_gpus", "GPUs of each cell's job (`--gpus-per-node`)", _at_least(0), group="sweep", role=_OP, commands=("sweep",), of_run=False),
    Setting("slurm_cpus", "CPUs of each cell's job (`--cpus-per-task`)", _at_least(1), group="sweep", role=_OP, commands=("sweep",), of_run=False),
    Setting("slurm_mem", "memory of each cell's job, as sbatch writes it (`32G`)", group="sweep", role=_OP, commands=("sweep",), of_run=False,
            default_text="the cluster's default"),
    Setting("slurm_max_running", "cells of the array job running at once", _at_least(1), group="sweep", role=_OP, commands=("sweep",), of_run=False,
            default_text="no limit"),
    Setting("slurm_sbatch", "further sbatch options as a JSON object, e.g. `{\"account\": \"lab\", \"qos\": "
            "\"high\"}`", parse_json_object, {}, default_text="-", group="sweep", role=_OP, commands=("sweep",), of_run=False),
    Setting("slurm_setup", "a shell command each cell's job runs first (e.g. `module load cuda`)", group="sweep", role=_OP, commands=("sweep",), of_run=False),
    Setting("endpoint_command", "a shell command each cell runs where it lands to start its own model server; it "
            "prints the server's base URL, which the cell uses, and is stopped when the cell ends "
            "(`$APIBANK_FREE_PORT` holds a free port)", group="sweep", role=_OP, commands=("sweep",), of_run=False),
    Setting("endpoint_wait", "seconds a cell waits for its endpoint command's server to answer", _at_least(1, float),
            900.0, group="sweep", role=_OP, commands=("sweep",), of_run=False),
)

BY_NAME = {setting.name: setting for setting in SETTINGS}
#: The settings of a benchmark run (RunConfig's fields, the pytest options).
RUN_SETTINGS = tuple(setting for setting in SETTINGS if setting.of_run)
#: Where a sweep's cells run (flags of `sweep` only).
SWEEP_SETTINGS = tuple(setting for setting in SETTINGS if setting.group == "sweep")


TEAM_SIZES = (2, 4, 8, 10)
RUN_DEFAULT_LIMIT = 2  #: `apibank-bench run` runs 2 instances unless told otherwise (`--limit 0` = all)


def names_with_role(role: str) -> tuple[str, ...]:
    """The settings of one role, of every command, in the table's order (e.g. OPERATIONAL: what may
    differ between two parts of one run)."""
    return tuple(setting.name for setting in SETTINGS if setting.role == role)


def differences(recorded: Mapping[str, Any], wanted: Mapping[str, Any]) -> dict[str, list[str]]:
    """The run settings two runs' `config.run` records disagree on, by role: {MEASUREMENT: [...], SELECTION:
    [...]} (operational ones may differ within one run: they are left out). Sweep cells and resumed
    runs ask this before adding to a folder."""
    found: dict[str, list[str]] = {MEASUREMENT: [], SELECTION: []}
    for setting in RUN_SETTINGS:
        name = setting.name
        # A setting a run recorded before it existed had its default then (`--model-role`: none).
        if setting.role != OPERATIONAL and name in wanted and recorded.get(name, setting.default) != wanted[name]:
            found[setting.role].append(name)
    return found


def run_limit(raw: Any) -> int | None:
    """The limit of `apibank-bench run` (and of each sweep cell) for a raw `--limit`: unset means
    RUN_DEFAULT_LIMIT instances, 0 means all (None)."""
    try:
        limit = RUN_DEFAULT_LIMIT if raw is None else BY_NAME["limit"].parse(raw)
    except ValueError as exc:
        raise ValueError(f"{BY_NAME['limit'].flag_name}: {exc}") from None
    return limit or None


class _Base:
    """Derived values of a run's settings (the fields come from `RUN_SETTINGS`)."""

    @property
    def is_gold(self) -> bool:
        return self.model == "gold"

    @property
    def results_dir(self) -> str:
        """`out_dir`, else a folder per model and per the settings most often varied, so that two
        runs a user is likely to make one after the other do not meet in one folder:
        `results/apibank/<model>/<topology>[_<kind>][-n<team size>][-r<rounds>][-<format>][-seed<seed>]`
        (`results/apibank/gold` for the self-check)."""
        if self.out_dir:
            return self.out_dir
        if self.is_gold:
            return os.path.join("results", "apibank", "gold")
        plain = self.agent_kind == "chat" or self.topology == "agents_sdk"
        name = self.topology if plain else f"{self.topology}_{self.agent_kind}"
        if self.team_protocol != "topology":
            name += f"_{self.team_protocol}"
        team = self.topology not in ("single", "agents_sdk")
        if team:
            name += f"-n{self.team_size}" + (f"-r{self.rounds}" if self.topology == "decentralized" else "")
            name += "" if self.message_format == "freeform" else f"-{self.message_format}"
        name += f"-seed{self.seed}" if self.seed else ""
        model = re.sub(r"[^A-Za-z0-9._-]+", "_", self.model or "embedded").strip("._") or "model"
        return os.path.join("results", "apibank", model, name)

    @property
    def instances_in_flight(self) -> int:
        """`concurrency`, else 32 for a remote endpoint and 1 for the embedded model (2 CPU cores
        serve one completion at a time) and the gold self-check (CPU-bound)."""
        if self.concurrency:
            return self.concurrency
        return 32 if self.base_url and not self.is_gold else 1

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


def _fresh(value: Any) -> Any:
    return value.copy() if isinstance(value, (list, dict)) else value


@load_once
def _run_config_class() -> type:
    """`RunConfig`, made on first use: generating the methods of its many fields costs a short command
    that runs no benchmark (`summary`, `score`, `--help`) a noticeable part of its start."""
    cls = make_dataclass(
        "RunConfig",
        [(s.name, Any, field(default_factory=lambda d=s.default: _fresh(d))) for s in RUN_SETTINGS],
        bases=(_Base,), frozen=True,
    )
    cls.__module__ = __name__
    cls.__doc__ = "One run's settings; build it with `resolve`."
    globals()["RunConfig"] = cls  # later lookups find it without `__getattr__`
    return cls


def __getattr__(name: str) -> Any:
    if name == "RunConfig":  # `settings.RunConfig`, `from ...settings import RunConfig`
        return _run_config_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: The attribute holding a RunConfig on an object handed to `pytest.main(plugins=[...])` (`apibank-bench run`
#: does): the plugin takes those settings as they are, with no options to parse again.
GIVEN = "apibank_run_config"
GIVEN_NAMES = "apibank_given_names"  #: beside it, the names of the settings the user set


def from_record(record: Mapping[str, Any]) -> RunConfig:  # noqa: F821 - made on first use (_run_config_class)
    """The RunConfig `to_record` described (already resolved and checked: nothing is parsed again)."""
    values = {s.name: _fresh(record.get(s.name, s.default)) for s in RUN_SETTINGS}
    if values["shard"] is not None:
        values["shard"] = tuple(values["shard"])
    return _run_config_class()(**values)


# -- resolution ---------------------------------------------------------------------------

def _from_environment(setting: Setting, environ: Mapping[str, str]) -> tuple[Any, str] | None:
    """The raw value and the variable it came from, or None."""
    for name in setting.env_names:
        if environ.get(name, "").strip():
            return environ[name], name
    for name, convert in setting.deprecated_env.items():
        if environ.get(name, "").strip():
            replacement = setting.env_names[0]
            warnings.warn(f"{name} is deprecated and will be removed in the next release; use {replacement}",
                          DeprecationWarning, stacklevel=4)
            return convert(environ[name]), name
    return None


def _check(setting: Setting, value: Any, where: str) -> Any:
    allowed = setting.allowed() if setting.choices else None
    if allowed and value is not None and str(value) not in allowed:
        raise ValueError(f"{where}: {value!r} is not one of {', '.join(allowed)}")
    return value


# -- the words of the command the user typed ---------------------------------------------------

#: Set (to "command") while an `apibank-bench` command runs, and inherited by the pytest it starts
#: and that pytest's xdist workers: messages then name `run`'s flags (`--resume`), and under plain
#: pytest the pytest options (`--apibank-resume`).
VOICE_ENV = "APIBANK_VOICE"


def flag(name: str) -> str:
    """The flag of setting `name` as the user types it: `--NAME` under `apibank-bench`, else `--apibank-NAME`."""
    dashed = name.replace("_", "-")
    return f"--{dashed}" if os.environ.get(VOICE_ENV) == "command" else f"--apibank-{dashed}"


def spoken(option: str) -> str:
    """A `--apibank-NAME` option in the words of the typed command (anything else unchanged)."""
    return flag(option[len("--apibank-"):]) if option.startswith("--apibank-") else option


@contextlib.contextmanager
def command_voice() -> Iterator[None]:
    """Messages name the command's flags while this lasts (the CLI wraps every command in it)."""
    old = os.environ.get(VOICE_ENV)
    os.environ[VOICE_ENV] = "command"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(VOICE_ENV, None)
        else:
            os.environ[VOICE_ENV] = old


def _raw(setting: Setting, option_value: Callable[[Setting], Any], ini_value: Callable[[Setting], Any],
         environ: Mapping[str, str]) -> Any:
    """The raw value the option, the ini file or the environment gives one setting (None: nothing does)."""
    for raw in (option_value(setting), ini_value(setting)):
        if not (raw is None or raw == "" or raw == []):
            return raw
    found = _from_environment(setting, environ)
    return found[0] if found else None


def given_names(option_value: Callable[[Setting], Any] = lambda s: None,
                ini_value: Callable[[Setting], Any] = lambda s: None,
                environ: Mapping[str, str] | None = None) -> set[str]:
    """The settings that the command line, the ini file or the environment set (the rest are defaults)."""
    environ = os.environ if environ is None else environ
    return {s.name for s in RUN_SETTINGS if _raw(s, option_value, ini_value, environ) is not None}


def _resolve(chosen: Iterable[Setting], option_value: Callable[[Setting], Any], option_name: Callable[[Setting], str],
             ini_value: Callable[[Setting], Any], environ: Mapping[str, str] | None) -> dict[str, Any]:
    """{name: value} for the chosen settings: option, else ini, else environment, else default; each parsed
    and checked. Errors name the option (or the variable) the bad value came from."""
    environ = os.environ if environ is None else environ
    values = {}
    for setting in chosen:
        raw, where = option_value(setting), option_name(setting)
        if raw is None or raw == []:
            raw, where = ini_value(setting), f"ini {setting.dest}"
        if raw is None or raw == "" or raw == []:
            found = _from_environment(setting, environ)
            raw, where = found if found else (None, "")
        try:
            value = setting.default if raw is None else setting.parse(raw)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: {exc}") from None
        values[setting.name] = _fresh(_check(setting, value, where))
    return values


def resolve(option_value: Callable[[Setting], Any] = lambda s: None,
            ini_value: Callable[[Setting], Any] = lambda s: None,
            environ: Mapping[str, str] | None = None) -> RunConfig:  # noqa: F821 - made on first use (_run_config_class)
    """A run's settings (pytest options: `option_value` answers for `--apibank-NAME`)."""
    cfg = _run_config_class()(**_resolve(RUN_SETTINGS, option_value, lambda s: flag(s.name), ini_value, environ))
    if cfg.topology != "single" and cfg.team_size not in TEAM_SIZES:
        raise ValueError(f"{flag('team_size')} must be one of {', '.join(map(str, TEAM_SIZES))}, got {cfg.team_size}")
    return cfg


def from_environment(environ: Mapping[str, str] | None = None, **overrides: Any) -> RunConfig:  # noqa: F821 - made on first use (_run_config_class)
    """Settings from the environment and defaults only (commands outside a run), with overrides."""
    return resolve(lambda s: overrides.get(s.name), environ=environ)


def value_from_environment(name: str, environ: Mapping[str, str] | None = None) -> Any:
    """One setting from the environment, else its default (for code that runs outside a run)."""
    setting = BY_NAME[name]
    found = _from_environment(setting, os.environ if environ is None else environ)
    return setting.default if found is None else setting.parse(found[0])


#: Variables the suite sets for a library it imports, only while importing it (and restores after).
#: litellm (imported by DSPy for MIPROv2) fetches a price list from GitHub at import unless told not to.
LIBRARY_ENVIRONMENT = {"litellm": {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}}


@contextlib.contextmanager
def library_environment(library: str):
    """`LIBRARY_ENVIRONMENT[library]` in the environment for the duration (a value the user set wins)."""
    wanted = {name: value for name, value in LIBRARY_ENVIRONMENT[library].items() if name not in os.environ}
    os.environ.update(wanted)
    try:
        yield
    finally:
        for name in wanted:
            os.environ.pop(name, None)


def of_command(command: str) -> tuple[Setting, ...]:
    """The settings a command takes as flags, in the table's order."""
    return tuple(setting for setting in SETTINGS if command in setting.commands)


def command_values(args: Any, command: str, environ: Mapping[str, str] | None = None,
                   **given: Any) -> SimpleNamespace:
    """A command's settings from its parsed flags (`add_command_flags`), else the environment, else the
    defaults; `given` stands in for flags the command fills itself."""
    def flag(setting: Setting) -> Any:
        return given[setting.name] if setting.name in given else getattr(args, setting.name, None)

    values = _resolve(of_command(command), flag, lambda s: s.flag_name, lambda s: None, environ)
    return SimpleNamespace(**values)


def resolve_sweep(option_value: Callable[[Setting], Any] = lambda s: None,
                  environ: Mapping[str, str] | None = None) -> SimpleNamespace:
    """Where a sweep's cells run: flag, else environment, else default."""
    return SimpleNamespace(**_resolve(SWEEP_SETTINGS, option_value, lambda s: s.flag_name, lambda s: None, environ))


def value_of(args: Any, name: str, environ: Mapping[str, str] | None = None) -> Any:
    """One setting of a command: its flag, else the environment, else the default."""
    setting = BY_NAME[name]
    return _resolve((setting,), lambda s: getattr(args, s.name, None), lambda s: s.flag_name, lambda s: None,
                    environ)[name]


def run_config_of(args: Any, environ: Mapping[str, str] | None = None, **given: Any) -> RunConfig:  # noqa: F821 - made on first use (_run_config_class)
    """A run's settings from a command's flags (errors name the command's `--NAME`)."""
    def flag(setting: Setting) -> Any:
        return given[setting.name] if setting.name in given else getattr(args, setting.name, None)

    try:
        return resolve(flag, environ=environ)
    except ValueError as exc:
        raise ValueError(str(exc).replace("--apibank-", "--")) from None


# -- what the table generates --------------------------------------------------------------

def add_pytest_options(parser) -> None:
    group = parser.getgroup("apibank", "API-Bank benchmark (also ini apibank_* and env APIBANK_*)")
    for setting in RUN_SETTINGS:
        if setting.flag:
            group.addoption(setting.option, action="store_const", const="true", dest=setting.dest, default=None,
                            help=setting.help)
            group.addoption("--apibank-no-" + setting.name.replace("_", "-"), action="store_const", const="false",
                            dest=setting.dest, help=f"turn off: {setting.help}")
        else:
            group.addoption(setting.option, dest=setting.dest, default=None,
                            nargs="+" if setting.many else None, help=setting.help,
                            **({"action": "extend"} if setting.repeat else {}))
        parser.addini(setting.dest, setting.help, default=None)


#: Marks the argparse actions the table made (a test checks that commands declare no others for settings).
FROM_TABLE = "apibank_setting"


def add_command_flags(parser, command: str, skip: Iterable[str] = ()) -> None:
    """The command's settings as its flags (`--NAME`, the same in every command); unset flags stay None."""
    import argparse

    groups: dict[str, Any] = {}
    titles = {"run": "settings", "model": "model settings (default: the embedded local model)",
              "sweep": "where the cells run"}
    for setting in of_command(command):
        if setting.name in skip:
            continue
        if setting.group not in groups:
            groups[setting.group] = parser.add_argument_group(titles[setting.group])
        names = [setting.flag_name] + ([setting.short] if setting.short else [])
        if setting.flag:
            action = groups[setting.group].add_argument(*names, action=argparse.BooleanOptionalAction, default=None,
                                                        help=setting.help)
        else:
            action = groups[setting.group].add_argument(*names, default=None, nargs="+" if setting.many else None,
                                                        help=setting.help, metavar=setting.name.upper(),
                                                        **({"action": "extend"} if setting.repeat else {}))
        setattr(action, FROM_TABLE, setting.name)


def pytest_argv(values: Mapping[str, Any], prefix: str = "--apibank-") -> list[str]:
    """Options standing for the given (unparsed, non-None) setting values: `--apibank-NAME` for
    pytest, or with `prefix="--"` the flags of `apibank-bench run`."""
    argv: list[str] = []
    for setting in SETTINGS:
        value = values.get(setting.name)
        if value is None or (prefix != "--" and not setting.of_run):
            continue
        option = prefix + setting.name.replace("_", "-")
        if setting.flag:
            argv.append(option if parse_bool(value) else prefix + "no-" + setting.name.replace("_", "-"))
        elif setting.many:
            argv += [option, *([value] if isinstance(value, str) else value)]
        else:
            argv += [option, str(value)]
    return argv


def markdown_table() -> str:
    """The README's settings table."""
    lines = ["| flag | pytest option | environment | default | role | commands | meaning |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for setting in SETTINGS:
        choices = setting.allowed()
        meaning = setting.help + (f" (one of {', '.join(f'`{c}`' for c in choices)})" if choices else "")
        env = ", ".join(f"`{name}`" for name in setting.env_names)
        flag = f"`{setting.flag_name}`" + (f", `{setting.short}`" if setting.short else "")
        option = f"`{setting.option}`" if setting.of_run else "-"
        commands = ", ".join(setting.commands)
        lines.append(f"| {flag} | {option} | {env} | {setting.readme_default()} | {setting.role} | {commands} "
                     f"| {meaning} |")
    return "\n".join(lines)


README_BLOCK = ("<!-- settings table: start -->\n", "\n<!-- settings table: end -->")


def write_readme_table(readme: Path) -> None:
    """Replace the table between the README's markers with the generated one."""
    text = readme.read_text(encoding="utf-8")
    start, end = text.index(README_BLOCK[0]) + len(README_BLOCK[0]), text.index(README_BLOCK[1])
    readme.write_text(text[:start] + markdown_table() + text[end:], encoding="utf-8")


if __name__ == "__main__":  # python -m apibank_bench.core.settings [--write-readme]
    import sys

    if "--write-readme" in sys.argv:
        write_readme_table(Path(__file__).resolve().parents[2] / "docs" / "settings.md")
    else:
        print(markdown_table())


@contextlib.contextmanager
def secrets_in_environment(given: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """The values without secrets, which meanwhile are in this process's environment: a cell job
    inherits them (locally, or through the environment sbatch exports) and no job file holds them."""
    secret = {s.name: s.env_names[0] for s in SETTINGS if s.secret and given.get(s.name) is not None}
    saved = {variable: os.environ.get(variable) for variable in secret.values()}
    os.environ.update({variable: str(given[name]) for name, variable in secret.items()})
    try:
        yield {name: value for name, value in given.items() if name not in secret}
    finally:
        for variable, value in saved.items():
            if value is None:
                os.environ.pop(variable, None)
            else:
                os.environ[variable] = value
