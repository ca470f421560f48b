"""Which model a run talks to: a remote OpenAI-compatible endpoint, or the embedded one."""

from __future__ import annotations

import dataclasses
import json
import warnings
from typing import TYPE_CHECKING, Any, Callable

from apibank_bench.llm import ChatClient, ModelConfig, is_embedded_model
from apibank_bench.llm.config import server_kind_of
from apibank_bench.llm.client import NO_KEY
from apibank_bench.llm.embedded_models import LOCAL_PREFIX, SHIPPED_PREFIX, EmbeddedChoice, check_local, choose
from apibank_bench.llm.embedded_launcher import LOCAL_MODEL  # the default embedded model's name
from apibank_bench.llm.probe import probe_models, probe_system
from apibank_bench.core.redact import redact
from apibank_bench.core.settings import RunConfig, flag

if TYPE_CHECKING:
    from apibank_bench.agents.model_roles import Assignment
    from apibank_bench.agents.team_models import TeamModels

#: What of a `/models` entry identifies the model served (not `created`, which some servers set to
#: the time of asking, nor vLLM's per-request `permission` IDs).
MODEL_FIELDS = ("id", "root", "parent", "owned_by", "max_model_len", "meta")


def needs_local_server(cfg: RunConfig) -> bool:
    """Whether the run asks an embedded model: `--model` without `--base-url`, or a role's `embedded`
    (`embedded:KEY`, `local:PATH`)."""
    from apibank_bench.agents.model_roles import assignments, is_embedded_role

    return not cfg.is_gold and (not cfg.base_url or any(is_embedded_role(a) for a in assignments(cfg)))


def check_model_and_endpoint(cfg: RunConfig) -> None:
    """The settings' one check that a run names the model that answers (a ValueError: a usage error naming the
    flag to give). An endpoint needs a model name; a model name without an endpoint must designate an
    embedded model (`llm.is_embedded_model`), else the embedded model's answers would be recorded under a
    name the user meant for another model. Handed down to every resolved RunConfig (runs.setting_rules)."""
    if cfg.is_gold:
        return
    if cfg.base_url and not cfg.model:
        raise ValueError(f"no model name: pass {flag('model')} NAME (or set APIBANK_MODEL) for the endpoint at "
                         f"{flag('base_url')}")
    if not cfg.base_url and not is_embedded_model(cfg.model):
        raise ValueError(f"{flag('model')} {cfg.model} names no endpoint: give {flag('base_url')} URL of the server "
                         f"that serves {cfg.model}; without {flag('base_url')} the embedded model answers, whose "
                         f"name is {LOCAL_MODEL} (give no {flag('model')}, or {flag('model')} {LOCAL_MODEL}; "
                         f"{SHIPPED_PREFIX}KEY or {LOCAL_PREFIX}PATH.gguf for another embedded model)")


_CHOICES: dict[tuple, EmbeddedChoice] = {}


def embedded_choice(cfg: RunConfig, model: str | None = None) -> EmbeddedChoice:
    """The embedded model `model` designates (default: the run's `--model`), a researcher's file read and
    checked once per process (`embedded_models.check_local`: a ValueError is a usage error)."""
    name = cfg.model if model is None else model
    choice = choose(name, cfg.chat_format)
    if choice.shipped is not None:
        return choice
    assert choice.path is not None
    try:
        stat = choice.path.stat()
        key: tuple = (str(choice.path), stat.st_size, stat.st_mtime_ns, cfg.chat_format)
    except OSError:
        key = (str(choice.path), None, None, cfg.chat_format)
    if key not in _CHOICES:
        _CHOICES[key] = check_local(choice, cfg.cache_root / "gguf-sha256.json", n_ctx=cfg.max_tokens + 3072)
    return _CHOICES[key]


def check_embedded(cfg: RunConfig) -> None:
    """Every embedded model the run asks (its own, its roles') resolved and its file checked: a ValueError of
    one line (a usage error) before anything runs."""
    from apibank_bench.agents.model_roles import assignments, is_embedded_role

    from apibank_bench.llm.embedded_models import check_installed

    if cfg.is_gold:
        return
    if not cfg.base_url:
        check_installed(embedded_choice(cfg))
    for given in assignments(cfg):
        if is_embedded_role(given):
            try:
                check_installed(embedded_choice(cfg, given.model))
            except ValueError as exc:  # said in the words of the flag that named it
                said = str(exc).removeprefix(f"--model {given.model}: ")
                raise ValueError(f"{flag('model_role')} {given.role}={given.model}: {said}") from None


