"""Solving and scoring instances: one at a time, or many in flight in a thread pool.

A model that could not answer (after the model layer's retries), a solver or
scorer crash, and an instance over its time limit all give an *error* result
(`stage: "error"`), never a wrong answer. One instance's failure never touches
another's.
"""

from __future__ import annotations

import threading
import time
import traceback
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterable

from apibank_bench.agents import Solution, Solver
from apibank_bench.agents.chat_agent import solving_epoch
from apibank_bench.core.redact import redact
from apibank_bench.core.settings import flag
from apibank_bench.runs.epochs import split_case
from apibank_bench.runs.results import records
from apibank_bench.runs.team import team_fields
from apibank_bench.scoring import Score, Scorer
from apibank_bench.data.tasks import Task

ERROR = "error"  #: the stage of an instance that has no answer to score
#: One scoring at a time per process: it is CPU-bound (no gain from threads under the GIL), and each
#: scoring holds its own environment's database copies, so 32 at once would multiply the memory.
_SCORING = threading.Lock()


@dataclass
class InstanceResult:
    """One solved and scored instance: its score and the lines of its results files."""

    task: Task
    score: Score
    payload: dict  #: prediction, result and trace lines
    endpoint_failure: bool = False  #: an error caused by the model endpoint (counts toward the circuit breaker)
    epoch: int = 0

    @property
    def correct(self) -> bool:
        return self.score.correct

    @property
    def is_error(self) -> bool:
        return self.score.stage == ERROR

    @property
    def failure_message(self) -> str:
        return (f"[{self.score.stage}] {self.score.error}\n"
                f"  predicted: {self.score.predicted_call}\n  gold:      {self.task.gold_call}")


def _turn_errors(solution: Solution) -> list[str]:
    """Model errors of a solution: its own, and any agent turn's (a team with a failed member is not the team)."""
    errors = [agent.get("error") for agent in solution.trace.get("agents", []) if agent.get("error")]
    return errors or ([solution.error] if solution.error else [])


def solve_and_score(task: Task, solver: Solver, scorer: Scorer, epoch: int = 0) -> InstanceResult:
    """Solve `task` for `epoch` (its seeds moved by the epoch's offset) and score it; for a team,
    every agent's call is scored too (runs.team)."""
    started = time.perf_counter()
    endpoint_failure = False
    team = None
    try:
        with solving_epoch(epoch):
            solution = solver(task)
        errors = _turn_errors(solution)
        endpoint_failure = bool(errors)
    except Exception as exc:  # a solver bug costs this instance only
        solution = Solution(answer=None, trace={"traceback": redact(traceback.format_exc())})
        errors = [redact(f"solver crashed: {type(exc).__name__}: {exc}")]
    elapsed = time.perf_counter() - started
    if errors:
        score = Score(False, ERROR, f"model error: {errors[-1]}" if endpoint_failure else errors[-1])
    else:
        try:
            with _SCORING:
                score = scorer.score(task, solution.answer)
        except Exception as exc:  # a scorer bug is the harness's failure, not the answer's
            score = Score(False, ERROR, f"scorer crashed: {type(exc).__name__}: {exc}")
        team = _score_agents(task, solution, scorer) if score.stage != ERROR else None
    return _result(task, solution, score, elapsed, endpoint_failure, epoch, team)


def _score_agents(task: Task, solution: Solution, scorer: Scorer) -> dict | None:
    """A team's agents scored with the same scorer (runs.team); None for a single agent. A crash
    here costs only the agents' scores (recorded), never the team's verdict."""
    agents = solution.trace.get("agents") or []
    if len(agents) < 2:
        return None
    try:
        with _SCORING:
            return team_fields(agents, solution.trace.get("vote"), lambda answer: scorer.score(task, answer))
    except Exception as exc:  # noqa: BLE001
        return {"agents_correct": None, "agents_error": f"scorer crashed: {type(exc).__name__}: {exc}"}


def error_result(task: Task, message: str, epoch: int = 0) -> InstanceResult:
    """An instance that produced nothing to score (time limit, cancelled run...)."""
    return _result(task, Solution(answer=None), Score(False, ERROR, message), 0.0, False, epoch)


