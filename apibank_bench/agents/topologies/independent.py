"""N agents answer alone; the team submits their vote."""

from apibank_bench.agents.topologies import TOPOLOGIES
from apibank_bench.agents.topologies.graph import Node, graph_of, solve_with, voted


@TOPOLOGIES.register("independent", "N agents answer alone; the team votes", roles=lambda cfg: ["solver"],
                     reads=("team_size", "vote"))
def independent(agents, cfg):
    def solver(index: int) -> Node:
        return lambda state: {"turns": [agents.ask(state["task"], "solver", index=index)]}

    step = [(f"solver_{i}", solver(i)) for i in range(cfg.team_size)]
    return solve_with(graph_of([step]), lambda turns: voted(turns, cfg.vote))
