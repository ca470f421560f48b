"""A model per role (`--model-role ROLE=MODEL[@BASE_URL]`): which chat client answers each agent of a team.

ROLE is a role of the topology as traces and `show` name it (`manager`, `caller_worker`, `debater`, a
stage), one agent of it as `ROLE#INDEX` (`debater#1`: the debater at place 1, in every round), or
`final`, the role whose answer is scored. The most specific assignment wins: `ROLE#INDEX`, then ROLE,
then `final`; roles not named use `--model`. MODEL `embedded` is the embedded local model; a MODEL without
`@BASE_URL` is asked at `--base-url`.

There is one ChatClient per distinct model and endpoint, each with its own router, in-flight cap, server
kind (so its own sampling fields and grammar dialect) and response-cache deployment (requests carry
their model, so one model's answer never answers another's request); all of them share the run's
circuit breaker, so a dead endpoint stops the run as it would with one model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from apibank_bench.core.settings import flag, model_role_parts
from apibank_bench.llm import ChatClient

EMBEDDED = "embedded"  #: the MODEL of an assignment that names the embedded local model
FINAL = "final"  #: the ROLE of an assignment for the role whose answer is scored


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


def assignments(cfg) -> list[Assignment]:
    return [Assignment(*model_role_parts(item)) for item in cfg.model_role]


def topology_roles(cfg) -> tuple[list[str], str]:
    """The roles of the run's team (under its protocol) and its final role (whose answer is scored)."""
    import dataclasses

    from apibank_bench.agents.topologies import TOPOLOGIES, replica_role, roles

    alias_of = TOPOLOGIES.entry(cfg.topology).extra.get("alias_of")
    if alias_of:
        cfg = dataclasses.replace(cfg, **alias_of)
    names = roles(cfg)
    return names, replica_role(cfg) or TOPOLOGIES.entry(cfg.topology).extra.get("final_role") or names[-1]


def check_assignments(cfg) -> None:
    """ValueError (a usage error) for a role the topology does not have, or a model with no endpoint."""
    if not cfg.model_role:
        return
    names, final = topology_roles(cfg)
    agents = 1 if cfg.topology in ("single", "agents_sdk") else cfg.team_size
    for given in assignments(cfg):
        index = given.index
        known = given.role_name in (*names, FINAL) and ("#" not in given.role or (
            given.role_name != FINAL and index is not None and index < agents))
        if not known:
            raise ValueError(
                f"{flag('model_role')} {given.role}={given.model}: {cfg.topology} (team size {agents}, "
                f"{cfg.team_protocol} protocol) has no role {given.role!r}; its roles: {', '.join(names)}, or "
                f"{FINAL} (= {final}); one agent of a role as ROLE#INDEX, INDEX 0 to {agents - 1}")
        if given.model != EMBEDDED and given.base_url is None and not cfg.base_url:
            raise ValueError(f"{flag('model_role')} {given.role}={given.model}: no endpoint for it; give "
                             f"{given.role}={given.model}@BASE_URL, or {flag('base_url')}")


class UsageTotals:
    """The usage stats of several clients, added up (`snapshot` as `llm.client.UsageStats` gives it)."""

    def __init__(self, clients: list[ChatClient]) -> None:
        self._clients = clients

    def snapshot(self) -> dict[str, Any]:
        totals: dict[str, Any] = {}
        for client in self._clients:
            for name, value in client.stats.snapshot().items():
                totals[name] = totals.get(name, 0) + value
        return totals


class TeamModels:
    """The run's chat clients: `default` (`--model`) and, per assigned role, its own.

    Anything else asked of it (`config`, `router`, `limiter`, `complete`, ...) is the default client's,
    so code written for one client keeps working; `stats` and `waiting` add up every client's.
    """

    def __init__(self, default: ChatClient, by_role: dict[str, ChatClient] | None = None,
                 final_role: str | None = None) -> None:
        self.default = default
        self.by_role = dict(by_role or {})
        self.final_role = final_role
        self.clients = list({id(client): client for client in (default, *self.by_role.values())}.values())
        self.stats = UsageTotals(self.clients)

    @classmethod
    def of(cls, model: "ChatClient | TeamModels") -> "TeamModels":
        return model if isinstance(model, TeamModels) else cls(model)

    def for_agent(self, role: str, index: int = 0) -> ChatClient:
        """The client of the agent at place `index` playing `role`: its own, its role's, the final role's,
        else the default."""
        keys = (f"{role}#{index}", role, FINAL if role == self.final_role else None)
        for key in keys:
            if key in self.by_role:
                return self.by_role[key]
        return self.default

    @property
    def waiting(self) -> int:
        return sum(client.waiting for client in self.clients)

    def endpoint_counts(self) -> dict:
        """Requests, errors and latency per endpoint, over every client (`router.snapshot`, merged)."""
        from apibank_bench.llm.router import merge_snapshots

        return merge_snapshots([client.router.snapshot() for client in self.clients])

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.default, name)

