"""MIPROv2 through DSPy (`pip install apibank-bench[mipro]`, dspy 3.4.1 with optuna), bridged to our teams.

The bridge:

* Each role of the topology is one `dspy.Predict` (signature `dialogue -> answer`) whose instructions
  are the role prompt. The program's `forward(task_id)` runs OUR topology once on that training task
  through `ctx.evaluate`, with every role prompt rendered from its predictor: the current
  instructions plus the predictor's demos appended as worked examples. Its prediction is the team's
  final call; the metric is the scorer's verdict (`Rollout.correct`).
* Bootstrapped demos: after a run, forward appends one trace step per role (the input that role saw,
  its reply) to DSPy's trace, so MIPRO's bootstrapping collects per-role demos from successful team
  runs exactly as it does from predictor calls. Labeled demos are training tasks with their gold call.
* DSPy's prompt model (dataset summary, program description, instruction proposals) is `AskLM`, a
  `dspy.BaseLM` whose forward calls `ctx.ask(purpose="proposal")`, so no litellm request is ever
  made. The task model is a guard that fails if anything calls it: the team's agents run only
  through `ctx.evaluate`. When the optimizer model ignores DSPy's field markers (small models do), a lenient
  chat adapter reads the reply as MASPO reads a proposal (<prompt> tags, else a fenced block, else
  the whole text) for single-output signatures, instead of crashing the proposal step.
* `ctx.ask` takes no temperature (the optimizer model samples with its client's settings), so DSPy's
  proposal temperature is not a flag; proposals differ through DSPy's per-proposal `rollout_id`,
  passed on as the request seed.
* The returned prompts are the best program's instructions with its selected demos written in.

What differs from stock MIPROv2: the program's predictors are never called by DSPy -- the team runs as
one black box per task, so a trial changes all role prompts at once and bootstrapped demos come from
whole-team successes; DSPy's Evaluate runs one task per `ctx.evaluate` call (`num_threads=1`, so the
order of requests and the result are deterministic); demo texts are clipped to keep prompts small;
and an endpoint failure aborts the optimization (DSPy would score a failed example 0, i.e. count a
failure as a wrong answer).

Budget = MIPRO's `num_trials` (candidate programs tried by the Bayesian search). Rollouts spent on
top of the trials: the seed prompts once on the training split (to give the dataset summary and the
labeled demos their dialogues and gold calls), bootstrapping (runs on training tasks until
`max_bootstrapped_demos` successes per demo set), one full validation pass of the seed program, a
minibatch per trial and a full validation pass every `minibatch_full_eval_steps` trials. A rollout
already run with the same prompts is reused, not paid twice. The validation split is MIPRO's valset.
"""

from __future__ import annotations

import contextlib
import io
import logging
import re
import warnings
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Callable, Iterable, TypeVar

from apibank_bench.optimize.rollouts import clip, digest, extract_prompt, role_input, role_output
from apibank_bench.scoring.stage import Stage

if TYPE_CHECKING:  # DSPy is imported when the method runs
    import dspy

    from apibank_bench.optimize.context import Context, Rollout

T = TypeVar("T")

#: Trials; DSPy's "light" setting for one role proposes 6 candidates and runs about 10.
DEFAULT_BUDGET = 10
HYPERPARAMETERS: dict[str, tuple[type, Any, str]] = {
    "num_candidates": (int, 6, "MIPRO: instruction candidates and demo sets per role (DSPy's num_candidates)"),
    "max_bootstrapped_demos": (int, 2, "MIPRO: bootstrapped demos per role (DSPy's default 4; 2 keeps prompts small)"),
    "max_labeled_demos": (int, 2, "MIPRO: labeled demos (task, gold call) per role (DSPy's default 4)"),
    "trial_minibatch_size": (int, 35, "MIPRO: validation tasks per trial (DSPy's minibatch_size); trials use the "
                                      "whole validation split when it is not larger"),
    "minibatch_full_eval_steps": (int, 5, "MIPRO: a full validation pass of the best-averaging program every N trials"),
    "view_data_batch_size": (int, 10, "MIPRO: training tasks per dataset-summary call"),
    "program_aware": (bool, True, "MIPRO: describe the program to the instruction proposer"),
    "data_aware": (bool, True, "MIPRO: summarize the training tasks for the instruction proposer"),
    "tip_aware": (bool, True, "MIPRO: add a random prompting tip to each instruction proposal"),
    "fewshot_aware": (bool, True, "MIPRO: show bootstrapped demos to the instruction proposer"),
}

_DEMO_CLIP = 1200  # characters per demo field written into a role prompt


class EvaluationFailed(Exception):
    """A task evaluation failed (endpoint error); MIPRO would count it as a wrong answer."""


