"""Which model a run talks to: a remote OpenAI-compatible endpoint, or the embedded one."""

from __future__ import annotations

import dataclasses
import warnings
from typing import TYPE_CHECKING, Any, Callable

from apibank_bench.llm import ChatClient, is_embedded_model
from apibank_bench.llm.config import model_config, no_grammar_field, request_fields, server_kind
from apibank_bench.llm.embedded_models import LOCAL_PREFIX, SHIPPED_PREFIX, embedded_choice
from apibank_bench.llm.embedded_launcher import LOCAL_MODEL  # the default embedded model's name
from apibank_bench.llm.probe import (EndpointUnreachable, deployment, endpoint_models, served_models,
                                     system_folding)
from apibank_bench.core.redact import redact
from apibank_bench.core.settings import RunConfig, flag

if TYPE_CHECKING:
    from apibank_bench.agents.model_roles import Assignment
    from apibank_bench.agents.team_models import TeamModels


def needs_local_server(cfg: RunConfig) -> bool:
    """Whether the run asks an embedded model: `--model` without `--base-url`, or a role's `embedded`
    (`embedded:KEY`, `local:PATH`)."""
    from apibank_bench.agents.model_roles import assignments, is_embedded_role

    return not cfg.is_gold and (not cfg.base_url or any(is_embedded_role(a) for a in assignments(cfg)))


def check_models(cfg: RunConfig) -> None:
    """The settings' one check of the models a run names, handed down to every resolved RunConfig
    (runs.setting_rules), so each path to a run (`run`, pytest, a sweep's cell, `optimize`) meets it once, before
    anything runs: a ValueError of one line (a usage error) naming the flag to change. The gold self-check
    asks no model."""
    if cfg.is_gold:
        return
    check_model_and_endpoint(cfg)
    from apibank_bench.agents.model_roles import check_assignments

    check_assignments(cfg)  # a --model-role for a role the topology does not have
    check_embedded(cfg)  # a local:PATH that is missing, not a GGUF, without a chat template, too big


def check_model_and_endpoint(cfg: RunConfig) -> None:
    """That a run names the model that answers (part of `check_models`). An endpoint needs a model name; a model
    name without an endpoint must designate an embedded model (`llm.is_embedded_model`), else the embedded
    model's answers would be recorded under a name the user meant for another model."""
    if cfg.base_url and not cfg.model:
        raise ValueError(f"no model name: pass {flag('model')} NAME (or set APIBANK_MODEL) for the endpoint at "
                         f"{flag('base_url')}")
    if not cfg.base_url and not is_embedded_model(cfg.model):
        raise ValueError(f"{flag('model')} {cfg.model} names no endpoint: give {flag('base_url')} URL of the server "
                         f"that serves {cfg.model}; without {flag('base_url')} the embedded model answers, whose "
                         f"name is {LOCAL_MODEL} (give no {flag('model')}, or {flag('model')} {LOCAL_MODEL}; "
                         f"{SHIPPED_PREFIX}KEY or {LOCAL_PREFIX}PATH.gguf for another embedded model)")


def check_embedded(cfg: RunConfig) -> None:
    """Every embedded model the run asks (its own, its roles') resolved and its file checked: a ValueError of
    one line (a usage error) before anything runs (a model's run: gold is `check_models`'s to leave out)."""
    from apibank_bench.agents.model_roles import assignments, is_embedded_role

    from apibank_bench.llm.embedded_models import check_installed

    if not cfg.base_url:
        check_installed(embedded_choice(cfg))
    for given in assignments(cfg):
        if is_embedded_role(given):
            try:
                check_installed(embedded_choice(cfg, given.model))
            except ValueError as exc:  # said in the words of the flag that named it
                said = str(exc).removeprefix(f"{flag('model')} {given.model}: ")
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


def model_client(cfg: RunConfig, local_url: Callable[..., str] | None, sharing: int = 1) -> "TeamModels | None":
    """The run's shared clients, None for the gold self-check; starts the embedded model if needed.

    One client for `--model` and one per other model and endpoint a role is given (`--model-role`, checked as the
    settings resolved: check_models); they share the default client's circuit breaker.
    `sharing`: the processes of the run that send to the endpoints at once (xdist workers)."""
    from apibank_bench.agents.model_roles import assignments, is_embedded_role, topology_roles
    from apibank_bench.agents.team_models import TeamModels

    if cfg.is_gold:
        return None
    roles = assignments(cfg)  # checked where the settings resolved (check_models)
    default = single_client(cfg, _embedded(local_url, cfg.model) if not cfg.base_url else None, sharing=sharing)
    clients = {(default.config.model, tuple(default.config.base_urls)): default}
    by_role = {}
    for given in roles:
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
