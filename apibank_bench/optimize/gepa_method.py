"""GEPA (the `gepa` library) over the real topologies.

A candidate is the topology's role prompts (`{role: text}`), a data instance is
a task ID, a score is 1 (the scorer accepts the team's call) or 0. GEPA's
reflective dataset for a role holds, per training task of the minibatch, what
that role was shown, what it answered, and the scorer's verdict on the team's
final call with the gold call; its reflection model is our optimizer model
through `Context.ask`. Budget: GEPA's `max_metric_calls`, i.e. task rollouts
(one instance run with one candidate), the validation evaluations included.

GEPA's own checkpoint (`DIR/gepa/`) does not keep its random state, so a
resumed run starts the search again from scratch; the response cache makes the
repeat free and identical.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence, cast

from apibank_bench.core.text import shortened
from apibank_bench.optimize.rollouts import role_turns, turn_input
from apibank_bench.scoring.stage import Stage

if TYPE_CHECKING:  # the command line imports this module for its flags: keep that light
    from gepa import EvaluationBatch
    from gepa.core.adapter import ProposalFn
    from gepa.core.callbacks import (CandidateAcceptedEvent, CandidateRejectedEvent, GEPACallback, ProposalEndEvent,
                                     ValsetEvaluatedEvent)
    from gepa.core.result import GEPAResult

    from apibank_bench.optimize.context import Context, Rollout

# The budget (metric calls) is methods.FALLBACK_BUDGET.
HYPERPARAMETERS: dict[str, tuple[type, Any, str]] = {
    "minibatch_size": (int, 3, "GEPA: training tasks per reflection step (reflection_minibatch_size)"),
    "candidate_selection": (str, "pareto", "GEPA: parent selection: pareto, current_best, epsilon_greedy, "
                                           "top_k_pareto"),
    "module_selector": (str, "round_robin", "GEPA: which roles one step rewrites: round_robin or all"),
    "use_merge": (bool, False, "GEPA: also merge candidates from the Pareto front"),
    "max_merge_invocations": (int, 5, "GEPA: at most this many merges (with --use-merge)"),
    "skip_perfect_score": (bool, True, "GEPA: do not reflect on a minibatch the parent already solves"),
    "turns_per_task": (int, 2, "GEPA: a role's turns per task shown to the reflection (its last round)"),
    "input_chars": (int, 4000, "GEPA: characters of what a role was shown that the reflection sees (the "
                               "end, where the dialogue is; keeps reflections within a small model's context)"),
}

CUT = "[...]\n"  #: where a reflective record's text was cut (its start; the end is kept)
_STAGE_WORDS = {Stage.PARSE: "did not parse as one call", Stage.API_NAME: "named the wrong API",
                Stage.SCORE: "named the right API but the call's result was wrong"}


def feedback(rollout: Rollout) -> str:
    """The scorer's verdict on the team's final call, with the gold call (training tasks only)."""
    if rollout.correct:
        return f"Correct: the team's final call {rollout.predicted_call} gives the gold call's result."
    if rollout.stage == Stage.ERROR:
        return f"No answer (stage error): the run failed ({rollout.error}). Gold: {rollout.gold_call}."
    predicted = rollout.predicted_call or repr((rollout.answer or "")[-300:])
    return (f"Incorrect (stage {rollout.stage}): the team's final answer "
            f"{_STAGE_WORDS.get(rollout.stage, rollout.stage)} ({rollout.error}). "
            f"Predicted: {predicted}. Gold: {rollout.gold_call}.")


def role_records(rollout: Rollout, role: str, turns_per_task: int, input_chars: int) -> list[dict[str, str]]:
    """One role's part in one rollout: its turns of the last round it spoke in."""
    turns = role_turns(rollout, role)
    if not turns:
        return []
    last = max(turn.get("round", 0) for turn in turns)
    chosen = sorted((t for t in turns if t.get("round", 0) == last), key=lambda t: t.get("index", 0))
    return [{"Inputs": shortened(turn_input(turn, rollout.dialogue), input_chars, end=True, mark=CUT),
             "Generated Outputs": shortened(turn.get("answer") or "", input_chars, end=True, mark=CUT), "Feedback": feedback(rollout)}
            for turn in chosen[:max(1, turns_per_task)]]


