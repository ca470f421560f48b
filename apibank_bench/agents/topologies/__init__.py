"""The topologies, one module each, registered in `TOPOLOGIES`.

A topology module registers a builder `(agents, cfg) -> solve(task) -> Solution`
(the agents are of the run's agent kind, `agents.kinds`), the roles it uses at a team size (the prompts `prompts/<topology>/<role>.txt`
that an optimizer may rewrite) and, for a team, its `final_role` (the role a replica
plays under the replicas protocol). Adding a topology is one module here plus its
prompt files.
"""

from __future__ import annotations

import dataclasses

from apibank_bench.core.registry import Registry, import_submodules

TOPOLOGIES: Registry = Registry("topology", "--apibank-topology", sort=True)


def _load_modules() -> None:
    import_submodules(__name__, __path__, skip=("graph",))


TOPOLOGIES.load_with(_load_modules)

#: The team sizes a team topology is built for (the reference's).
TEAM_SIZES = (2, 4, 8, 10)


def check_team_size(cfg) -> None:
    """A team topology takes only `TEAM_SIZES` (the settings' resolution runs this rule)."""
    from apibank_bench.core.settings import flag

    if cfg.topology != "single" and cfg.team_size not in TEAM_SIZES:
        raise ValueError(f"{flag('team_size')} must be one of {', '.join(map(str, TEAM_SIZES))}, got {cfg.team_size}")


def build_topology(cfg, model):
    """The solver of `cfg.topology` (with `cfg.agent_kind` agents) over the run's shared model client.

    Under `--apibank-team-protocol replicas` a team topology is not built: its final role
    answers N times alone and the team votes (the reference's team-size runners).
    """
    from apibank_bench.agents.kinds import make_agents
    from apibank_bench.agents.topologies.graph import replicas

    alias_of = TOPOLOGIES.entry(cfg.topology).extra.get("alias_of")
    if alias_of:
        cfg = dataclasses.replace(cfg, **alias_of)
    role = replica_role(cfg)
    if role:
        return replicas(make_agents(cfg, model), cfg, role)
    return TOPOLOGIES.get(cfg.topology)(make_agents(cfg, model), cfg)


def replica_role(cfg) -> str | None:
    """The role every replica plays under the replicas protocol (None: the topology itself runs)."""
    if cfg.team_protocol != "replicas":
        return None
    return TOPOLOGIES.entry(cfg.topology).extra.get("final_role")


#: The settings that shape a team; each topology registers which of them it reads (`reads=`).
TEAM_SETTINGS = ("team_size", "rounds", "message_format", "vote")


def unread_settings(topology: str, names) -> list[str]:
    """The team settings among `names` that `topology` does not read, in `TEAM_SETTINGS` order."""
    reads = TOPOLOGIES.entry(topology).extra.get("reads", TEAM_SETTINGS)
    return [name for name in TEAM_SETTINGS if name in names and name not in reads]


def what_it_reads(topology: str) -> str:
    """'reads --team-size, --vote' or 'reads no team setting', in the typed command's flags."""
    from apibank_bench.core.settings import flag

    reads = TOPOLOGIES.entry(topology).extra.get("reads", TEAM_SETTINGS)
    return "reads " + (", ".join(flag(name) for name in reads) if reads else "no team setting")


def ignored_settings(cfg, given) -> list[str]:
    """One warning per team setting in `given` (names set by the user) that `cfg.topology` does not read."""
    from apibank_bench.core.settings import flag

    return [f"{flag(name)} {getattr(cfg, name)} changes nothing: {flag('topology')} {cfg.topology} "
            f"{what_it_reads(cfg.topology)}" for name in unread_settings(cfg.topology, given)]


def roles(cfg) -> list[str]:
    """The roles (prompt files) of `cfg.topology` at `cfg.team_size`, in the topology's order."""
    role = replica_role(cfg)
    return [role] if role else list(TOPOLOGIES.entry(cfg.topology).extra["roles"](cfg))
