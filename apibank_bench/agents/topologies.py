"""The topologies: each a small LangGraph graph over the shared pieces.

Every graph's state is the task plus the list of agent turns so far; nodes add
turns, and the last node picks the answer. Nodes of one step run concurrently
(LangGraph runs a superstep's nodes in parallel), under the model layer's
in-flight cap.
"""

from __future__ import annotations

import dataclasses
import operator
from typing import Annotated, Any, Callable, TypedDict

from langgraph.graph import END, START, StateGraph

from ..config import RunConfig
from ..tasks import Task
from .kinds import make_agents
from .pieces import Agents, AgentTurn, reports, solution_from
from .solution import Solution
from .vote import vote

#: Centralized workers, in the order a team adds them (a team of N has N - 1 workers).
WORKER_ROLES = ("caller_worker", "inspector_worker", "validator_worker", "toolsearcher_worker", "intent_worker",
                "ambiguity_worker", "api_result_worker", "call_normalizer_worker", "type_check_worker")
#: The sequential pipeline in stage order, each with the team size from which it takes part.
PIPELINE = (("dialogue_reader", 4), ("intent_extractor", 8), ("toolsearcher_planner", 8), ("schema_mapper", 4),
            ("api_result_interpreter", 8), ("ambiguity_resolver", 10), ("argument_planner", 2),
            ("type_validator", 8), ("call_normalizer", 10), ("verifier", 2))


class State(TypedDict):
    task: Task
    turns: Annotated[list[AgentTurn], operator.add]


def _ordered(turns: list[AgentTurn], round: int | None = None, role: str | None = None) -> list[AgentTurn]:
    picked = [t for t in turns if (round is None or t.round == round) and (role is None or t.role == role)]
    return sorted(picked, key=lambda turn: (turn.round, turn.index))


Node = Callable[[State], dict[str, Any]]


def _graph(steps: list[list[tuple[str, Node]]]):
    """A graph running each step's nodes in parallel, step after step."""
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


def _solve_with(graph, choose: Callable[[list[AgentTurn]], tuple[AgentTurn | None, dict]]) -> Callable[[Task], Solution]:
    def solve(task: Task) -> Solution:
        turns = _ordered(graph.invoke({"task": task, "turns": []})["turns"])
        chosen, trace = choose(turns)
        return solution_from(turns, chosen, trace)

    return solve


def _voted(turns: list[AgentTurn], rule: str) -> tuple[AgentTurn | None, dict]:
    """The team's vote over `turns` (its trace lists each agent's key and the tally, to check by hand)."""
    result = vote([turn.answer for turn in turns], rule)
    return (None if result.winner is None else turns[result.winner]), {"vote": result.to_dict()}


def _last(turns: list[AgentTurn]) -> tuple[AgentTurn | None, dict]:
    return (turns[-1] if turns else None), {}


# -- the builders --------------------------------------------------------------------

def single(agents: Agents, cfg: RunConfig):
    node = lambda state: {"turns": [agents.ask(state["task"], "solver")]}  # noqa: E731
    return _solve_with(_graph([[("solver", node)]]), _last)


def independent(agents: Agents, cfg: RunConfig):
    def solver(index: int) -> Node:
        return lambda state: {"turns": [agents.ask(state["task"], "solver", index=index)]}

    step = [(f"solver_{i}", solver(i)) for i in range(cfg.team_size)]
    return _solve_with(_graph([step]), lambda turns: _voted(turns, cfg.vote))


def decentralized(agents: Agents, cfg: RunConfig):
    """N debaters answer, then R rounds in which each sees its peers' previous answers."""
    def debater(index: int, round: int) -> Node:
        def node(state: State) -> dict:
            peers = [t for t in _ordered(state["turns"], round - 1) if t.index != index] if round else []
            context = ("Your peers' previous answers:\n" + reports(peers, agents.message_format)) if peers else ""
            return {"turns": [agents.ask(state["task"], "debater", context, index=index, round=round)]}
        return node

    steps = [[(f"debater_{r}_{i}", debater(i, r)) for i in range(cfg.team_size)] for r in range(cfg.rounds + 1)]
    return _solve_with(_graph(steps), lambda turns: _voted(_ordered(turns, cfg.rounds), cfg.vote))


def centralized(agents: Agents, cfg: RunConfig):
    """A manager delegates; workers see only the delegation; the manager emits the final call."""
    workers = WORKER_ROLES[: max(cfg.team_size - 1, 1)]

    def delegate(state: State) -> dict:
        turn = agents.ask(state["task"], "manager", "Write the assignment for your workers; no final call yet.",
                          emits_call=False)
        return {"turns": [turn]}

    def worker(index: int, role: str) -> Node:
        def node(state: State) -> dict:
            delegation = _ordered(state["turns"], role="manager")[0].answer
            return {"turns": [agents.ask(state["task"], role, delegation, index=index + 1, round=1,
                                         show_task=False)]}
        return node

    def decide(state: State) -> dict:
        heard = [t for t in _ordered(state["turns"], 1)]
        context = "Your workers reported:\n" + reports(heard, agents.message_format) + "\nNow give the final call."
        return {"turns": [agents.ask(state["task"], "manager", context, round=2)]}

    steps = [[("delegate", delegate)], [(role, worker(i, role)) for i, role in enumerate(workers)],
             [("decide", decide)]]
    return _solve_with(_graph(steps), _last)


def sequential(agents: Agents, cfg: RunConfig):
    """A pipeline; each stage sees the earlier stages' reports; the last stage's call is the answer."""
    stages = [role for role, joins_at in PIPELINE if joins_at <= cfg.team_size]

    def stage(index: int, role: str) -> Node:
        def node(state: State) -> dict:
            earlier = _ordered(state["turns"])
            context = ("Earlier stages reported:\n" + reports(earlier, agents.message_format)) if earlier else ""
            return {"turns": [agents.ask(state["task"], role, context, index=index, round=index)]}
        return node

    return _solve_with(_graph([[(role, stage(i, role))] for i, role in enumerate(stages)]), _last)


BUILDERS = {"single": single, "independent": independent, "decentralized": decentralized,
            "centralized": centralized, "sequential": sequential}


def build_topology(cfg: RunConfig, model) -> Callable[[Task], Solution]:
    if cfg.topology == "agents_sdk":  # kept for existing commands: an alias of `single` with `sdk` agents
        cfg = dataclasses.replace(cfg, topology="single", agent_kind="sdk")
    try:
        builder = BUILDERS[cfg.topology]
    except KeyError:
        raise ValueError(f"unknown topology {cfg.topology!r}; expected one of "
                         f"{', '.join([*BUILDERS, 'agents_sdk'])}") from None
    return builder(make_agents(cfg, model), cfg)
