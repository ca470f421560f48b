"""Solving and scoring instances: one at a time, or many in flight in a thread pool.

A model that could not answer (after the model layer's retries), a solver or
scorer crash, and an instance over its time limit all give an *error* result
(`Stage.ERROR`), never a wrong answer. One instance's failure never touches
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
from apibank_bench.llm.breaker import InstanceStop, instance_scope
from apibank_bench.llm.limit import request_ceiling
from apibank_bench.core.redact import redact
from apibank_bench.core.settings import RunConfig, flag
from apibank_bench.runs.epochs import split_case
from apibank_bench.runs.file_models import PredictionLine
from apibank_bench.runs.results import records
from apibank_bench.runs.row import ResultRow
from apibank_bench.runs.team import team_fields
from apibank_bench.runs.versions import TRACE, WRITES
from apibank_bench.scoring.scorer import Score, Scorer
from apibank_bench.scoring.stage import Reason, Stage, model_error_reason
from apibank_bench.data.tasks import Task

#: One scoring at a time per process: it is CPU-bound (no gain from threads under the GIL), and each
#: scoring holds its own environment's database copies, so 32 at once would multiply the memory.
_SCORING = threading.Lock()


#: Instances in flight against an endpoint whose server is not known to batch many completions at once.
REMOTE_IN_FLIGHT = 32


def instances_in_flight(cfg: RunConfig, batches: bool = False) -> int:
    """`concurrency`, else for a remote endpoint 32, or, when every server the run sends to is known to
    batch (`batches`: vLLM, SGLang, whose in-flight limit starts at the ceiling, llm/limit.py), enough
    instances for their agents' requests to fill the ceiling (`max_in_flight`, default 256 there: 256 single
    agents, 64 teams of 4): 32 single agents kept a wide server a quarter full. 1 for the embedded model (2 CPU
    cores serve one completion at a time) and the gold self-check (CPU-bound)."""
    if cfg.concurrency:
        return cfg.concurrency
    if not cfg.base_url or cfg.is_gold:
        return 1
    if not batches:
        return REMOTE_IN_FLIGHT
    from apibank_bench.agents.topologies import as_run

    spec, as_ran = as_run(cfg)
    return max(REMOTE_IN_FLIGHT, request_ceiling(cfg.max_in_flight, batches) // spec.agents(as_ran))


@dataclass
class InstanceResult:
    """One solved and scored instance: its score and the lines of its results files."""

    task: Task
    score: Score
    prediction: PredictionLine  #: its predictions.jsonl line
    row: ResultRow  #: its results.jsonl row
    trace: dict  #: its traces/<id>.json (runs.file_models.Trace)
    endpoint_failure: bool = False  #: an error caused by the model endpoint (a model error)
    epoch: int = 0

    @property
    def payload(self) -> dict:
        """The three lines as plain JSON values, as they travel from an xdist worker to the writer."""
        return {"prediction": self.prediction, "result": self.row.to_json(), "trace": self.trace}

    @property
    def correct(self) -> bool:
        return self.score.correct

    @property
    def is_error(self) -> bool:
        return self.score.stage == Stage.ERROR

    @property
    def failure_message(self) -> str:
        return (f"[{self.score.stage}] {self.score.error}\n"
                f"  predicted: {self.score.predicted_call}\n  gold:      {self.task.gold_call}")


def _turn_errors(solution: Solution) -> list[tuple[str, str | None]]:
    """Model errors of a solution, each with its kind (llm.failure.Failure): its own, and any agent turn's
    (a team with a failed member is not the team)."""
    errors = [(turn.error, turn.failure) for turn in solution.turns or () if turn.error]
    return errors or ([(solution.error, None)] if solution.error else [])


@dataclass
class Solved:
    """A solved instance waiting to be scored."""

    task: Task
    solution: Solution
    errors: list[str]  #: model or solver errors: the instance is an error row, not scored
    endpoint_failure: bool
    elapsed: float
    epoch: int = 0
    failure: str | None = None  #: the last model error's kind (llm.failure.Failure; None: another kind)


def solve(task: Task, solver: Solver, epoch: int = 0, stop: InstanceStop | None = None) -> Solved:
    """Solve `task` for `epoch` (its seeds moved by the epoch's offset); `stop`: the instance's stop (the pool
    reads from it how long the instance was held in the client)."""
    started = time.perf_counter()
    endpoint_failure = False
    try:
        with solving_epoch(epoch), instance_scope(stop) as stop:  # a request failed for good stops the others
            solution = solver(task)
        failed = _turn_errors(solution)
        if stop.cause and failed:
            failed = [(stop.cause, stop.failure)]  # that request's error, not an "another request failed" after it
        errors, failure = [error for error, _ in failed], (failed[-1][1] if failed else None)
        endpoint_failure = bool(errors)
    except Exception as exc:  # a solver bug costs this instance only
        solution = Solution(answer=None, trace={"traceback": redact(traceback.format_exc())})
        errors, failure = [redact(f"solver crashed: {type(exc).__name__}: {exc}")], None
    return Solved(task, solution, errors, endpoint_failure, time.perf_counter() - started, epoch, failure)


def score(solved: Solved, scorer: Scorer) -> InstanceResult:
    """Score a solved instance; for a team, every agent's call is scored too (runs.team)."""
    task, solution, team = solved.task, solved.solution, None
    if solved.errors:
        error = solved.errors[-1]
        verdict = (Score(False, Stage.ERROR, f"model error: {error}", reason=model_error_reason(solved.failure))
                   if solved.endpoint_failure else Score(False, Stage.ERROR, error, reason=Reason.ERROR_SOLVER_CRASH))
    else:
        try:
            with _SCORING:
                verdict = scorer.score(task, solution.answer if solution.prediction is None else solution.prediction)
        except Exception as exc:  # a scorer bug is the harness's failure, not the answer's
            verdict = Score(False, Stage.ERROR, f"scorer crashed: {type(exc).__name__}: {exc}",
                            reason=Reason.ERROR_SCORER_CRASH)
        team = _score_agents(task, solution, scorer) if verdict.stage != Stage.ERROR else None
    return _result(task, solution, verdict, solved.elapsed, solved.endpoint_failure, solved.epoch, team)


def _score_agents(task: Task, solution: Solution, scorer: Scorer) -> dict | None:
    """A team's agents scored with the same scorer (runs.team): the row's team fields; None for a
    single agent. A crash here costs only the agents' scores (recorded), never the team's verdict."""
    turns = solution.turns or []
    if len(turns) < 2:
        return None
    try:
        with _SCORING:
            return team_fields(turns, solution.trace.get("vote"), lambda prediction: scorer.score(task, prediction))
    except Exception as exc:  # noqa: BLE001
        return {"agents_correct": None, "agents_error": f"scorer crashed: {type(exc).__name__}: {exc}"}


def error_result(task: Task, message: str, epoch: int = 0, *, reason: Reason) -> InstanceResult:
    """An instance that produced nothing to score (time limit, a dead worker...)."""
    return _result(task, Solution(answer=None), Score(False, Stage.ERROR, message, reason=reason), 0.0, False, epoch)


def _result(task: Task, solution: Solution, score: Score, elapsed: float, endpoint_failure: bool, epoch: int = 0,
            team: dict | None = None) -> InstanceResult:
    turns = solution.turns
    prediction, row = records(task, solution.answer, score, epoch, prompt_tokens=solution.prompt_tokens,
                              completion_tokens=solution.completion_tokens, latency_s=round(elapsed, 4),
                              model_calls=solution.model_calls,
                              **({"agent_answers": [turn.answer for turn in turns]} if turns else {}),
                              **({"answered_by": str(solution.answered_by)} if solution.answered_by else {}),
                              **(team or {}))
    trace = {"schema_version": WRITES[TRACE], "id": task.combined_id, "epoch": epoch,  # runs.file_models.Trace
             "gold_call": task.gold_call, "result": row.to_json(),
             **solution.to_trace()}  # the turns become JSON here, once
    return InstanceResult(task, score, prediction, row, trace, endpoint_failure, epoch)


class RunStopped(RuntimeError):
    """The pool stopped taking instances (circuit breaker, -x, Ctrl-C); the message says why."""


class InstancePool:
    """Keeps up to `concurrency` instances in flight; results are fetched per instance, in any order.

    Instances are named by case ID (runs.epochs: the task ID, with `-epochE` when the run has
    several epochs). `start(ids)` queues instances in the given order (the tests' order, so the
    first tests' instances start first); `result(id)` waits for one, starting
    it first if it was never queued. `stop(reason)` (the model layer's circuit
    breaker, -x) cancels what has not started, and `result` raises RunStopped
    for it.

    Scoring runs on a thread of its own (one at a time, as `_SCORING` has it), so an
    instance's thread starts the next instance as soon as its requests are answered:
    a slow scoring (the first ToolSearcher search loads its embedding model) delays
    results, never requests.
    """

    def __init__(self, load: Callable[[str], Task], solver: Solver, scorer: Scorer, concurrency: int = 1,
                 time_limit: float | None = None) -> None:
        self._load, self._solver, self._scorer = load, solver, scorer
        self.time_limit = time_limit
        self._executor = ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="apibank-instance")
        self._scoring = ThreadPoolExecutor(max_workers=1, thread_name_prefix="apibank-scoring")
        self._futures: dict[str, Future] = {}
        self._started: dict[str, float] = {}
        self._stops: dict[str, InstanceStop] = {}  #: each started instance's stop (its time held in the client)
        self._lock = threading.Lock()
        self.stopped: str | None = None  #: why the pool stopped, once it has

    def start(self, ids: Iterable[str]) -> None:
        """Queue `ids` in order. If the pool stops meanwhile (the breaker trips on the first answers), the rest
        stay unqueued: each of their tests then gets RunStopped, and what finished is kept."""
        try:
            for task_id in ids:
                self._submit(task_id)
        except RunStopped:
            pass

    def _submit(self, task_id: str) -> Future:
        with self._lock:
            if task_id not in self._futures:
                if self.stopped:
                    raise RunStopped(self.stopped)
                future: Future = Future()  # resolved by the scoring thread (cancelled while queued)
                self._futures[task_id] = future
                self._executor.submit(self._run, task_id, future)
            return self._futures[task_id]

    def _run(self, case: str, future: Future) -> None:
        if not future.set_running_or_notify_cancel():
            return  # cancelled before it started
        stop = InstanceStop()
        with self._lock:
            self._started[case] = time.monotonic()
            self._stops[case] = stop
        task_id, epoch = split_case(case)
        try:
            task = self._load(task_id)
        except Exception as exc:  # noqa: BLE001 - unreadable data fails this instance with the reason
            future.set_exception(RunStopped(f"cannot load task {task_id}: {type(exc).__name__}: {exc}"))
            return
        solved = solve(task, self._solver, epoch, stop)
        self._scoring.submit(self._finish, solved, future)

    def _finish(self, solved: Solved, future: Future) -> None:
        try:
            result = score(solved, self._scorer)
        except BaseException as exc:  # noqa: BLE001 - whoever waits for this instance gets the failure
            future.set_exception(exc)
        else:
            future.set_result(result)

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
            # The time limit counts the instance's own time, not its requests' waits for a slot in the client.
            remaining = None if self.time_limit is None else \
                self.time_limit - (time.monotonic() - started - self._stops[task_id].held_s())
            try:
                return future.result(timeout=remaining if remaining is None else max(remaining, 0))
            except TimeoutError:
                assert self.time_limit is not None  # a wait without a limit never times out
                if self.time_limit - (time.monotonic() - started - self._stops[task_id].held_s()) > 0:
                    continue  # it was held meanwhile: its time is not up yet
                # The thread cannot be killed; it finishes in the background and its answer is discarded.
                plain_id, epoch = split_case(task_id)
                return error_result(self._load(plain_id), f"time limit: no result within {self.time_limit:g} s "
                                    f"({flag('instance_timeout')})", epoch, reason=Reason.ERROR_TIME_LIMIT)

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
        self._scoring.shutdown(wait=False, cancel_futures=True)
