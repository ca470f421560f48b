"""One agent answers."""

from apibank_bench.agents.topologies import topology
from apibank_bench.agents.topologies.graph import graph_of, last, solve_with


@topology("single", "one agent answers", roles=lambda cfg: ["solver"], reads=())
def single(agents, cfg):
    node = lambda state: {"turns": [agents.ask(state["task"], "solver")]}  # noqa: E731
    return solve_with(graph_of([[("solver", node)]]), last)