def embedded_servers(cfg: RunConfig, task_ids: Callable[[], list[str]] = list,
                     announce: Callable[[str], None] = lambda title: None) -> Any:
    """The run's embedded models, each started on first use (llm.embedded_launcher.OnDemandServer); a researcher's
    file gets a context sized from the single-agent prompts of `task_ids()` in its own tokens."""
    from apibank_bench.llm.embedded_launcher import OnDemandServer

    def prompts() -> list[str]:
        from apibank_bench.agents.prompts import role_prompt, task_prompt
        from apibank_bench.agents.topologies import LONE
        from apibank_bench.data.tasks import get_task

        system = role_prompt(LONE, "solver")
        return [system + "\n\n" + task_prompt(get_task(task, root=cfg.root)) for task in dict.fromkeys(task_ids())]

    return OnDemandServer(cfg.cache_root, announce, model=cfg.model or "", chat_format=cfg.chat_format,
                          prompts=prompts, max_tokens=cfg.max_tokens,
                          checked=lambda name: embedded_choice(cfg, name))


def embedded_deployment(choice: EmbeddedChoice) -> str:
    """What the response cache keeps an embedded model's answers under: its file's hash, not its name or path
    (two files with one name never share answers; one file at two paths does)."""
    return f"embedded llama.cpp: sha256 {choice.sha256}"


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


