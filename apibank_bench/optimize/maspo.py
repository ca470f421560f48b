"""MASPO: joint prompt optimization for multi-agent teams (Wang et al., arXiv 2605.06623, ICML 2026).

Our own implementation. Sources: the paper's abstract (its full text was not available to us), the
method as issue 12 describes it, and the authors' released code (github.com/wangzx1219/MASPO, read
as a specification, nothing taken) for the defaults of its MASPO configuration: 3 coordinate-ascent
rounds x 3 steps per agent, beam 2, 2 proposals per parent, minibatches of 10 from 50 training
problems, lookahead weights 4:4:2, centered win rates, 3 misalignment cases kept.

* Agents are optimized one at a time in the topology's order (`ctx.roles`), `rounds` (D) times,
  `steps` (T) beam-search steps per agent per visit; the other agents keep their current best prompt.
* One step: every beam node (a prompt for this agent) is run on a fresh minibatch; `proposals` (Ksub)
  new prompts are written from it by the optimizer model (`ctx.ask`, purpose "proposal"), each from a
  different slice of the minibatch plus the agent's mined hard negatives; each proposal is run on the
  same minibatch and scored against its parent by the joint evaluation; a proposal that beats its
  parent (score > 0) becomes a node with the parent's cumulative score plus its own; parents stay
  in the running, and the `beam_width` (K) best distinct prompts survive.
* Joint evaluation, per task, candidate vs parent: (a) local validity -- a judge compares the agent's
  own outputs; (b) lookahead potential -- a judge compares the outputs of the agents that read this
  one (the next round of turns); (c) global alignment -- the team's final answers. Each comparison is
  a pairwise judge call with the candidate's position (A/B) drawn from `ctx.rng`; identical outputs
  tie without a call. A role whose turns nobody reads (the last stage, a debater) is judged on global
  alignment only, as the authors' code does. Score = weighted win rate - 0.5 (ties count one half).
* Misalignment mining: tasks where a candidate wins locally but loses on lookahead or globally are
  kept (both-lost first) and shown to this agent's next proposals as hard negatives.
* Beam refresh: when an agent is revisited, its peers have moved on, so its beam's scores are stale;
  every node is re-scored against the agent's current best prompt on fresh samples (centered win
  rate) and the top node becomes the agent's best.

Beyond the paper: API-Bank training tasks have a gold call and an executable scorer, so global
alignment defaults to the execution score (`global_alignment=execution`: a win when the candidate
team is correct and the parent team is not) -- exact and free of judge noise, where a judge of two
API calls is a guess. `global_alignment=judge` is the label-free setting of the paper. In execution
mode the proposals also see the scorer's verdict (stage, predicted and gold call) for training tasks;
in judge mode they see only the agents' inputs and outputs, as in the paper.

The optimizer model samples with its client's settings (`ctx.ask` takes no temperature; the authors
sample proposals at 0.7 and judge at 0); each proposal gets its own seed from `ctx.rng`.

Budget = rollouts: one training task run by the whole team with one candidate prompt set. A rollout
already run (same prompts, same task) is reused, not paid twice. Optimization stops before the first
evaluation that would exceed the budget; the best prompts so far are returned.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from apibank_bench.optimize.rollouts import clip, digest, extract_prompt, reader_output, role_input, role_output, verdict
from apibank_bench.scoring.stage import Stage

if TYPE_CHECKING:
    from apibank_bench.optimize.context import Context, Rollout

# The budget is methods.FALLBACK_BUDGET (600): enough for the full default schedule on a one-role topology
# (9 steps of <= 60 rollouts, 2 refreshes).
HYPERPARAMETERS: dict[str, tuple[type, Any, str]] = {
    "rounds": (int, 3, "MASPO: coordinate-ascent rounds D (passes over the agents in topology order)"),
    "steps": (int, 3, "MASPO: beam-search steps T per agent per round"),
    "beam_width": (int, 2, "MASPO: beam size K per agent"),
    "proposals": (int, 2, "MASPO: Ksub, proposals written from each beam node per step"),
    "minibatch": (int, 10, "MASPO: training tasks per step (and per beam refresh)"),
    "pool": (int, 50, "MASPO: training tasks the minibatches are drawn from"),
    "local_weight": (float, 0.4, "MASPO: weight of local validity (the agent's own output)"),
    "lookahead_weight": (float, 0.4, "MASPO: weight of lookahead potential (its readers' outputs)"),
    "global_weight": (float, 0.2, "MASPO: weight of global alignment (the team's final answer)"),
    "lookahead": (bool, True, "MASPO: score lookahead potential (off: local and global only)"),
    "beam_refresh": (bool, True, "MASPO: re-score an agent's beam against its current best when revisited"),
    "hard_negatives": (int, 3, "MASPO: misalignment cases kept per agent and shown to its next proposals"),
    "global_alignment": (str, "execution", "MASPO: execution (the gold call's score) or judge (pairwise judge)"),
}

_VERDICT = re.compile(r"<verdict>\s*([AB])\s*</verdict>", re.I)
_QUESTIONS = {
    "local": "the output of the agent '{role}': which one does that agent's job better for this dialogue "
             "(correct reading of the dialogue, the right API and arguments, useful for its team)?",
    "lookahead": "the outputs of the agents that read the work of '{role}': which set is closer to the "
                 "correct next API call?",
    "global": "the team's final answer: which one is the correct next API call for this dialogue?",
}


class BudgetSpent(Exception):
    """The next evaluation would exceed the rollout budget."""


@dataclass
class Node:
    prompt: str
    score: float = 0.0  #: cumulative centered win rate along its path (reset by a beam refresh)


class HardNegative(TypedDict):
    """A misalignment case: a candidate's output judged better locally while the team did worse after it."""

    task_id: str
    priority: int  #: 0: both the readers and the final answer did worse, 1: the readers only, 2: the answer only
    why: str
    input: str  #: what the agent saw
    candidate_output: str
    candidate_downstream: str  #: what the readers and the team answered after the candidate's output
    parent_downstream: str  #: ... after the parent's


