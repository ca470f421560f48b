"""The topologies, one module each, each registered in `TOPOLOGIES` with its `TopologySpec` (spec.py).

A topology module registers (`topology(...)`) a builder `(agents, cfg) -> solve(task) -> Solution`
(the agents are of the run's agent kind, `agents.kinds`), the roles it uses at a team size (the prompts
`prompts/<topology>/<role>.txt` that an optimizer may rewrite), the team settings it reads and, for a
team, its `final_role` (the role whose answer is scored, which a replica plays under the replicas
protocol). Adding a topology is one module here plus its prompt files. Higher layers ask a topology's
spec (`spec_of`, `as_run`), never its name.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from apibank_bench.agents.topologies.spec import (
    LONE, TEAM_SETTINGS, TEAM_SIZES, Alias, Builder, TopologySpec,
)
from apibank_bench.core.registry import Registry, import_submodules

__all__ = ["LONE", "TEAM_SETTINGS", "TEAM_SIZES", "TOPOLOGIES", "Alias", "TopologySpec", "alias", "as_run", "build_topology",
           "check_history", "check_team_size", "ignored_settings", "is_team", "own_topologies", "replica_role", "roles", "spec_of",
           "final_role", "topology", "unread_settings", "what_it_reads"]

TOPOLOGIES: Registry[TopologySpec] = Registry("topology", "--apibank-topology", sort=True)


def _load_modules() -> None:
    import_submodules(__name__, __path__, skip=("graph", "spec"))


TOPOLOGIES.load_with(_load_modules)


def topology(name: str, help: str, *, roles: Callable[[Any], list[str]], final_role: str | None = None,
             reads: tuple[str, ...] = (), seeds_by_round: bool = False) -> Callable[[Builder], Builder]:
    """A decorator that registers the builder it decorates as topology `name`."""
    def add(build: Builder) -> Builder:
        TOPOLOGIES.add(name, TopologySpec(name, help, roles, build, final_role, reads, seeds_by_round), help)
        return build
    return add


def alias(name: str, help: str, of: Alias) -> None:
    """Register `name` as another topology with a fixed agent kind."""
    TOPOLOGIES.add(name, TopologySpec(name, help, lambda cfg: [], alias_of=of), help)


def spec_of(name: str) -> TopologySpec:
    """The spec registered as `name` (ValueError naming the choices for an unknown one)."""
    return TOPOLOGIES.get(name)


def is_team(name: str | None) -> bool:
    """Whether a recorded topology name is a registered team (False for None or a name no longer known)."""
    return bool(name) and TOPOLOGIES.has(str(name)) and spec_of(str(name)).is_team


def own_topologies() -> tuple[str, ...]:
    """The registered topologies that are not aliases (each has its own role prompts)."""
    return tuple(entry.name for entry in TOPOLOGIES if entry.value.alias_of is None)


def as_run(cfg):
    """(the spec that runs `cfg`, `cfg` as it runs): an alias becomes its target with its agent kind."""
    spec = spec_of(cfg.topology)
    if spec.alias_of is None:
        return spec, cfg
    target = spec.alias_of
    return spec_of(target.topology), dataclasses.replace(cfg, topology=target.topology, agent_kind=target.agent_kind)


def check_history(cfg) -> None:
    """`--history tools` is for function-calling agents: a chat agent would be sent the text anyway."""
    from apibank_bench.agents.kinds import FUNCTION_CALLING_KINDS
    from apibank_bench.core.settings import flag

    if cfg.history == "tools" and as_run(cfg)[1].agent_kind not in FUNCTION_CALLING_KINDS:  # an alias's kind too
        raise ValueError(f"{flag('history')} tools sends the dialogue's API calls as tool calls, which only "
                         f"function-calling agents are sent: use {flag('agent_kind')} sdk "
                         f"(or {flag('history')} text)")


def check_team_size(cfg) -> None:
    """A team topology takes only its team sizes (the settings' resolution runs this rule)."""
    from apibank_bench.core.settings import flag

    error = spec_of(cfg.topology).team_size_error(cfg.team_size, flag("team_size"))
    if error:
        raise ValueError(error)


def build_topology(cfg, model):
    """The solver of `cfg.topology` (with `cfg.agent_kind` agents) over the run's shared model client.

    Under `--apibank-team-protocol replicas` a team topology is not built: its final role
    answers N times alone and the team votes (the reference's team-size runners).
    """
    from apibank_bench.agents.kinds import make_agents
    from apibank_bench.agents.topologies.graph import replicas

    spec, cfg = as_run(cfg)
    agents = make_agents(cfg, model, seeds_by_round=spec.seeds_by_round)
    role = replica_role(cfg)
    if role:
        return replicas(agents, cfg, role)
    assert spec.build is not None  # as_run resolved any alias
    return spec.build(agents, cfg)


def replica_role(cfg) -> str | None:
    """The role every replica plays under the replicas protocol (None: the topology itself runs)."""
    if cfg.team_protocol != "replicas":
        return None
    return spec_of(cfg.topology).final_role


def unread_settings(topology: str, names) -> list[str]:
    """The team settings among `names` that `topology` does not read, in `TEAM_SETTINGS` order."""
    reads = spec_of(topology).reads
    return [name for name in TEAM_SETTINGS if name in names and name not in reads]


def what_it_reads(topology: str) -> str:
    """'reads --team-size, --vote' or 'reads no team setting', in the typed command's flags."""
    from apibank_bench.core.settings import flag

    reads = spec_of(topology).reads
    return "reads " + (", ".join(flag(name) for name in reads) if reads else "no team setting")


def ignored_settings(cfg, given) -> list[str]:
    """One warning per team setting in `given` (names set by the user) that `cfg.topology` does not read."""
    from apibank_bench.core.settings import flag

    return [f"{flag(name)} {getattr(cfg, name)} changes nothing: {flag('topology')} {cfg.topology} "
            f"{what_it_reads(cfg.topology)}" for name in unread_settings(cfg.topology, given)]


def roles(cfg) -> list[str]:
    """The roles (prompt files) of `cfg.topology` at `cfg.team_size`, in the topology's order."""
    spec, cfg = as_run(cfg)
    role = replica_role(cfg)
    return [role] if role else list(spec.roles_at(cfg))


def final_role(cfg) -> str:
    """The role whose answer is scored: the replicas' role, the team's final role, else the last role."""
    spec, cfg = as_run(cfg)
    return replica_role(cfg) or spec.final_role or roles(cfg)[-1]