class Bridge:
    """What every copy of the DSPy program shares: the context, the rollout memo, the first failure.

    DSPy deep-copies programs and LMs freely; copying this would fork the memo and the context.
    """

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.memo: dict[tuple[tuple[tuple[str, str], ...], str], Rollout] = {}  #: (prompts, task ID) -> rollout
        self.spent = 0
        self.failure: BaseException | None = None

    def __deepcopy__(self, memo: dict[int, Any]) -> Bridge:
        return self

    def __copy__(self) -> Bridge:
        return self

    def run(self, prompts: dict[str, str], task_ids: list[str]) -> list[Rollout]:
        if self.failure is not None:
            raise EvaluationFailed("an earlier evaluation failed") from self.failure
        key = tuple(sorted(prompts.items()))
        new = [t for t in dict.fromkeys(task_ids) if (key, t) not in self.memo]
        if new:
            rollouts = self.guarded(self.ctx.evaluate, prompts, new)  # the context logs the evaluation
            self.spent += len(new)
            for task_id, rollout in zip(new, rollouts):
                self.memo[key, task_id] = rollout
        found = [self.memo[key, t] for t in task_ids]
        for rollout in found:
            if rollout.stage == Stage.ERROR and self.failure is None:
                self.failure = EvaluationFailed(f"task {rollout.task_id}: {rollout.error}")
        if self.failure is not None:
            raise self.failure
        return found


    def guarded(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run `call`, keeping its exception: DSPy catches exceptions and carries on without them."""
        try:
            return call(*args, **kwargs)
        except Exception as exc:
            if self.failure is None:
                self.failure = exc
            raise


def render(predictor: dspy.Predict) -> str:
    """A role prompt from a predictor: its instructions, then its demos as worked examples."""
    text = predictor.signature.instructions.strip()
    demos = [d for d in predictor.demos if d.get("answer")]
    if demos:
        shown = "\n\n".join(f"Example {n}\nINPUT:\n{clip(d.get('dialogue'), _DEMO_CLIP)}\n\nREPLY:\n"
                            f"{clip(d.get('answer'), _DEMO_CLIP)}" for n, d in enumerate(demos, 1))
        text += "\n\nWorked examples (an input this agent saw and a good reply):\n\n" + shown
    return text


def optimize(ctx: Context) -> dict[str, str]:
    """Best role prompts found by DSPy's MIPROv2 in `ctx.budget` trials."""
    from apibank_bench.core.settings import library_environment

    try:
        with library_environment("litellm"):
            import dspy
            from dspy.utils.exceptions import AdapterParseError
    except ImportError as exc:
        raise SystemExit("--method mipro needs DSPy: pip install 'apibank-bench[mipro]'") from exc

    h = {name: ctx.hyper.get(name, default) for name, (_, default, _) in HYPERPARAMETERS.items()}
    bridge = Bridge(ctx)
    roles = list(ctx.roles)
    attr = {role: "role_" + re.sub(r"\W", "_", role) for role in roles}

    class AskLM(dspy.BaseLM):
        """DSPy's prompt model, answered by the optimizer model through ctx.ask (cached, logged)."""

        def __init__(self, shared: Bridge, **kwargs):
            super().__init__(model="apibank-bench/optimizer", cache=False, **kwargs)
            self.shared = shared

        def forward(self, prompt=None, messages=None, **kwargs):
            messages = messages or [{"role": "user", "content": prompt}]
            plain = [{"role": m["role"], "content": _text(m.get("content"))} for m in messages]
            seed = {**self.kwargs, **kwargs}.get("rollout_id")
            reply = self.shared.guarded(self.shared.ctx.ask, plain, purpose="proposal", seed=seed)
            self.shared.ctx.log("proposal", seed=seed, reply=clip(reply, 400))
            message = SimpleNamespace(content=reply, tool_calls=None, reasoning_content=None)
            return SimpleNamespace(choices=[SimpleNamespace(message=message, finish_reason="stop")],
                                   usage={}, model=self.model)

    class NoTaskLM(dspy.BaseLM):
        def __init__(self):
            super().__init__(model="apibank-bench/team", cache=False)

        def forward(self, prompt=None, messages=None, **kwargs):
            raise RuntimeError("the team runs through ctx.evaluate; DSPy must not call a task model")

    class Lenient(dspy.ChatAdapter):
        def parse(self, signature, completion):
            try:
                return super().parse(signature, completion)
            except AdapterParseError:
                if len(signature.output_fields) != 1:
                    raise
                return {next(iter(signature.output_fields)): extract_prompt(completion)}

    class Team(dspy.Module):
        """One predictor per role; forward runs the real team on one training task."""

        def __init__(self, shared: Bridge):
            super().__init__()
            self.shared = shared
            for role in roles:
                signature = dspy.Signature("dialogue -> answer", ctx.seed_prompts[role])
                setattr(self, attr[role], dspy.Predict(signature))

        def prompts(self) -> dict[str, str]:
            return {**ctx.seed_prompts, **{role: render(getattr(self, attr[role])) for role in roles}}

        def forward(self, task_id, dialogue=None):
            rollout = self.shared.run(self.prompts(), [task_id])[0]
            trace = dspy.settings.trace
            if trace is not None:  # bootstrapping: one demo candidate per role
                for role in roles:
                    reply = role_output(rollout, role)
                    if reply:
                        trace.append((getattr(self, attr[role]), {"dialogue": role_input(rollout, role)},
                                      {"answer": reply}))
            return dspy.Prediction(answer=rollout.predicted_call or "", correct=rollout.correct)

    def metric(example: dspy.Example, prediction: dspy.Prediction, trace: Any = None) -> float:
        return float(prediction.correct)

    if ctx.budget <= 0:
        ctx.log("budget", trials=0)
        return dict(ctx.seed_prompts)

    seed_program = Team(bridge)

    # the seed team's runs give each task its dialogue and gold call
    def examples(task_ids: Iterable[str]) -> list[dspy.Example]:
        rollouts = bridge.run(seed_program.prompts(), list(task_ids))
        return [dspy.Example(task_id=r.task_id, dialogue=clip(r.dialogue, _DEMO_CLIP), answer=r.gold_call)
                .with_inputs("task_id") for r in rollouts]

    trainset = examples(ctx.train_ids)
    valset = examples(ctx.validation_ids) if ctx.validation_ids else None
    size = len(valset) if valset else max(1, int(len(trainset) * 0.8))  # DSPy's own split without a valset
    minibatch_size = min(h["trial_minibatch_size"], size)
    optimizer = dspy.MIPROv2(
        metric=metric, prompt_model=AskLM(bridge), task_model=NoTaskLM(), auto=None,
        num_candidates=h["num_candidates"], max_bootstrapped_demos=h["max_bootstrapped_demos"],
        max_labeled_demos=h["max_labeled_demos"], num_threads=1, seed=ctx.rng.randrange(2**31),
        verbose=False, track_stats=True)
    quiet = logging.getLogger("dspy"), logging.getLogger("optuna")
    levels = [log.level for log in quiet]
    chatter = io.StringIO()
    with (dspy.context(adapter=Lenient()), warnings.catch_warnings(), contextlib.redirect_stdout(chatter),
          contextlib.redirect_stderr(chatter)):
        # dspy 3.4 deprecates BaseLM.forward (removed in 3.5; we pin 3.4.1), logs every trial at INFO and
        # draws progress bars; our log (whose stream was bound before this) has all of it.
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"dspy\.")
        warnings.filterwarnings("ignore", message=r".*BaseLM\.forward")
        for log in quiet:
            log.setLevel(logging.ERROR)
        try:
            best = optimizer.compile(
                seed_program, trainset=trainset, valset=valset, num_trials=ctx.budget,
                minibatch=size > minibatch_size, minibatch_size=minibatch_size,
                minibatch_full_eval_steps=h["minibatch_full_eval_steps"],
                view_data_batch_size=h["view_data_batch_size"], program_aware_proposer=h["program_aware"],
                data_aware_proposer=h["data_aware"], tip_aware_proposer=h["tip_aware"],
                fewshot_aware_proposer=h["fewshot_aware"])
        except Exception:
            if bridge.failure is None:
                raise
            best = None
        finally:
            for log, level in zip(quiet, levels):
                log.setLevel(level)
    if bridge.failure is not None:  # DSPy may have swallowed it (a score of 0, a skipped summary)
        raise bridge.failure
    for number, record in sorted(getattr(best, "trial_logs", {}).items()):
        ctx.log("trial", trial=number, **trial_fields(record))
    prompts = best.prompts()
    score = getattr(best, "score", None)
    ctx.log("done", spent=bridge.spent, trials=ctx.budget, best=None if score is None else score / 100,
            prompts={role: digest(p) for role, p in prompts.items()})
    return prompts


def trial_fields(record: dict[str, Any]) -> dict[str, Any]:
    """A DSPy trial log as the optimizer's event log keeps it: its plain values, with its scores
    (percentages in DSPy) as fractions. Only numbers are scaled: a `*score` field may hold text."""
    fields = {k: v for k, v in record.items() if isinstance(v, (int, float, str)) and not k.endswith("_path")}
    return {k: v / 100 if k.endswith("score") and isinstance(v, (int, float)) and not isinstance(v, bool) else v
            for k, v in fields.items()}


def _text(content: Any) -> str:
    """Message content as plain text (DSPy may send a list of content parts)."""
    if isinstance(content, list):
        return "\n".join(part.get("text", "") if isinstance(part, dict) else str(part) for part in content)
    return "" if content is None else str(content)
