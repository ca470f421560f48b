"""Solvers: the gold self-check, the single agent, the multi-agent topologies, the Agents SDK runner."""

from __future__ import annotations

from typing import Callable

from apibank_bench.core.settings import RunConfig
from apibank_bench.data.tasks import Task
from apibank_bench.agents.solution import Solution

Solver = Callable[[Task], Solution]


def gold_solver(task: Task) -> Solution:
    """Answers with the task's own gold call: checks the harness, not a model."""
    return Solution(answer=task.gold_call, trace={"solver": "gold (harness self-check)"})


def build_solver(config: RunConfig, model=None) -> Solver:
    """The solver for a run. `model` is the shared ChatClient (None for the gold self-check)."""
    if config.is_gold:
        return gold_solver
    from apibank_bench.agents.topologies import build_topology

    return build_topology(config, model)


def import_solver_modules(config: RunConfig) -> None:
    """Import now what `build_solver(config)` will import: LangGraph, for any model-driven topology.

    `run` calls this before pytest starts. pytest rewrites the asserts of every module of a
    distribution that ships a pytest plugin, and langsmith (which LangGraph imports through
    langchain_core) is one; where bytecode is not written (PYTHONDONTWRITEBYTECODE, as on CI) that
    rewrite is redone by every run, and an import before pytest skips it.
    """
    if not config.is_gold:
        from apibank_bench.agents.topologies import graph
        from apibank_bench.core.lasting import building_lasting

        with building_lasting():  # about a hundred thousand objects, no garbage (core/lasting.py)
            graph.import_langgraph()


__all__ = ["Solution", "Solver", "build_solver", "gold_solver", "import_solver_modules"]