@dataclass
class AgentState:
    beam: list[Node]
    best: Node
    hard_negatives: list[HardNegative] = field(default_factory=list)
    visited: bool = False


@dataclass
class Joint:
    """The joint evaluation of one candidate against its parent on one minibatch."""

    score: float
    rates: dict[str, float]
    judged: int
    misaligned: list[HardNegative]


class Maspo:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.h = {name: ctx.hyper.get(name, default) for name, (_, default, _) in HYPERPARAMETERS.items()}
        if self.h["global_alignment"] not in ("execution", "judge"):
            raise ValueError(f"global_alignment must be execution or judge, not {self.h['global_alignment']!r}")
        self.rng = ctx.rng
        self.best = dict(ctx.seed_prompts)
        self.states = {role: AgentState([Node(self.best[role])], Node(self.best[role])) for role in ctx.roles}
        self.pool = self.rng.sample(list(ctx.train_ids), min(self.h["pool"], len(ctx.train_ids)))
        self.spent = 0
        self.memo: dict[tuple[tuple[tuple[str, str], ...], str], Rollout] = {}  #: (prompts, task ID) -> rollout
        self.where: dict[str, Any] = {}

    # -- rollouts under the budget ---------------------------------------------------------

    def run(self, prompts: dict[str, str], task_ids: list[str]) -> list[Rollout]:
        key = tuple(sorted(prompts.items()))
        new = [t for t in dict.fromkeys(task_ids) if (key, t) not in self.memo]
        if self.spent + len(new) > self.ctx.budget:
            raise BudgetSpent
        if new:
            for task_id, rollout in zip(new, self.ctx.evaluate(prompts, new)):
                self.memo[key, task_id] = rollout
            self.spent += len(new)
        return [self.memo[key, t] for t in task_ids]

    def with_prompt(self, role: str, prompt: str) -> dict[str, str]:
        return {**self.best, role: prompt}

    def sample(self) -> list[str]:
        return self.rng.sample(self.pool, min(self.h["minibatch"], len(self.pool)))

    # -- the search ------------------------------------------------------------------------

    def optimize(self) -> dict[str, str]:
        try:
            for rnd in range(self.h["rounds"]):
                for role in self.ctx.roles:
                    state = self.states[role]
                    if self.h["beam_refresh"] and state.visited:
                        self.refresh(role, rnd)
                    state.visited = True
                    for step in range(self.h["steps"]):
                        self.step(role, rnd, step)
        except BudgetSpent:
            self.ctx.log("budget", spent=self.spent, budget=self.ctx.budget, **self.where)
        self.ctx.log("done", spent=self.spent, budget=self.ctx.budget,
                     prompts={role: digest(p) for role, p in self.best.items()})
        return dict(self.best)

    def step(self, role: str, rnd: int, step: int) -> None:
        self.where = {"role": role, "round": rnd, "step": step}
        state = self.states[role]
        tasks = self.sample()
        children: list[Node] = []
        mined: list[HardNegative] = []
        for parent in state.beam:
            base = self.run(self.with_prompt(role, parent.prompt), tasks)
            children.append(parent)
            for candidate in self.propose(role, parent.prompt, base, state.hard_negatives):
                joint = self.judge(role, base, self.run(self.with_prompt(role, candidate), tasks))
                mined.extend(joint.misaligned)
                self.ctx.log("joint_evaluation", **self.where, parent=digest(parent.prompt),
                             candidate=digest(candidate), score=joint.score, rates=joint.rates, judged=joint.judged,
                             misaligned=len(joint.misaligned), tasks=tasks, spent=self.spent)
                if joint.score > 0:
                    children.append(Node(candidate, parent.score + joint.score))
        state.beam = top(children, self.h["beam_width"])
        if state.beam[0].score > state.best.score + 1e-9:
            state.best = state.beam[0]
            self.best[role] = state.best.prompt
        if mined:
            mined.sort(key=lambda case: case["priority"])
            state.hard_negatives = mined[: self.h["hard_negatives"]]
        self.ctx.log("beam", **self.where, beam=[{"prompt": digest(n.prompt), "score": n.score} for n in state.beam],
                     best_prompt=digest(state.best.prompt), best_score=state.best.score,
                     hard_negatives=[c["task_id"] for c in state.hard_negatives], spent=self.spent)

    def refresh(self, role: str, rnd: int) -> None:
        """Re-anchor the beam's stale scores: each node against the agent's current best, fresh tasks."""
        self.where = {"role": role, "round": rnd, "step": "refresh"}
        state = self.states[role]
        tasks = self.sample()
        base = self.run(dict(self.best), tasks)
        before = [{"prompt": digest(n.prompt), "score": n.score} for n in state.beam]
        fresh = []
        for node in state.beam:
            score = 0.0
            if node.prompt != self.best[role]:
                score = self.judge(role, base, self.run(self.with_prompt(role, node.prompt), tasks)).score
            fresh.append(Node(node.prompt, score))
        state.beam = top(fresh, self.h["beam_width"])
        state.best = state.beam[0]
        self.best[role] = state.best.prompt
        self.ctx.log("refresh", **self.where, before=before,
                     after=[{"prompt": digest(n.prompt), "score": n.score} for n in state.beam],
                     best_prompt=digest(state.best.prompt), tasks=tasks, spent=self.spent)

    # -- proposals ---------------------------------------------------------------------------

    def propose(self, role: str, parent: str, base: list[Rollout], hard_negatives: list[HardNegative]) -> list[str]:
        """Ksub proposals, each from its own slice of the minibatch; new and distinct ones only."""
        k = max(1, self.h["proposals"])
        found: list[str] = []
        for i in range(k):
            shown = base[i::k] or base
            reply = self.ctx.ask(self.proposal_messages(role, parent, shown, hard_negatives),
                                 purpose="proposal", seed=self.rng.randrange(2**31))
            candidate = extract_prompt(reply)
            fresh = bool(candidate) and candidate != parent and candidate not in found
            self.ctx.log("proposal", **self.where, parent=digest(parent),
                         candidate=digest(candidate) if fresh else None, prompt=candidate,
                         shown=[r.task_id for r in shown], hard_negatives=[c["task_id"] for c in hard_negatives])
            if fresh:
                found.append(candidate)
        return found

    def proposal_messages(self, role: str, parent: str, shown: list[Rollout],
                          hard_negatives: list[HardNegative]) -> list[dict]:
        labelled = self.h["global_alignment"] == "execution"
        team = " -> ".join(self.ctx.roles)
        samples = []
        for n, r in enumerate(shown, 1):
            text = (f"### Example {n}\nINPUT THE AGENT SAW:\n{clip(role_input(r, role))}\n\n"
                    f"AGENT OUTPUT:\n{clip(role_output(r, role))}\n\nTEAM FINAL ANSWER:\n{clip(r.answer, 400)}")
            if labelled:
                text += "\n" + verdict(r)
            samples.append(text)
        negatives = ""
        if hard_negatives:
            cases = "\n\n".join(
                f"### Hard negative {n} (task {c['task_id']})\nINPUT:\n{clip(c['input'], 600)}\n\n"
                f"A CANDIDATE'S OUTPUT (judged better locally):\n{clip(c['candidate_output'], 600)}\n\n"
                f"WHAT WENT WRONG DOWNSTREAM: {c['why']}\nDOWNSTREAM WITH THAT CANDIDATE:\n"
                f"{clip(c['candidate_downstream'], 600)}\n"
                f"DOWNSTREAM WITH THE PARENT:\n{clip(c['parent_downstream'], 600)}"
                for n, c in enumerate(hard_negatives, 1))
            negatives = ("\n\n## Misalignment cases (hard negatives)\nIn these cases an earlier candidate prompt "
                         "made this agent's own output look better, yet the agents after it or the team's "
                         "final answer did worse. Revise the prompt so its outputs also serve them.\n\n" + cases)
        system = ("You optimize the system prompt of one agent in a team of LLM agents that predicts the next "
                  "API call of an API-Bank dialogue. Keep the agent's role and the inputs it receives; change "
                  "how it reasons and what it reports so the team's final API call is correct. Do not add an "
                  "output format section: a fixed output contract is appended to every prompt.")
        user = (f"Team (in order): {team}\nAgent to improve: {role}\n\n## Current prompt\n{parent}\n\n"
                f"## How the team did with it\n" + "\n\n".join(samples) + negatives +
                "\n\nWrite the complete improved prompt for this agent between <prompt> and </prompt>.")
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    # -- joint evaluation ----------------------------------------------------------------------

    def judge(self, role: str, base: list[Rollout], cand: list[Rollout]) -> Joint:
        use_lookahead = bool(self.h["lookahead"])
        weights = {"local": self.h["local_weight"], "global": self.h["global_weight"]}
        if use_lookahead:
            weights["lookahead"] = self.h["lookahead_weight"]
        # Per task, the comparisons it needs: (kind, candidate text, parent text).
        pairs = []
        for b, c in zip(base, cand):
            if Stage.ERROR in (b.stage, c.stage):
                continue  # an endpoint failure says nothing about either prompt
            needed = []
            if reader_output(b, role):  # nobody reads a terminal role: global alignment only
                needed.append(("local", role_output(c, role), role_output(b, role)))
                if use_lookahead:
                    needed.append(("lookahead", reader_output(c, role), reader_output(b, role)))
            if self.h["global_alignment"] == "judge":
                needed.append(("global", c.answer or "", b.answer or ""))
            pairs.append((b, c, needed))
        verdicts = self.compare_all(role, [(b, needed) for b, _, needed in pairs])
        outcomes: dict[str, list[float]] = {name: [] for name in weights}
        misaligned = []
        for (b, c, _), result in zip(pairs, verdicts):
            if self.h["global_alignment"] == "execution":
                result["global"] = 0.5 if c.correct == b.correct else float(c.correct)
            for name, value in result.items():
                outcomes[name].append(value)
            case = self.misalignment(role, result, b, c)
            if case:
                misaligned.append(case)
        rates = {name: sum(v) / len(v) for name, v in outcomes.items() if v}
        total = sum(weights[name] for name in rates)
        score = (sum(weights[name] * rate for name, rate in rates.items()) / total - 0.5) if total else 0.0
        judged = sum(1 for _, _, needed in pairs for _, x, y in needed if x.strip() != y.strip())
        return Joint(score, rates, judged, misaligned)

    def misalignment(self, role: str, result: dict[str, float], b: Rollout, c: Rollout) -> HardNegative | None:
        if result.get("local") != 1.0:
            return None
        lost_next, lost_global = result.get("lookahead") == 0.0, result.get("global") == 0.0
        if not (lost_next or lost_global):
            return None
        why = " and ".join(w for w, lost in (("the agents reading it did worse", lost_next),
                                              ("the team's final answer did worse", lost_global)) if lost)
        labelled = self.h["global_alignment"] == "execution"
        downstream = lambda r: (reader_output(r, role) + "\nFINAL: " + (r.answer or "")  # noqa: E731
                                + ("\n" + verdict(r) if labelled else ""))
        return {"task_id": b.task_id, "priority": 0 if lost_next and lost_global else (1 if lost_next else 2),
                "why": why, "input": role_input(c, role), "candidate_output": role_output(c, role),
                "candidate_downstream": downstream(c), "parent_downstream": downstream(b)}

    def compare_all(self, role: str, tasks: list[tuple[Rollout, list[tuple[str, str, str]]]]) -> list[dict[str, float]]:
        """Each task's comparisons: 1 if the judge prefers the candidate, 0 the parent, 0.5 a tie.

        Identical outputs tie without a call. The candidate's position is drawn from ctx.rng in task
        order before any call is made, so the judge calls can run concurrently and stay reproducible.
        """
        results: list[dict[str, float]] = [{} for _ in tasks]
        jobs = []
        for n, (b, needed) in enumerate(tasks):
            for kind, cand, parent in needed:
                if cand.strip() == parent.strip():
                    results[n][kind] = 0.5
                else:
                    cand_first = self.rng.random() < 0.5
                    jobs.append((n, kind, judge_messages(role, kind, b.dialogue, cand, parent, cand_first),
                                 cand_first))
        if jobs:
            with ThreadPoolExecutor(max_workers=min(len(jobs), getattr(self.ctx, "workers", 8))) as pool:
                replies = list(pool.map(lambda job: self.ctx.ask(job[2], purpose="judge"), jobs))
            for (n, kind, _, cand_first), reply in zip(jobs, replies):
                found = _VERDICT.search(reply) or re.fullmatch(r"\W*([AB])\W*", reply.strip())
                if not found:
                    self.ctx.log("judge_unparsed", **self.where, kind=kind, reply=clip(reply, 200))
                results[n][kind] = 0.5 if not found else float((found.group(1).upper() == "A") == cand_first)
        return results


