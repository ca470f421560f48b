"""A model per role (`--model-role ROLE=MODEL[@BASE_URL]`): which chat client answers each agent of a team.

Which roles there are, and which the user named, is model_roles.py's. The most specific assignment wins:
`ROLE#INDEX`, then ROLE, then `final` (the topology's final role); roles not named use `--model`.

There is one ChatClient per distinct model and endpoint, each with its own router, in-flight cap, server
kind (so its own sampling fields and grammar dialect) and response-cache deployment (requests carry
their model, so one model's answer never answers another's request); all of them share the run's
circuit breaker, so a dead endpoint stops the run as it would with one model.
"""

from __future__ import annotations

from typing import Any

from apibank_bench.llm import ChatClient
from apibank_bench.llm.client import ClosedConnections

FINAL = "final"  #: the ROLE of an assignment for the role whose answer is scored (model_roles.py)


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
    def batches(self) -> bool:
        """Every client's server is known to batch many completions at once (vLLM, SGLang)."""
        return all(client.config.kind.batches for client in self.clients)

    @property
    def waiting(self) -> int:
        return sum(client.waiting for client in self.clients)

    def abandon(self, reason: str) -> None:
        """Every client stops at once (`ChatClient.abandon`): a role's requests in flight are cut off too."""
        for client in self.clients:
            client.abandon(reason)

    def in_flight_limit(self) -> int:
        """The requests every client together lets in flight now."""
        return sum(client.in_flight_limit() for client in self.clients)

    @property
    def closed(self) -> ClosedConnections:
        """The connections a server closed without an answer, over every client."""
        total = ClosedConnections()
        for client in self.clients:
            total.count += client.closed.count
            total.most_in_flight = max(total.most_in_flight, client.closed.most_in_flight)
        return total

    def endpoint_counts(self) -> dict:
        """Requests, errors, latency and the learned in-flight limit per endpoint, over every client
        (`endpoint_report`, merged)."""
        from apibank_bench.llm.router import merge_snapshots

        return merge_snapshots([client.endpoint_report() for client in self.clients])

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.default, name)