def _result(task: Task, solution: Solution, score: Score, elapsed: float, endpoint_failure: bool, epoch: int = 0,
            team: dict | None = None) -> InstanceResult:
    agents = solution.trace.get("agents")
    extra = {
        "prompt_tokens": solution.prompt_tokens,
        "completion_tokens": solution.completion_tokens,
        "latency_s": round(elapsed, 4),
        "model_calls": solution.model_calls,
    }
    if agents:
        extra["agent_answers"] = [agent.get("answer") for agent in agents]
    extra.update(team or {})
    prediction, result = records(task, solution.answer, score, extra, epoch)
    trace = {"id": task.combined_id, "epoch": epoch, "gold_call": task.gold_call, "result": result, **solution.trace}
    return InstanceResult(task, score, {"prediction": prediction, "result": result, "trace": trace},
                          endpoint_failure, epoch)


class RunStopped(RuntimeError):
    """The pool stopped taking instances (circuit breaker, -x, Ctrl-C); the message says why."""


class InstancePool:
    """Keeps up to `concurrency` instances in flight; results are fetched per instance, in any order.

    Instances are named by case ID (runs.epochs: the task ID, with `-epochE` when the run has
    several epochs). `start(ids)` queues instances in the given order (the tests' order, so the
    first tests' instances start first); `result(id)` waits for one, starting
    it first if it was never queued. After `breaker` consecutive endpoint
    failures the pool stops: what has not started is cancelled and `result`
    raises RunStopped for it.
    """

    def __init__(self, load: Callable[[str], Task], solver: Solver, scorer: Scorer, concurrency: int = 1,
                 time_limit: float | None = None, breaker: int = 0) -> None:
        self._load, self._solver, self._scorer = load, solver, scorer
        self.time_limit = time_limit
        self.breaker = breaker
        self._executor = ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="apibank-instance")
        self._futures: dict[str, Future] = {}
        self._started: dict[str, float] = {}
        self._lock = threading.Lock()
        self._consecutive_failures = 0
        self.stopped: str | None = None  #: why the pool stopped, once it has

    def start(self, ids: Iterable[str]) -> None:
        for task_id in ids:
            self._submit(task_id)

    def _submit(self, task_id: str) -> Future:
        with self._lock:
            if task_id not in self._futures:
                if self.stopped:
                    raise RunStopped(self.stopped)
                self._futures[task_id] = self._executor.submit(self._run, task_id)
            return self._futures[task_id]

    def _run(self, case: str) -> InstanceResult:
        with self._lock:
            self._started[case] = time.monotonic()
        task_id, epoch = split_case(case)
        try:
            task = self._load(task_id)
        except Exception as exc:  # noqa: BLE001 - unreadable data fails this instance with the reason
            raise RunStopped(f"cannot load task {task_id}: {type(exc).__name__}: {exc}") from exc
        result = solve_and_score(task, self._solver, self._scorer, epoch)
        self._count(result)
        return result

    def _count(self, result: InstanceResult) -> None:
        with self._lock:
            self._consecutive_failures = self._consecutive_failures + 1 if result.endpoint_failure else 0
            if self.breaker and self._consecutive_failures >= self.breaker and not self.stopped:
                self.stopped = (f"stopped after {self._consecutive_failures} consecutive instances failed at the "
                                f"model endpoint (last: {result.score.error}); fix the endpoint and rerun with "
                                f"{flag('resume')}")
                self._cancel_pending()

    def result(self, task_id: str) -> InstanceResult:
        """This instance's result; an error result if it runs over the time limit."""
        future = self._submit(task_id)
        while True:
            with self._lock:
                started = self._started.get(task_id)
            if started is None:  # still queued: wait for it to start (or be cancelled)
                try:
                    return future.result(timeout=0.05)
                except TimeoutError:
                    continue
                except CancelledError:
                    raise RunStopped(self.stopped or "the run was stopped") from None
            remaining = None if self.time_limit is None else self.time_limit - (time.monotonic() - started)
            try:
                return future.result(timeout=remaining if remaining is None else max(remaining, 0))
            except TimeoutError:
                # The thread cannot be killed; it finishes in the background and its answer is discarded.
                plain_id, epoch = split_case(task_id)
                return error_result(self._load(plain_id), f"time limit: no result within {self.time_limit:g} s "
                                    f"({flag('instance_timeout')})", epoch)

    def stop(self, reason: str) -> None:
        """Cancel every instance that has not started (running ones finish, bounded by the model timeout)."""
        with self._lock:
            self.stopped = self.stopped or reason
            self._cancel_pending()

    def _cancel_pending(self) -> None:
        for future in self._futures.values():
            future.cancel()

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