def judge_messages(role: str, kind: str, dialogue: str, cand: str, parent: str, cand_first: bool) -> list[dict]:
    """A pairwise judge request; the candidate is Output A iff `cand_first`."""
    a, b = (cand, parent) if cand_first else (parent, cand)
    return [
        {"role": "system", "content": "You are a strict judge comparing two outputs produced for the same "
                                      "API-Bank dialogue. Judge substance, not length or style."},
        {"role": "user", "content": f"## Dialogue\n{clip(dialogue, 2500)}\n\nCompare "
                                    f"{_QUESTIONS[kind].format(role=role)}\n\n## Output A\n{clip(a)}\n\n"
                                    f"## Output B\n{clip(b)}\n\n"
                                    "Answer with <verdict>A</verdict> or <verdict>B</verdict>."},
    ]


def top(nodes: list[Node], k: int) -> list[Node]:
    """The k best distinct prompts by score (stable: earlier nodes win ties)."""
    best: dict[str, Node] = {}
    for node in nodes:
        if node.prompt not in best or node.score > best[node.prompt].score:
            best[node.prompt] = node
    return sorted(best.values(), key=lambda n: -n.score)[: max(1, k)]


def optimize(ctx: Context) -> dict[str, str]:
    """Best role prompts found by MASPO within `ctx.budget` rollouts."""
    return Maspo(ctx).optimize()
