"""What a topology is, typed: `TopologySpec`, one per registered topology (`TOPOLOGIES`).

Every fact a higher layer asks about a topology (its roles, its final role, whether it is a team,
the team sizes it takes, which team settings it reads, how its agents' seeds are numbered, what
an alias stands for) is a field or a method here, so no module outside `agents/topologies/` names
a topology or reads an untyped registration.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from apibank_bench.agents.solution import Solution
    from apibank_bench.data.tasks import Task

#: The topology of one agent (core's default `--topology`): where a lone agent's prompt is.
LONE = "single"

#: The team sizes a team topology is built for (the reference's).
TEAM_SIZES = (2, 4, 8, 10)

#: The settings that shape a team; each topology declares which of them it reads (`reads`).
TEAM_SETTINGS = ("team_size", "rounds", "message_format", "vote")

#: `(agents, cfg) -> solve(task) -> Solution`; the agents are of the run's agent kind (`agents.kinds`).
Builder = Callable[[Any, Any], "Callable[[Task], Solution]"]


@dataclass(frozen=True)
class Alias:
    """A name kept so existing commands work: another topology with a fixed agent kind."""

    topology: str
    agent_kind: str


@dataclass(frozen=True)
class TopologySpec:
    name: str
    help: str
    #: The roles (prompt files `prompts/<topology>/<role>.txt`) at the run's team size, in the
    #: topology's order; an optimizer may rewrite each.
    roles_at: Callable[[Any], list[str]]
    build: Builder | None = None  #: None for an alias (its target builds)
    #: A team's role whose answer is scored, which every replica plays under the replicas protocol;
    #: None: one agent answers (not a team).
    final_role: str | None = None
    reads: tuple[str, ...] = ()  #: the `TEAM_SETTINGS` it reads
    #: Its rounds are the whole team answering again, so seeds are numbered round by round (the debate).
    seeds_by_round: bool = False
    alias_of: Alias | None = None

    @property
    def is_team(self) -> bool:
        """Whether several agents answer (an alias is not: its target is `single`)."""
        return self.final_role is not None

    @property
    def team_sizes(self) -> tuple[int, ...]:
        """The team sizes it takes (a lone agent takes any: the setting changes nothing)."""
        return TEAM_SIZES if self.is_team else ()

    def agents(self, cfg) -> int:
        """How many agents answer an instance (ROLE#INDEX goes from 0 to this minus one)."""
        return cfg.team_size if self.is_team else 1

    def team_size_error(self, team_size: int, flag: str) -> str | None:
        """Why `team_size` is refused (None: taken); `flag` is how the command spells the setting."""
        if not self.is_team or team_size in self.team_sizes:
            return None
        return f"{flag} must be one of {', '.join(map(str, self.team_sizes))}, got {team_size}"
