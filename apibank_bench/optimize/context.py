"""The seam between the `optimize` command and its methods: a Rollout and the Context.

A method sees only the Context: it scores candidate role prompts on training or
validation tasks by running the real topology (`evaluate`), asks the optimizer
model for reflections, proposals or judgements (`ask`) and records what it did
(`log`). The eval set never reaches it: `evaluate` refuses any ID outside the
two splits. Determinism: rollouts come back in `task_ids` order whatever order
the threads finish in, and `rng` is the only randomness a method may use.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from apibank_bench.agents.prompts import task_prompt
from apibank_bench.agents.team_models import TeamModels
from apibank_bench.core.settings import RunConfig
from apibank_bench.llm import ChatClient, ModelError
from apibank_bench.runs.instances import InstanceResult
from apibank_bench.runs.parts import RunParts, with_prompts
from apibank_bench.scoring.scorer import Scorer
from apibank_bench.scoring.stage import Stage
from apibank_bench.data.tasks import Task, get_task
from apibank_bench.optimize.events import EventLog


@dataclass
class Rollout:
    """One training or validation instance run with one candidate."""

    task_id: str
    correct: bool
    stage: Stage  #: how far the team's answer got (`Stage.ERROR`: the endpoint, solver or scorer failed)
    error: str | None
    predicted_call: str | None
    gold_call: str
    answer: str | None  #: the team's final answer text
    agents: list[dict]  #: the trace's agent turns: role, index, round, messages, answer, call, ...
    dialogue: str  #: the task prompt the agents saw

    @property
    def score(self) -> float:
        return 1.0 if self.correct else 0.0


def candidate_key(prompts: dict[str, str]) -> str:
    """A short content hash naming a candidate (the same prompts, the same folder)."""
    text = json.dumps(prompts, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def write_prompts(folder: Path, topology: str, prompts: dict[str, str]) -> Path:
    """`folder/<topology>/<role>.txt` for each role: a prompts folder `run --prompts-dir` reads."""
    target = Path(folder) / topology
    target.mkdir(parents=True, exist_ok=True)
    for role, text in prompts.items():
        (target / f"{role}.txt").write_text(text.strip() + "\n", encoding="utf-8")
    return Path(folder)


def rollout_from(outcome: InstanceResult) -> Rollout:
    row = outcome.row
    return Rollout(
        task_id=row.id,
        correct=bool(row.correct),
        stage=outcome.score.stage,
        error=row.error,
        predicted_call=row.predicted_call,
        gold_call=outcome.task.gold_call,
        answer=outcome.prediction["prediction"],
        agents=list(outcome.trace.get("agents") or []),
        dialogue=task_prompt(outcome.task),
    )


def usage(outcomes: Iterable[InstanceResult]) -> dict[str, int]:
    """What the endpoint did for these outcomes: requests and tokens of uncached turns, cache hits."""
    counts = {"requests": 0, "cache_hits": 0, "prompt_tokens": 0, "completion_tokens": 0}
    for outcome in outcomes:
        for turn in outcome.trace.get("agents") or []:
            if turn.get("cached"):
                counts["cache_hits"] += 1
                continue
            counts["requests"] += 1
            counts["prompt_tokens"] += int(turn.get("prompt_tokens") or 0)
            counts["completion_tokens"] += int(turn.get("completion_tokens") or 0)
    return counts


class Context:
    """What a method's `optimize(ctx)` may use (see `optimize.methods`). Built by the optimize command."""

    def __init__(self, *, topology: str, roles: list[str], seed_prompts: dict[str, str], train_ids: list[str],
                 validation_ids: list[str], seed: int, budget: int, hyper: dict[str, Any], out_dir: Path,
                 parts: RunParts, events: EventLog, optimizer: ChatClient | TeamModels | None = None, protected_ids: Iterable[str] = (), workers: int = 8) -> None:
        self.topology = topology
        self.roles = list(roles)
        self.seed_prompts = dict(seed_prompts)
        self.train_ids = list(train_ids)
        self.validation_ids = list(validation_ids)
        self.rng = random.Random(seed)
        self.budget = budget
        self.hyper = dict(hyper)
        self.out_dir = Path(out_dir)
        self.parts = parts  #: the job's run parts: its clients, scorer, embedded model; a candidate's solver
        optimizer = optimizer or parts.models()
        if optimizer is None:
            raise ValueError("optimize needs a model to prompt: --model gold has none")
        self.optimizer = optimizer
        self.events = events
        self.protected_ids = frozenset(protected_ids)
        self.workers = workers
        self._allowed = {*self.train_ids, *self.validation_ids}
        self._evaluations = 0
        self._lock = threading.Lock()

    # -- for methods -------------------------------------------------------------------

    def evaluate(self, prompts: dict[str, str], task_ids: list[str]) -> list[Rollout]:
        """Run the topology with these role prompts (missing roles keep their seed text) on these tasks."""
        task_ids = list(task_ids)
        self._check_ids(task_ids)
        unknown = sorted(set(prompts) - set(self.roles))
        if unknown:
            raise ValueError(f"evaluate: not a role of {self.topology}: {', '.join(unknown)}")
        candidate = {**self.seed_prompts, **prompts}
        folder = self.candidate_dir(candidate)
        # through the job's run parts, with the candidate's prompts (no folder: a rollout is not a results row)
        outcomes = with_prompts(self.parts, str(folder)).solve_tasks([self.task(task_id) for task_id in task_ids],
                                                                      self.workers)
        rollouts = [rollout_from(outcome) for outcome in outcomes]
        with self._lock:
            self._evaluations += 1
            step = self._evaluations
        self.log("evaluation", step=step, candidate=folder.name, split=self._split_of(task_ids),
                 tasks=len(rollouts), correct=sum(r.correct for r in rollouts),
                 score=(sum(r.score for r in rollouts) / len(rollouts)) if rollouts else 0.0,
                 errors=sum(r.stage == Stage.ERROR for r in rollouts), task_ids=task_ids,
                 scores=[r.score for r in rollouts], **usage(outcomes))
        return rollouts

    def ask(self, messages: list[dict], *, purpose: str, seed: int | None = None) -> str:
        """One completion from the optimizer model (reflection, proposal, judge); cached and logged."""
        try:
            completion = self.optimizer.complete(messages, seed=seed)
        except ModelError as exc:
            self.log("ask_error", purpose=purpose, error=str(exc), requests=exc.completion.attempts)
            raise
        fresh = not completion.cached
        self.log("ask", purpose=purpose, requests=completion.attempts, cache_hits=int(completion.cached),
                 prompt_tokens=completion.prompt_tokens if fresh else 0,
                 completion_tokens=completion.completion_tokens if fresh else 0)
        return completion.text

    @property
    def run_config(self) -> RunConfig:
        return self.parts.cfg

    @property
    def client(self) -> ChatClient | TeamModels | None:
        """The task's clients (the team's)."""
        return self.parts.models()

    @property
    def scorer(self) -> Scorer:
        return self.parts.scorer()

    def log(self, event: str, **fields: Any) -> None:
        self.events.log(event, **fields)

    # -- helpers -------------------------------------------------------------------------

    def task(self, task_id: str) -> Task:
        return get_task(task_id, root=self.scorer.root)

    def candidate_dir(self, prompts: dict[str, str]) -> Path:
        """The candidate's prompts folder under out_dir/candidates/, named by its content hash."""
        folder = self.out_dir / "candidates" / candidate_key(prompts)
        with self._lock:
            if not folder.is_dir():  # written aside and renamed: a killed run never leaves half a folder
                staging = folder.with_name(folder.name + ".tmp")
                shutil.rmtree(staging, ignore_errors=True)
                write_prompts(staging, self.topology, prompts)
                staging.rename(folder)
        return folder

    def _check_ids(self, task_ids: list[str]) -> None:
        held_out = [task_id for task_id in task_ids if task_id in self.protected_ids]
        if held_out:
            raise ValueError(f"evaluate: refusing {len(held_out)} eval-set ID(s) (e.g. {held_out[0]}): "
                             "optimizers see the train and validation splits only")
        outside = [task_id for task_id in task_ids if task_id not in self._allowed]
        if outside:
            raise ValueError(f"evaluate: {len(outside)} ID(s) outside the train/validation splits "
                             f"(e.g. {outside[0]})")

    def _split_of(self, task_ids: list[str]) -> str:
        ids = set(task_ids)
        if ids <= set(self.train_ids):
            return "train"
        if ids <= set(self.validation_ids):
            return "validation"
        return "mixed"
