"""MIPROv2 through DSPy against a fake optimizer Context: a two-role team that is correct iff every
role prompt carries a marker phrase, and an optimizer model whose replies offer the marker."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from apibank_bench.optimize import mipro  # first: it keeps litellm from fetching its price list
from apibank_bench.optimize.context import Rollout

import dspy  # noqa: E402  (the optional [mipro] extra)

MARKER = "CHECK THE API SCHEMA"


@dataclass
class FakeContext:
    budget: int = 6
    seed: int = 0
    hyper: dict = field(default_factory=lambda: {"num_candidates": 4})
    marked_seeds: bool = False
    failing_task: str | None = None
    failing_ask: int | None = None  #: the optimizer model's endpoint fails on this call (1-based)
    topology: str = "sequential"
    roles: list = field(default_factory=lambda: ["planner", "caller"])

    def __post_init__(self):
        lead = f"{MARKER}: " if self.marked_seeds else ""
        self.seed_prompts = {"planner": lead + "Plan the call.", "caller": lead + "Make the call."}
        self.train_ids = [f"t{i}" for i in range(8)]
        self.validation_ids = [f"v{i}" for i in range(4)]
        self.rng = random.Random(self.seed)
        self.evaluated: list[tuple[dict, list[str]]] = []
        self.asked: list[tuple[str, list[dict], int | None]] = []
        self.events: list[tuple[str, dict]] = []

    def evaluate(self, prompts, task_ids):
        self.evaluated.append((dict(prompts), list(task_ids)))
        correct = all(MARKER in p for p in prompts.values())
        out = []
        for t in task_ids:
            plan, call = f"plan for {t}", "Gold()" if correct else "Wrong()"
            failed = t == self.failing_task
            out.append(Rollout(
                t, correct and not failed, "error" if failed else ("score" if correct else "api_name"),
                "timeout" if failed else None, call, "Gold()", call,
                [{"role": "planner", "index": 0, "round": 0, "answer": plan,
                  "messages": [{"role": "user", "content": f"dialogue {t}"}]},
                 {"role": "caller", "index": 1, "round": 1, "answer": call,
                  "messages": [{"role": "user", "content": f"dialogue {t} + {plan}"}]}],
                f"dialogue {t}"))
        return out

    def ask(self, messages, *, purpose, seed=None):
        self.asked.append((purpose, messages, seed))
        if len(self.asked) == self.failing_ask:
            raise RuntimeError("optimizer endpoint down")
        return f"Always {MARKER} before calling (variant {seed})."

    def log(self, event, **fields):
        self.events.append((event, fields))


def trials(ctx):
    return [f for e, f in ctx.events if e == "trial"]


def test_finds_the_marker_within_the_trial_budget_without_any_litellm_call(monkeypatch):
    import litellm

    calls = []
    monkeypatch.setattr(litellm, "completion", lambda *a, **k: calls.append(a) or 1 / 0)
    ctx = FakeContext(budget=6)
    best = mipro.optimize(ctx)
    assert all(MARKER in best[role] for role in ctx.roles)
    assert not calls
    assert {p for p, _, _ in ctx.asked} == {"proposal"}
    # Default program + one full validation pass per trial (the split is smaller than a minibatch).
    assert len(trials(ctx)) == ctx.budget + 1
    validation_runs = sum(len(ids) for _, ids in ctx.evaluated if ids[0].startswith("v"))
    assert validation_runs <= (ctx.budget + 1) * len(ctx.validation_ids)
    done = [f for e, f in ctx.events if e == "done"][0]
    assert done["spent"] == sum(len(ids) for _, ids in ctx.evaluated)


def test_the_same_seed_gives_the_same_prompts_and_requests():
    one, two = FakeContext(seed=5), FakeContext(seed=5)
    assert mipro.optimize(one) == mipro.optimize(two)
    assert one.asked == two.asked and one.evaluated == two.evaluated


def test_bootstrapped_demos_from_team_successes_are_written_into_role_prompts():
    ctx = FakeContext(marked_seeds=True, hyper={"num_candidates": 4, "max_labeled_demos": 0})
    mipro.optimize(ctx)
    with_demos = [p for p, _ in ctx.evaluated if "Worked examples" in p["caller"]]
    assert with_demos
    # A caller demo is the caller's own input and reply from a successful team run.
    assert "dialogue t" in with_demos[0]["caller"] and "Gold()" in with_demos[0]["caller"]


def test_render_appends_the_demos_to_the_instructions():
    predictor = dspy.Predict(dspy.Signature("dialogue -> answer", "Be exact."))
    predictor.demos = [dspy.Example(dialogue="User wants the time", answer="GetTime()")]
    text = mipro.render(predictor)
    assert text.startswith("Be exact.") and "User wants the time" in text and "GetTime()" in text


def test_an_endpoint_failure_is_an_error_not_a_wrong_answer():
    ctx = FakeContext(failing_task="v2")
    with pytest.raises(mipro.EvaluationFailed, match="v2"):
        mipro.optimize(ctx)


def test_an_optimizer_model_failure_aborts_instead_of_degrading_the_proposer():
    # DSPy itself would drop the dataset summary and carry on; a failed request is an error.
    ctx = FakeContext(failing_ask=1)
    with pytest.raises(RuntimeError, match="optimizer endpoint down"):
        mipro.optimize(ctx)


def test_trial_scores_are_logged_as_fractions():
    ctx = FakeContext(budget=3)
    mipro.optimize(ctx)
    scores = [f["full_eval_score"] for f in trials(ctx) if "full_eval_score" in f]
    assert scores[0] == 0.0 and max(scores) == 1.0
    done = [f for e, f in ctx.events if e == "done"][0]
    assert done["best"] == max(scores)


def test_trial_fields_scale_numeric_scores_only():
    # DSPy's trial logs may carry text under a `*score` key; dividing it crashed the log.
    fields = mipro.trial_fields({"full_eval_score": 75, "mb_score": 12.5, "score": "n/a", "flag_score": True,
                                 "program_path": "/tmp/p", "candidate": [1, 2], "note": "x"})
    assert fields == {"full_eval_score": 0.75, "mb_score": 0.125, "score": "n/a", "flag_score": True, "note": "x"}
