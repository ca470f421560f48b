"""Every agent of a team scored: who had the right call, and what the team's aggregation did with it.

A team's row scores the team's final call. Here each agent turn that ends in a call (every turn
but a free-text one, such as a delegation) is scored too, with the same scorer, from the turns a
trace records (role, round, index, answer): nothing depends on how a topology wires its agents.
An agent's *final* call is its last scored turn (its last debate round; a worker's only turn).

Per row: `agents_correct` (per scored turn: role, round, index, correct, stage), `oracle` (some
agent's final call is correct) and, for voting teams, `vote_margin` (votes for the winning call
minus votes for the runner-up). Per run (`team_summary`): team and oracle accuracy, accuracy per
role and per round, "lost by aggregation" (the oracle is right, the team wrong) and "fixed by
aggregation" (fewer than half of the agents' final calls right, the team right).
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any, Callable

from apibank_bench.runs.row import ResultRow
from apibank_bench.scoring.stage import Stage

if TYPE_CHECKING:
    from apibank_bench.agents.chat_agent import AgentTurn
    from apibank_bench.scoring.prediction import Prediction
    from apibank_bench.scoring.scorer import Score


def scored_turns(turns: list[AgentTurn], score: Callable[[Prediction], Score]) -> list[dict]:
    """`agents_correct`: one entry per turn that ends in a call, in the trace's order.

    `score(prediction)` is the run's scorer on this task, given the call the turn submits (parsed
    once: `AgentTurn.submitted`); the same call text is scored once. A turn with a model error has
    no answer to score and is left out (such a row is an error row anyway).
    """
    verdicts: dict[str | None, Score] = {}
    scored = []
    for turn in turns:
        if not turn.emits_call or turn.error:
            continue
        prediction = turn.submitted()
        if prediction.text not in verdicts:
            verdicts[prediction.text] = score(prediction)
        verdict = verdicts[prediction.text]
        entry: dict[str, Any] = {"role": turn.role, "round": turn.round, "index": turn.index,
                                 "correct": bool(verdict.correct), "stage": Stage(verdict.stage).value}  # plain JSON
        if verdict.reason is not None:
            entry["reason"] = str(verdict.reason)
        if turn.model:  # the model that answered (a model per role: --model-role)
            entry["model"] = turn.model
        scored.append(entry)
    return scored


def final_calls(agents_correct: list[dict]) -> list[dict]:
    """Each agent's last scored turn (an agent is its role and its place in the team)."""
    last: dict[tuple, dict] = {}
    for turn in agents_correct:
        key = (turn["role"], turn["index"])
        if key not in last or turn["round"] >= last[key]["round"]:
            last[key] = turn
    return list(last.values())


def vote_margin(vote: dict | None) -> int | None:
    """Votes for the winning call minus votes for the runner-up (None: not a vote)."""
    if not vote or vote.get("winner") is None:
        return None
    counts = sorted((count for _, count in vote.get("tally") or []), reverse=True)
    return counts[0] - (counts[1] if len(counts) > 1 else 0)


def team_fields(turns: list[AgentTurn], vote: dict | None, score: Callable[[Prediction], Score]) -> dict:
    """The fields a team's results row adds: agents_correct, oracle and (voting teams) vote_margin."""
    agents_correct = scored_turns(turns, score)
    fields = {"agents_correct": agents_correct,
              "oracle": any(turn["correct"] for turn in final_calls(agents_correct))}
    if vote is not None:
        fields["vote_margin"] = vote_margin(vote)
    return fields


def _rate(correct: int, total: int) -> dict:
    return {"turns": total, "correct": correct, "accuracy": correct / total if total else None}


def team_summary(rows: list[ResultRow]) -> dict | None:
    """The team part of summary.json over the rows that scored their agents (None: not a team run).

    Error rows carry no agent scores and are left out here (they are counted in `errors`).
    """
    team = [(row, row.agents_correct) for row in rows if row.agents_correct is not None and not row.is_error]
    if not team:
        return None
    n = len(team)
    by_role: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    by_round: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    by_model: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    lost = fixed = oracle = correct = 0
    margins = []
    for row, agents_correct in team:
        for turn in agents_correct:
            for table, key in ((by_role, str(turn["role"])), (by_round, str(turn["round"])),
                               (by_model, str(turn.get("model") or "?"))):
                table[key][0] += turn["correct"]
                table[key][1] += 1
        finals = final_calls(agents_correct)
        right = sum(turn["correct"] for turn in finals)
        oracle += bool(row.oracle)
        correct += bool(row.correct)
        lost += bool(row.oracle) and not row.correct
        fixed += bool(finals) and right < len(finals) / 2 and bool(row.correct)
        if row.vote_margin is not None:
            margins.append(row.vote_margin)
    summary = {
        "instances": n, "team_accuracy": correct / n, "oracle_accuracy": oracle / n,
        "lost_by_aggregation": lost, "fixed_by_aggregation": fixed,
        "by_role": {role: _rate(*by_role[role]) for role in sorted(by_role)},
        "by_round": {key: _rate(*by_round[key]) for key in sorted(by_round, key=int)},
        "by_model": {model: _rate(*by_model[model]) for model in sorted(by_model)},
    }
    if margins:
        summary["vote_margin"] = {"mean": sum(margins) / len(margins),
                                  "histogram": {str(m): margins.count(m) for m in sorted(set(margins))}}
    return summary


def protocol_words(setup: dict) -> str | None:
    """How a team was played when not by its topology's own graph (`--team-protocol replicas`), in
    words for the closing table, the report's setup column, the instance pages and `show`; None
    for a single agent, the gold self-check, or a topology that ran its own graph."""
    protocol = setup.get("team_protocol") or "topology"
    from apibank_bench.agents.topologies import is_team

    if protocol == "topology" or not is_team(setup.get("topology")) or setup.get("model") == "gold":
        return None
    if protocol == "replicas":
        return (f"replicas protocol: {setup.get('team_size', 'N')} lone answers of its final role, voted "
                "(not the topology's graph)")
    return f"team protocol {protocol}"
