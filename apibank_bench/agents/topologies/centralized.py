"""N - 1 workers each study the whole task and report; the manager decides from the task and their reports."""

from apibank_bench.agents.chat_agent import reports
from apibank_bench.agents.topologies import topology
from apibank_bench.agents.topologies.graph import Node, State, graph_of, last, ordered, solve_with

#: Workers in the order a team adds them (a team of N has N - 1): the reference's three first, in its order.
WORKER_ROLES = ("inspector_worker", "caller_worker", "validator_worker", "toolsearcher_worker", "intent_worker",
                "ambiguity_worker", "api_result_worker", "call_normalizer_worker", "type_check_worker")
BRIEF = "Report to your manager: the API you would call, the evidence for each argument, and what you are unsure of."


def workers(cfg) -> list[str]:
    return list(WORKER_ROLES[: max(cfg.team_size - 1, 1)])


# Roles list the manager first, the role that decides (optimizers start with it), though it speaks last.
@topology("centralized", "N - 1 workers report on the task; a manager decides",
                     roles=lambda cfg: ["manager", *workers(cfg)], final_role="manager",
                     reads=("team_size", "message_format"))
def centralized(agents, cfg):
    team = workers(cfg)

    def worker(index: int, role: str) -> Node:
        return lambda state: {"turns": [agents.ask(state["task"], role, BRIEF, index=index)]}

    def decide(state: State) -> dict:
        context = "Your workers reported:\n" + reports(ordered(state["turns"], 0), agents.message_format) \
            + "\n\nNow give the final call."
        # The manager is the team's last member: index N - 1, so its seed follows the workers' (the reference's).
        return {"turns": [agents.ask(state["task"], "manager", context, index=len(team), round=1)]}

    steps = [[(role, worker(i, role)) for i, role in enumerate(team)], [("decide", decide)]]
    return solve_with(graph_of(steps), last)
