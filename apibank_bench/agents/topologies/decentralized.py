"""A debate: N agents answer, then each later round shows every debater its own previous answer and its
peers'; R rounds in all (the reference's R); the last round votes."""

from apibank_bench.agents.chat_agent import quote, reports
from apibank_bench.agents.topologies import topology
from apibank_bench.agents.topologies.graph import Node, State, graph_of, ordered, solve_with, voted


@topology("decentralized", "a debate of N agents over R rounds in all; the last round votes",
                     roles=lambda cfg: ["debater"], final_role="debater",
                     reads=("team_size", "rounds", "message_format", "vote"), seeds_by_round=True)
def decentralized(agents, cfg):
    def debater(index: int, round: int) -> Node:
        def node(state: State) -> dict:
            context = ""
            if round:
                previous = ordered(state["turns"], round - 1)
                own = next((t.answer for t in previous if t.index == index), "")
                peers = [t for t in previous if t.index != index]
                # Own answer cut to 1,200 characters, outside the peers' block (which is cut to 5,000).
                context = (f"Round {round + 1} of the debate. Your previous answer:\n{quote(own)}\n\n"
                           f"Your peers' previous answers:\n{reports(peers, agents.message_format)}\n\n"
                           "Change your call only if a peer's evidence is stronger than yours.")
            return {"turns": [agents.ask(state["task"], "debater", context, index=index, round=round)]}
        return node

    steps = [[(f"debater_{r}_{i}", debater(i, r)) for i in range(cfg.team_size)] for r in range(cfg.rounds)]
    return solve_with(graph_of(steps), lambda turns: voted(ordered(turns, cfg.rounds - 1), cfg.vote))
