"""What every topology's LangGraph graph is made of.

A graph's state is the task plus the list of agent turns so far; agents add
turns, and a chooser picks the answer from the finished turns (the last turn, or
a team vote). A topology is a list of steps, each a list of agents that see the
same state; the graph runs the steps in order and a step's agents at once, under
the model layer's in-flight cap.
"""

from __future__ import annotations

import contextvars
import operator
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Any, Callable, TypedDict

from apibank_bench.data.tasks import Task
from apibank_bench.agents.chat_agent import AgentTurn, solution_from
from apibank_bench.agents.solution import Solution
from apibank_bench.agents.vote import vote


class State(TypedDict):
    task: Task
    turns: Annotated[list[AgentTurn], operator.add]


def ordered(turns: list[AgentTurn], round: int | None = None, role: str | None = None) -> list[AgentTurn]:
    picked = [t for t in turns if (round is None or t.round == round) and (role is None or t.role == role)]
    return sorted(picked, key=lambda turn: (turn.round, turn.index))


Node = Callable[[State], dict[str, Any]]  #: an agent: the state in, {"turns": [its turn]} out

#: The threads a wide step's agents run on, shared by every instance of the process and kept. The
#: executor starts a thread only when no idle one is left (none at import), so there are as many as
#: agents asking at once.
AGENT_THREADS = ThreadPoolExecutor(max_workers=1024, thread_name_prefix="apibank-agent")


def import_langgraph():
    """LangGraph's graph module, imported on first use: listing the topologies needs no LangGraph."""
    import langgraph.graph

    return langgraph.graph


def graph_of(steps: list[list[tuple[str, Node]]]):
    """A graph of one node per step, step after step; a step's agents run at once."""
    lg = import_langgraph()
    END, START, StateGraph = lg.END, lg.START, lg.StateGraph

    graph = StateGraph(State)
    previous = START
    for step in steps:
        name = "+".join(name for name, _ in step)
        graph.add_node(name, step_node([node for _, node in step]))
        graph.add_edge(previous, name)
        previous = name
    graph.add_edge(previous, END)
    return graph.compile()


def step_node(agents: list[Node]) -> Node:
    """One node running a step's agents at once: the first on the calling thread, the others on the
    shared agent threads, each in a copy of the caller's context (an instance's epoch and its stop
    scope are context variables: chat_agent.solving_epoch, llm.breaker).

    Not one LangGraph node per agent: LangGraph runs a superstep of several nodes on a thread pool it
    starts and stops for every invoke, which cost a 100-instance debate run (N=4 R=2, the shapes of
    benchmarks/bench_throughput.py) 0.6 s of CPU; a step of one node it runs on the calling thread."""
    if len(agents) == 1:
        return agents[0]

    def node(state: State) -> dict[str, Any]:
        others = [AGENT_THREADS.submit(contextvars.copy_context().run, agent, state) for agent in agents[1:]]
        updates = [agents[0](state)] + [future.result() for future in others]
        return {"turns": [turn for update in updates for turn in update["turns"]]}

    return node


def solve_with(graph, choose: Callable[[list[AgentTurn]], tuple[AgentTurn | None, dict]]) -> Callable[[Task], Solution]:
    def solve(task: Task) -> Solution:
        turns = ordered(graph.invoke({"task": task, "turns": []})["turns"])
        chosen, trace = choose(turns)
        return solution_from(turns, chosen, trace)

    return solve


def voted(turns: list[AgentTurn], rule: str) -> tuple[AgentTurn | None, dict]:
    """The team's vote over `turns` (its trace lists each agent's key and the tally, to check by hand)."""
    result = vote([turn.submitted() for turn in turns], rule)  # each answer as parsed once
    return (None if result.winner is None else turns[result.winner]), {"vote": result.to_dict()}


def last(turns: list[AgentTurn]) -> tuple[AgentTurn | None, dict]:
    return (turns[-1] if turns else None), {}


def replicas(agents, cfg, role: str) -> Callable[[Task], Solution]:
    """N agents of one `role` answer alone, each on the whole task (seeds 0..N-1); the team votes.

    The `independent` topology, and under the replicas protocol every team topology
    with its final role (the reference's team-size runners).
    """
    def replica(index: int) -> Node:
        return lambda state: {"turns": [agents.ask(state["task"], role, index=index)]}

    step = [(f"{role}_{i}", replica(i)) for i in range(cfg.team_size)]
    return solve_with(graph_of([step]), lambda turns: voted(turns, cfg.vote))
