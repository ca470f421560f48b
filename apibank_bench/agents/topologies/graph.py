"""What every topology's LangGraph graph is made of.

A graph's state is the task plus the list of agent turns so far; nodes add
turns, and a chooser picks the answer from the finished turns (the last turn, or
a team vote). Nodes of one step run concurrently (LangGraph runs a superstep's
nodes in parallel), under the model layer's in-flight cap.
"""

from __future__ import annotations

import operator
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


Node = Callable[[State], dict[str, Any]]


def import_langgraph():
    """LangGraph's graph module, imported on first use: listing the topologies needs no LangGraph."""
    import langgraph.graph

    return langgraph.graph


def graph_of(steps: list[list[tuple[str, Node]]]):
    """A graph running each step's nodes in parallel, step after step."""
    lg = import_langgraph()
    END, START, StateGraph = lg.END, lg.START, lg.StateGraph

    graph = StateGraph(State)
    previous = [START]
    for step in steps:
        for name, node in step:
            graph.add_node(name, node)
            graph.add_edge(previous if len(previous) > 1 else previous[0], name)
        previous = [name for name, _ in step]
    for name in previous:
        graph.add_edge(name, END)
    # LangGraph's default thread pool (cpu count + 4 workers) would cap a wide step below the
    # model layer's in-flight cap on a small machine: size it to the widest step.
    return graph.compile().with_config(max_concurrency=max(len(step) for step in steps))


def solve_with(graph, choose: Callable[[list[AgentTurn]], tuple[AgentTurn | None, dict]]) -> Callable[[Task], Solution]:
    def solve(task: Task) -> Solution:
        turns = ordered(graph.invoke({"task": task, "turns": []})["turns"])
        chosen, trace = choose(turns)
        return solution_from(turns, chosen, trace)

    return solve


def voted(turns: list[AgentTurn], rule: str) -> tuple[AgentTurn | None, dict]:
    """The team's vote over `turns` (its trace lists each agent's key and the tally, to check by hand)."""
    result = vote([turn.answer for turn in turns], rule)
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
