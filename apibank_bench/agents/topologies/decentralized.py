"""A debate: N agents answer, then R rounds in which each sees its peers' previous answers; the last round votes."""

from apibank_bench.agents.chat_agent import reports
from apibank_bench.agents.topologies import TOPOLOGIES
from apibank_bench.agents.topologies.graph import Node, State, graph_of, ordered, solve_with, voted


@TOPOLOGIES.register("decentralized", "a debate of N agents over R rounds; the last round votes",
                     roles=lambda cfg: ["debater"], reads=("team_size", "rounds", "message_format", "vote"))
def decentralized(agents, cfg):
    def debater(index: int, round: int) -> Node:
        def node(state: State) -> dict:
            peers = [t for t in ordered(state["turns"], round - 1) if t.index != index] if round else []
            context = ("Your peers' previous answers:\n" + reports(peers, agents.message_format)) if peers else ""
            return {"turns": [agents.ask(state["task"], "debater", context, index=index, round=round)]}
        return node

    steps = [[(f"debater_{r}_{i}", debater(i, r)) for i in range(cfg.team_size)] for r in range(cfg.rounds + 1)]
    return solve_with(graph_of(steps), lambda turns: voted(ordered(turns, cfg.rounds), cfg.vote))
