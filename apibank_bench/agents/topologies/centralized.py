"""A manager delegates; workers see only the delegation; the manager hears them and gives the final call."""

from apibank_bench.agents.chat_agent import reports
from apibank_bench.agents.topologies import TOPOLOGIES
from apibank_bench.agents.topologies.graph import Node, State, graph_of, last, ordered, solve_with

#: Workers in the order a team adds them (a team of N has N - 1 workers).
WORKER_ROLES = ("caller_worker", "inspector_worker", "validator_worker", "toolsearcher_worker", "intent_worker",
                "ambiguity_worker", "api_result_worker", "call_normalizer_worker", "type_check_worker")


def workers(cfg) -> list[str]:
    return list(WORKER_ROLES[: max(cfg.team_size - 1, 1)])


@TOPOLOGIES.register("centralized", "a manager delegates to N - 1 workers and decides",
                     roles=lambda cfg: ["manager", *workers(cfg)], reads=("team_size", "message_format"))
def centralized(agents, cfg):
    def delegate(state: State) -> dict:
        turn = agents.ask(state["task"], "manager", "Write the assignment for your workers; no final call yet.",
                          emits_call=False)
        return {"turns": [turn]}

    def worker(index: int, role: str) -> Node:
        def node(state: State) -> dict:
            delegation = ordered(state["turns"], role="manager")[0].answer
            return {"turns": [agents.ask(state["task"], role, delegation, index=index + 1, round=1,
                                         show_task=False)]}
        return node

    def decide(state: State) -> dict:
        heard = ordered(state["turns"], 1)
        context = "Your workers reported:\n" + reports(heard, agents.message_format) + "\nNow give the final call."
        return {"turns": [agents.ask(state["task"], "manager", context, round=2)]}

    steps = [[("delegate", delegate)], [(role, worker(i, role)) for i, role in enumerate(workers(cfg))],
             [("decide", decide)]]
    return solve_with(graph_of(steps), last)