class TopologyAdapter:
    """GEPA's adapter protocol (evaluate, make_reflective_dataset) over Context.evaluate: a data instance is a
    task ID, a trajectory its Rollout, an output the team's answer."""

    propose_new_texts: ProposalFn | None = None  # GEPA's own reflective proposer, with our reflection model

    def __init__(self, ctx: Context, turns_per_task: int, input_chars: int) -> None:
        self.ctx = ctx
        self.turns_per_task = turns_per_task
        self.input_chars = input_chars

    def evaluate(self, batch: list[str], candidate: dict[str, str],
                 capture_traces: bool = False) -> EvaluationBatch[Rollout, str | None]:
        from gepa import EvaluationBatch

        rollouts = self.ctx.evaluate(dict(candidate), list(batch))
        return EvaluationBatch(outputs=[r.answer for r in rollouts], scores=[r.score for r in rollouts],
                               trajectories=rollouts if capture_traces else None)

    def make_reflective_dataset(self, candidate: dict[str, str], eval_batch: EvaluationBatch[Rollout, str | None],
                                components_to_update: list[str]) -> Mapping[str, Sequence[Mapping[str, Any]]]:
        rollouts = eval_batch.trajectories or []  # (GEPA asks with capture_traces: there are some)
        dataset = {}
        for role in components_to_update:
            records = [record for rollout in rollouts
                       for record in role_records(rollout, role, self.turns_per_task, self.input_chars)]
            if not records:  # the role did not speak (cannot happen in our topologies): show the outcome
                records = [{"Inputs": shortened(r.dialogue, self.input_chars, end=True, mark=CUT), "Generated Outputs": r.answer or "",
                            "Feedback": feedback(r)} for r in rollouts]
            dataset[role] = records
        return dataset


class _Events:
    """GEPA callbacks -> log.jsonl records (proposals, acceptances, validation scores)."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.best: float | None = None

    def on_proposal_end(self, event: ProposalEndEvent) -> None:
        self.ctx.log("proposal", step=event["iteration"], roles=sorted(event["new_instructions"]))

    def on_candidate_accepted(self, event: CandidateAcceptedEvent) -> None:
        self.ctx.log("accepted", step=event["iteration"], candidate_idx=event["new_candidate_idx"],
                     minibatch_score=event["new_score"], parents=list(event["parent_ids"]))

    def on_candidate_rejected(self, event: CandidateRejectedEvent) -> None:
        self.ctx.log("rejected", step=event["iteration"], old_score=event["old_score"],
                     new_score=event["new_score"], reason=event["reason"])

    def on_valset_evaluated(self, event: ValsetEvaluatedEvent) -> None:
        score = event["average_score"]
        self.best = score if self.best is None else max(self.best, score)
        self.ctx.log("valset", step=event["iteration"], candidate_idx=event["candidate_idx"], score=score,
                     best=self.best, evaluated=event["num_examples_evaluated"])


class _FileLogger:
    """GEPA's log lines go to DIR/gepa/run_log.txt only (the terminal shows our progress lines)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def log(self, message: str) -> None:
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(message.rstrip("\n") + "\n")


def optimize(ctx: Context) -> dict[str, str]:
    import gepa

    hyper = ctx.hyper
    run_dir = ctx.out_dir / "gepa"
    shutil.rmtree(run_dir, ignore_errors=True)  # a fresh search (see the module docstring)
    run_dir.mkdir(parents=True)

    def reflection_lm(prompt: str | list[dict[str, Any]]) -> str:
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
        # Each reflection samples with its own seed (from ctx.rng: the same sequence on a rerun).
        return ctx.ask(messages, purpose="gepa.reflection", seed=ctx.rng.randrange(2**31))

    result: GEPAResult[str | None, int] = gepa.optimize(  # (a list's data IDs are its indices)
        seed_candidate=dict(ctx.seed_prompts),
        trainset=list(ctx.train_ids),
        valset=list(ctx.validation_ids or ctx.train_ids),
        adapter=TopologyAdapter(ctx, hyper["turns_per_task"], hyper["input_chars"]),
        reflection_lm=reflection_lm,
        candidate_selection_strategy=hyper["candidate_selection"],
        module_selector=hyper["module_selector"],
        reflection_minibatch_size=hyper["minibatch_size"],
        skip_perfect_score=hyper["skip_perfect_score"],
        use_merge=hyper["use_merge"],
        max_merge_invocations=hyper["max_merge_invocations"],
        max_metric_calls=ctx.budget,
        run_dir=str(run_dir),
        logger=_FileLogger(run_dir / "run_log.txt"),
        # GEPACallback declares every hook; GEPA calls those an object has (`notify_callbacks`: getattr)
        callbacks=[cast("GEPACallback", _Events(ctx))],
        seed=ctx.rng.randrange(2**31),
        raise_on_exception=True,
        display_progress_bar=False,
    )
    best = dict(result.candidates[result.best_idx])  # (`best_candidate`, typed for a text seed too)
    ctx.log("result", candidates=len(result.candidates), best_idx=result.best_idx,
            best=result.val_aggregate_scores[result.best_idx], metric_calls=result.total_metric_calls)
    return best
