"""Which roles `--model-role ROLE=MODEL[@BASE_URL]` names, checked against the run's topology (the clients
that answer them: team_models.py).

ROLE is a role of the topology as traces and `show` name it (`manager`, `caller_worker`, `debater`, a
stage), one agent of it as `ROLE#INDEX` (`debater#1`: the debater at place 1, in every round), or
`final`, the role whose answer is scored. MODEL `embedded` is the default embedded model,
`embedded:KEY` a shipped one and `local:PATH.gguf` a GGUF of yours, each served by the embedded server; any
other MODEL without `@BASE_URL` is asked at `--base-url`.
"""

from __future__ import annotations

from dataclasses import dataclass

from apibank_bench.core.settings import flag, model_role_parts
from apibank_bench.agents.team_models import FINAL
from apibank_bench.llm.embedded_models import EMBEDDED, LOCAL_PREFIX, SHIPPED_PREFIX


@dataclass(frozen=True)
class Assignment:
    role: str  #: as given: a role, `ROLE#INDEX`, or `final`
    model: str  #: a model name, or `embedded`
    base_url: str | None  #: None: `--base-url` (or the embedded server, for `embedded`)

    @property
    def role_name(self) -> str:
        return self.role.partition("#")[0]

    @property
    def index(self) -> int | None:
        _, sep, index = self.role.partition("#")
        return int(index) if sep and index.isdigit() else None


def is_embedded_role(given: Assignment) -> bool:
    """The assignment names an embedded model: `embedded`, `embedded:KEY` or `local:PATH`, without `@BASE_URL`
    (a shipped model's bare name is a remote model's name here: roles are asked at `--base-url`)."""
    return given.base_url is None and (given.model == EMBEDDED or given.model.startswith((SHIPPED_PREFIX,
                                                                                           LOCAL_PREFIX)))


def assignments(cfg) -> list[Assignment]:
    return [Assignment(*model_role_parts(item)) for item in cfg.model_role]


def topology_roles(cfg) -> tuple[list[str], str]:
    """The roles of the run's team (under its protocol) and its final role (whose answer is scored)."""
    from apibank_bench.agents.topologies import final_role, roles

    return roles(cfg), final_role(cfg)


def models_by_role(cfg) -> dict[str, tuple[str, bool]]:
    """Every role's model as given, and whether it is an embedded one (`ROLE#INDEX` too, when one agent has its
    own): the role's own assignment, else `final`'s for the final role, else `--model` ("" and embedded: the
    default embedded model)."""
    given = assignments(cfg)
    names, final = topology_roles(cfg)
    default = (cfg.model or "", not cfg.base_url)
    named = {a.role: (a.model, is_embedded_role(a)) for a in given}
    by_role = {role: named.get(role) or (named.get(FINAL) if role == final else None) or default for role in names}
    by_role.update({a.role: named[a.role] for a in given if a.index is not None})
    return by_role


def answering_model(cfg) -> tuple[str, tuple[str, bool], bool]:
    """The final role, its model (`models_by_role`'s: the one whose answers are scored), and whether the team's
    roles have more than one model."""
    by_role = models_by_role(cfg)
    final = topology_roles(cfg)[1]
    same = {(model or EMBEDDED, embedded) for model, embedded in by_role.values()}
    return final, by_role.get(final, (cfg.model or "", not cfg.base_url)), len(same) > 1


def check_assignments(cfg) -> None:
    """ValueError (a usage error) for a role the topology does not have, or a model with no endpoint."""
    if not cfg.model_role:
        return
    from apibank_bench.agents.topologies import as_run

    names, final = topology_roles(cfg)
    agents = as_run(cfg)[0].agents(cfg)
    for given in assignments(cfg):
        index = given.index
        known = given.role_name in (*names, FINAL) and ("#" not in given.role or (
            given.role_name != FINAL and index is not None and index < agents))
        if not known:
            raise ValueError(
                f"{flag('model_role')} {given.role}={given.model}: {cfg.topology} (team size {agents}, "
                f"{cfg.team_protocol} protocol) has no role {given.role!r}; its roles: {', '.join(names)}, or "
                f"{FINAL} (= {final}); one agent of a role as ROLE#INDEX, INDEX 0 to {agents - 1}")
        if not is_embedded_role(given) and given.base_url is None and not cfg.base_url:
            raise ValueError(f"{flag('model_role')} {given.role}={given.model}: no endpoint for it; give "
                             f"{given.role}={given.model}@BASE_URL, or {flag('base_url')}")
