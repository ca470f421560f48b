"""N agents answer alone; the team submits their vote."""

from apibank_bench.agents.topologies import topology
from apibank_bench.agents.topologies.graph import replicas


@topology("independent", "N agents answer alone; the team votes", roles=lambda cfg: ["solver"],
                     final_role="solver", reads=("team_size", "vote"))
def independent(agents, cfg):
    return replicas(agents, cfg, "solver")
