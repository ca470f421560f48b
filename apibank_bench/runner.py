"""Solve one instance and score it, never letting one instance's crash escape."""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass

from .agents import Solution, Solver
from .results import records
from .scoring import Score, Scorer
from .tasks import Task


@dataclass
class Outcome:
    task: Task
    solution: Solution
    score: Score
    payload: dict  #: prediction, result and trace lines for the results files

    @property
    def correct(self) -> bool:
        return self.score.correct

    @property
    def failure_message(self) -> str:
        return (f"[{self.score.stage}] {self.score.error}\n"
                f"  predicted: {self.score.predicted_call}\n  gold:      {self.task.gold_call}")


def solve_and_score(task: Task, solver: Solver, scorer: Scorer) -> Outcome:
    started = time.perf_counter()
    try:
        solution = solver(task)
    except Exception as exc:  # a solver bug or model failure costs this instance only
        solution = Solution(answer=None, error=f"{type(exc).__name__}: {exc}",
                            trace={"traceback": traceback.format_exc()})
    elapsed = time.perf_counter() - started
    try:
        score = scorer.score(task, solution.answer)
    except Exception as exc:  # a scorer bug must not lose the instance either
        score = Score(False, "score", f"scorer error: {type(exc).__name__}: {exc}")
    if solution.error and score.stage == "parse":
        score = Score(False, "parse", f"model error: {solution.error}")
    agents = solution.trace.get("agents")
    extra = {
        "prompt_tokens": solution.prompt_tokens,
        "completion_tokens": solution.completion_tokens,
        "latency_s": round(elapsed, 4),
        "model_calls": solution.model_calls,
    }
    if agents:
        extra["agent_answers"] = [agent.get("answer") for agent in agents]
    prediction, result = records(task, solution.answer, score, extra)
    trace = {"id": task.combined_id, "gold_call": task.gold_call, "result": result, **solution.trace}
    return Outcome(task, solution, score, {"prediction": prediction, "result": result, "trace": trace})
