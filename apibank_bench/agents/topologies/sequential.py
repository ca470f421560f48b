"""A pipeline: each stage sees the earlier stages' reports; the last stage's call is the answer."""

from apibank_bench.agents.chat_agent import reports
from apibank_bench.agents.topologies import topology
from apibank_bench.agents.topologies.graph import Node, State, graph_of, last, ordered, solve_with

#: The stages in order, each with the team size from which it takes part (at N = 4 the reference's four).
PIPELINE = (("dialogue_reader", 4), ("intent_extractor", 8), ("toolsearcher_planner", 8), ("schema_mapper", 4),
            ("api_result_interpreter", 8), ("ambiguity_resolver", 10), ("argument_planner", 2),
            ("type_validator", 8), ("call_normalizer", 10), ("verifier", 2))


def stages(cfg) -> list[str]:
    return [role for role, joins_at in PIPELINE if joins_at <= cfg.team_size]


@topology("sequential", "a pipeline of stages; the last stage's call is the answer", roles=stages,
                     final_role="verifier", reads=("team_size", "message_format"))
def sequential(agents, cfg):
    def stage(index: int, role: str) -> Node:
        def node(state: State) -> dict:
            earlier = ordered(state["turns"])
            context = ("Earlier stages reported:\n" + reports(earlier, agents.message_format)) if earlier else ""
            return {"turns": [agents.ask(state["task"], role, context, index=index, round=index)]}
        return node

    return solve_with(graph_of([[(role, stage(i, role))] for i, role in enumerate(stages(cfg))]), last)
