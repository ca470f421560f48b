"""MASPO against a fake optimizer Context: a two-agent pipeline whose team is correct iff every role
prompt carries a marker phrase, a proposer that offers prompts with the marker, and a judge that
prefers outputs showing the marker (or, in the misalignment test, a decoy)."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

import pytest

from apibank_bench.optimize import maspo
from apibank_bench.optimize.context import Rollout

MARKER = "CHECK THE API SCHEMA"
DECOY = "JUST GUESS"


@dataclass
class FakeContext:
    budget: int = 10_000
    seed: int = 0
    hyper: dict = field(default_factory=dict)
    offer: str = MARKER  #: what proposals for the planner contain
    topology: str = "sequential"
    roles: list = field(default_factory=lambda: ["planner", "caller"])

    def __post_init__(self):
        self.seed_prompts = {"planner": "Plan the call.", "caller": "Make the call."}
        self.train_ids = [f"t{i}" for i in range(60)]
        self.validation_ids = []
        self.rng = random.Random(self.seed)
        self.evaluated: list[list[str]] = []
        self.asked: list[tuple[str, list[dict]]] = []
        self.events: list[tuple[str, dict]] = []

    def evaluate(self, prompts, task_ids):
        self.evaluated.append(list(task_ids))
        plan = "plan: " + prompts["planner"]
        call = "call: " + prompts["caller"] + " | after " + plan
        correct = all(MARKER in p for p in prompts.values()) and DECOY not in prompts["planner"]
        return [Rollout(t, correct, "score" if correct else "api_name", None, "X()", "Gold()", call,
                            [{"role": "planner", "index": 0, "round": 0, "answer": plan,
                              "messages": [{"role": "user", "content": f"dialogue {t}"}]},
                             {"role": "caller", "index": 1, "round": 1, "answer": call,
                              "messages": [{"role": "user", "content": f"dialogue {t} + plan"}]}],
                            f"dialogue {t}") for t in task_ids]

    def ask(self, messages, *, purpose, seed=None):
        self.asked.append((purpose, messages))
        text = messages[-1]["content"]
        if purpose == "proposal":
            role = re.search(r"Agent to improve: (\w+)", text).group(1)
            offer = self.offer if role == "planner" else MARKER
            return f"Here it is.\n<prompt>{offer}: {role} prompt #{seed % 997}</prompt>"
        a, b = text.split("## Output A", 1)[1].split("## Output B", 1)
        good = lambda s: MARKER in s or (self.offer in s)  # noqa: E731
        return "<verdict>B</verdict>" if good(b) and not good(a) else "<verdict>A</verdict>"

    def log(self, event, **fields):
        self.events.append((event, fields))


def kinds(ctx):
    return {event for event, _ in ctx.events}


def test_finds_the_marker_in_every_role_and_logs_each_event_kind():
    ctx = FakeContext()
    best = maspo.optimize(ctx)
    assert all(MARKER in best[role] for role in ctx.roles)
    assert {"proposal", "joint_evaluation", "beam", "refresh", "done"} <= kinds(ctx)
    scores = [f["score"] for e, f in ctx.events if e == "joint_evaluation"]
    assert max(scores) > 0


@pytest.mark.parametrize("budget", [0, 25, 137])
def test_the_rollout_budget_is_never_exceeded(budget):
    ctx = FakeContext(budget=budget)
    maspo.optimize(ctx)
    assert sum(map(len, ctx.evaluated)) <= budget
    assert "budget" in kinds(ctx)
    done = [f for e, f in ctx.events if e == "done"][0]
    assert done["spent"] == sum(map(len, ctx.evaluated))


def test_the_same_seed_gives_the_same_prompts_and_requests():
    one, two, other = FakeContext(seed=3), FakeContext(seed=3), FakeContext(seed=4)
    assert maspo.optimize(one) == maspo.optimize(two)
    assert one.evaluated == two.evaluated
    # Proposals are asked in order; a step's judge calls run concurrently, so compare them as a multiset.
    assert [a for a in one.asked if a[0] == "proposal"] == [a for a in two.asked if a[0] == "proposal"]
    assert sorted(map(repr, one.asked)) == sorted(map(repr, two.asked))
    maspo.optimize(other)
    assert other.asked != one.asked


def test_the_candidate_takes_both_judge_positions():
    ctx = FakeContext()
    maspo.optimize(ctx)
    positions = []
    for purpose, messages in ctx.asked:
        if purpose != "judge":
            continue
        a, b = messages[-1]["content"].split("## Output A", 1)[1].split("## Output B", 1)
        if (MARKER in a) != (MARKER in b):
            positions.append("A" if MARKER in a else "B")
    assert {"A", "B"} <= set(positions)


def test_local_wins_that_lose_globally_become_hard_negatives_in_later_proposals():
    # The caller already carries the marker, so the seed team is correct; the planner's proposals
    # carry a decoy the judge likes locally but that breaks the team's answer.
    ctx = FakeContext(offer=DECOY, roles=["planner", "caller"])
    ctx.seed_prompts["caller"] = f"{MARKER}: make the call."
    ctx.seed_prompts["planner"] = f"{MARKER}: plan the call."
    maspo.optimize(ctx)
    evaluations = [f for e, f in ctx.events if e == "joint_evaluation" and f["role"] == "planner"]
    assert any(f["misaligned"] for f in evaluations)
    proposals = [m[-1]["content"] for p, m in ctx.asked
                 if p == "proposal" and "Agent to improve: planner" in m[-1]["content"]]
    assert "Hard negative" not in proposals[0]
    later = [text for text in proposals if "Misalignment cases (hard negatives)" in text]
    assert later and "the team's final answer did worse" in later[0]


def test_judge_mode_compares_final_answers_with_the_judge():
    ctx = FakeContext(hyper={"global_alignment": "judge"})
    best = maspo.optimize(ctx)
    assert all(MARKER in best[role] for role in ctx.roles)
    judged = [m[-1]["content"] for p, m in ctx.asked if p == "judge"]
    assert any("the team's final answer" in text for text in judged)
    # Label-free, as in the paper: proposals never see the gold call.
    assert not any("gold" in m[-1]["content"] for p, m in ctx.asked if p == "proposal")


def test_an_unknown_global_alignment_is_refused():
    with pytest.raises(ValueError, match="global_alignment"):
        maspo.optimize(FakeContext(hyper={"global_alignment": "vibes"}))