def system_folding(cfg: RunConfig, models: Any, local: bool = False) -> tuple[bool, str]:
    """Whether the run folds system messages into the first user message, and why.

    An embedded model's are folded when its chat format drops them (llama-cpp-python's `gemma`; a file's own
    template, SmolLM2's, keeps them). A server of the llama.cpp kind, or
    llama-cpp-python's (`owned_by: "me"`), formats chats with templates of its own, some of which drop them
    silently: each of its endpoints is asked once with and without a system message (`probe.probe_system`),
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


def model_client(cfg: RunConfig, local_url: Callable[..., str] | None, sharing: int = 1) -> "TeamModels | None":
    """The run's shared clients, None for the gold self-check; starts the embedded model if needed.

    One client for `--model` and one per other model and endpoint a role is given (`--model-role`); they
    share the default client's circuit breaker. An unknown role is a ValueError (a usage error).
    `sharing`: the processes of the run that send to the endpoints at once (xdist workers)."""
    from apibank_bench.agents.model_roles import assignments, check_assignments, is_embedded_role, topology_roles
    from apibank_bench.agents.team_models import TeamModels

    if cfg.is_gold:
        return None
    check_assignments(cfg)
    default = single_client(cfg, _embedded(local_url, cfg.model) if not cfg.base_url else None, sharing=sharing)
    clients = {(default.config.model, tuple(default.config.base_urls)): default}
    by_role = {}
    for given in assignments(cfg):
        local = _embedded(local_url, given.model) if is_embedded_role(given) else None
        role_cfg = role_settings(cfg, given)
        key = (embedded_choice(role_cfg).name if local else role_cfg.model or "",
               tuple([local] if local else role_cfg.base_url))
        if key not in clients:
            clients[key] = single_client(role_cfg, local, breaker=default.breaker, sharing=sharing)
        by_role[given.role] = clients[key]
    return TeamModels(default, by_role, topology_roles(cfg)[1] if by_role else None)


def role_settings(cfg: RunConfig, given: "Assignment") -> RunConfig:
    """The settings of the client one `--model-role` assignment gets: the run's, with the role's model and
    endpoint (`embedded`, `embedded:KEY` or `local:PATH`: an embedded model's, as `--model` without `--base-url`)."""
    from apibank_bench.agents.model_roles import is_embedded_role

    if is_embedded_role(given):
        return dataclasses.replace(cfg, model=given.model, base_url=[], deployment=None)
    # a role's own endpoint is its own deployment: `--deployment` names `--base-url`'s
    return dataclasses.replace(cfg, model=given.model, base_url=[given.base_url] if given.base_url else cfg.base_url,
                               deployment=None if given.base_url else cfg.deployment)


def _embedded(local_url: Callable[..., str] | None, model: str | None) -> str:
    """The URL of the embedded model `model` designates (`local_url(model)` starts it); a run given no way to
    start it names the flag it lacks."""
    if local_url is None:
        raise ValueError(f"no model endpoint: pass {flag('base_url')} URL")
    return local_url(model or "")


def single_client(cfg: RunConfig, local: str | None, breaker=None, sharing: int = 1) -> ChatClient:
    """One client for `cfg.model` at `cfg.base_url` (or at `local`, the embedded server's URL): the endpoint
    probed once, its server kind decided from its own answer."""
    answers, dead = {}, []
    for url in [local] if local else cfg.base_url:
        try:
            answers[url] = endpoint_models(url, require=True)
        except EndpointUnreachable as exc:
            dead.append((url, exc))
    if not answers:
        raise dead[0][1]
    # Several endpoints must all take a field for it to be sent: one kind for all, else the standard fields.
    kinds = {server_kind(cfg, answer, local is not None)[0] for answer in answers.values()}
    models = next(iter(answers.values())) if len(kinds) == 1 else None
    config = model_config(cfg, local, models, sharing, fold=system_folding(cfg, models, local is not None)[0])
    if not config.deployment:  # the cache keeps answers per deployment: these addresses, serving these models
        config = dataclasses.replace(config, deployment=deployment(
            {url: served_models(answers.get(url)) for url in config.base_urls}))
    if cfg.constrained and not config.use_grammar:
        warnings.warn(no_grammar_field(cfg, models, local is not None), RuntimeWarning, stacklevel=2)
    client = ChatClient(config, breaker=breaker)
    for url, unreachable in dead:  # one of several replicas is down: the run goes on with the others
        warnings.warn(f"{unreachable}; it is left out of rotation and tried again later", RuntimeWarning, stacklevel=2)
        client.router.eject(url)
    return client


def deployment(served: dict[str, Any]) -> str:
    """What identifies a remote endpoint to the response cache: each address (without credentials)
    and what its `/models` says it serves. Two servers sharing a model name never share answers."""
    return json.dumps({redact(url): models for url, models in served.items()}, sort_keys=True)


class EndpointUnreachable(RuntimeError):
    """No server answers at a configured base URL (a run would only collect connection errors)."""


def endpoint_models(base_url: str | None, require: bool = False) -> Any:
    """The endpoint's answer to GET /models (which model serves, and which server: `owned_by`): the run's
    one probe (`llm.probe`). An HTTP error or an answer that is not JSON gives `{"error": ...}` (the
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


def describe_model(cfg: RunConfig, models: Any = None, clients: "TeamModels | None" = None) -> dict:
    """The model part of a run's summary (no API key): among it the server kind and exactly the
    sampling fields every request carried. `models`: the endpoint's `/v1/models` answer. `clients`: the run's,
    when this process built them (runs.parts): their settings are described, not built again."""
    if cfg.is_gold:
        return {"model": "gold", "note": "harness self-check: the gold call is replayed, no model runs"}
    local = not cfg.base_url  # the default model's own endpoint (a role's `embedded` is in describe_roles)
    try:
        model = clients.default.config if clients is not None else model_config(cfg, "embedded" if local else None,
                                                                                models)
    except ValueError as exc:
        return {"error": str(exc)}
    kind, decided_by = server_kind(cfg, models, local)
    fold, fold_from = system_folding(cfg, models, local)
    return {
        "model": model.model,
        **({"model_file": embedded_choice(cfg).describe()} if local else {}),
        "base_urls": (["embedded llama.cpp server"] if local
                      else [redact(url) for url in model.base_urls]),  # no user:password@ in summary.json
        "temperature": model.temperature, "top_p": model.top_p, "max_tokens": model.max_tokens,
        "seed": model.seed, "constrained": model.use_grammar, "cache": model.cache_dir is not None,
        "extra_body": model.extra_body,
        "server_kind": kind, "server_kind_from": decided_by,
        "fold_system": fold, "fold_system_from": fold_from,  # system messages moved into the first user turn
        "request_fields": request_fields(model),
        **describe_roles(cfg, clients),
    }


def request_fields(model: ModelConfig) -> dict:
    """The sampling fields every request of a client carries (summary.json's `request_fields`)."""
    return {"temperature": model.temperature, "top_p": model.top_p, "max_tokens": model.max_tokens,
            "seed": "per agent (see Protocol)", **model.sampling(), **model.extra_body}


def describe_roles(cfg: RunConfig, clients: "TeamModels | None" = None) -> dict:
    """With `--model-role`: the model of every role (`models_by_role`), the final role's (`final_model`: the model
    whose answers are scored), whether the team's roles have more than one model (`mixed`), and per assignment
    its model, endpoint, server kind (decided from that endpoint's own `/models`, as the run's client decided
    it) and the grammar and sampling fields its requests carried (`constrained`, `request_fields`)."""
    from apibank_bench.agents.model_roles import answering_model, assignments, is_embedded_role, models_by_role

    given = assignments(cfg)
    if not given:
        return {}

    def name(model: str, embedded: bool) -> str:
        return embedded_choice(cfg, model).name if embedded else model

    by_role = {role: name(*model) for role, model in models_by_role(cfg).items()}
    final, final_model, _ = answering_model(cfg)
    roles = {}
    for a in given:
        local = is_embedded_role(a)
        role_cfg = role_settings(cfg, a)
        url = None if local else (role_cfg.base_url[0] if role_cfg.base_url else None)
        models = None if local else endpoint_models(url)
        kind, decided_by = server_kind(role_cfg, models, local)
        built = clients.by_role.get(a.role) if clients is not None else None
        model = built.config if built is not None else model_config(role_cfg, "embedded" if local else None, models)
        roles[a.role] = {"model": model.model, "base_url": "embedded llama.cpp server" if local else redact(url or ""),
                         "server_kind": kind, "server_kind_from": decided_by, "constrained": model.use_grammar,
                         "request_fields": request_fields(model),
                         **({"model_file": embedded_choice(cfg, a.model).describe()} if local else {})}
    return {"models_by_role": by_role, "final_role": final, "final_model": name(*final_model),
            "mixed": len(set(by_role.values())) > 1, "role_models": roles}
