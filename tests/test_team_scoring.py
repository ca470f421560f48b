"""Every agent of a team scored: a scripted team in which one agent is always right and the others
wrong gives oracle 100 %, the team accuracy its aggregation implies, and the matching counts of
instances lost and fixed by aggregation (independent, decentralized, centralized)."""

from __future__ import annotations

import json
import re

from apibank_bench.agents.chat_agent import AgentTurn
from apibank_bench.agents.prompts import role_prompt
from apibank_bench.data.tasks import get_task
from apibank_bench.reports.html import build_report
from apibank_bench.runs.results import read_jsonl
from apibank_bench.runs.team import team_fields, vote_margin

from openai_stub import OpenAIStub, Reply
from helpers import bench, EVAL_IDS, task_of

IDS = EVAL_IDS[:6]
SEED = 0


def task_in(body: dict):
    """The task a request is about: from its dialogue, or (a worker shown only a delegation) from the
    task marker the scripted manager wrote into its delegation."""
    marker = re.search(r"TASK=(\S+)", body["messages"][-1]["content"])
    return get_task(marker.group(1)) if marker else task_of(body)


def answer(body: dict, right: bool, wrong_text: str = "[NoSuchApi(x='1')]") -> Reply:
    return Reply(text=f"[{task_in(body).gold_call[1:-1]}]" if right else wrong_text)


def agent_index(body: dict) -> int:
    """Which member of a team of 4 asked: its place in the team, from its seed (seed + round x 4 + index,
    agents/seeds.py)."""
    return (body["seed"] - SEED) % 4


def team_run(tmp_path, respond, *args: str) -> tuple[list[dict], dict]:
    with OpenAIStub(default=respond) as stub:
        run = bench(tmp_path, "--apibank-model", "stub", "--apibank-base-url", stub.url, "--apibank-only", *IDS,
                    "--apibank-no-cache", "--apibank-toolsearcher-scorer", "keyword", "--apibank-seed", str(SEED),
                    *args)
    assert run.returncode in (0, 1), run.stdout[-3000:]
    assert "oracle" in run.stdout  # the closing table reports the team's agents
    return read_jsonl(tmp_path / "results.jsonl"), json.loads((tmp_path / "summary.json").read_text())["team"]


def test_independent_majority_of_wrong_agents_outvotes_the_right_one(tmp_path):
    rows, team = team_run(tmp_path, lambda body: answer(body, agent_index(body) == 2),
                          "--apibank-topology", "independent", "--apibank-team-size", "4")
    # Three identical wrong calls against one right call: the vote picks the wrong one every time.
    assert not any(row["correct"] for row in rows)
    assert all(row["oracle"] and row["vote_margin"] == 2 for row in rows)
    assert [[turn["correct"] for turn in row["agents_correct"]] for row in rows] == [[False, False, True, False]] * 6
    assert team["oracle_accuracy"] == 1.0 and team["team_accuracy"] == 0.0
    assert (team["lost_by_aggregation"], team["fixed_by_aggregation"]) == (6, 0)
    assert team["by_role"]["solver"] == {"turns": 24, "correct": 6, "accuracy": 0.25}
    page = build_report([tmp_path], tmp_path / "report").read_text()
    assert "Every agent scored: team, oracle and aggregation" in page and "lost by aggregation" in page
    assert "<td>6</td><td>0.0%</td><td>100.0%</td><td>6</td><td>0</td><td>2.00</td>" in page


def test_independent_tie_goes_to_the_earliest_agent_and_is_fixed_by_aggregation(tmp_path):
    # Every wrong agent says something different, so all four calls tie and agent 0's (right) call wins.
    rows, team = team_run(tmp_path, lambda body: answer(body, agent_index(body) == 0,
                                                        f"[NoSuchApi(x='{agent_index(body)}')]"),
                          "--apibank-topology", "independent", "--apibank-team-size", "4")
    assert all(row["correct"] and row["oracle"] and row["vote_margin"] == 0 for row in rows)
    assert team["team_accuracy"] == 1.0 and team["oracle_accuracy"] == 1.0
    assert (team["lost_by_aggregation"], team["fixed_by_aggregation"]) == (0, 6)  # 1 of 4 right, team right


def test_decentralized_debate_loses_the_right_debater_in_the_last_vote(tmp_path):
    rows, team = team_run(tmp_path, lambda body: answer(body, agent_index(body) == 1),
                          "--apibank-topology", "decentralized", "--apibank-team-size", "4", "--apibank-rounds", "2")
    assert team["team_accuracy"] == 0.0 and team["oracle_accuracy"] == 1.0
    assert team["lost_by_aggregation"] == 6
    assert set(team["by_round"]) == {"0", "1"}
    assert all(part["accuracy"] == 0.25 for part in team["by_round"].values())
    assert all(row["vote_margin"] == 2 for row in rows)


def test_centralized_manager_overrules_its_right_worker(tmp_path):
    right = role_prompt("centralized", "caller_worker")

    def respond(body: dict) -> Reply:  # every worker sees the task and answers with a call
        return answer(body, body["messages"][0]["content"] == right)

    rows, team = team_run(tmp_path, respond, "--apibank-topology", "centralized", "--apibank-team-size", "4")
    assert team["team_accuracy"] == 0.0 and team["oracle_accuracy"] == 1.0
    assert team["lost_by_aggregation"] == 6 and team["fixed_by_aggregation"] == 0
    assert team["by_role"]["caller_worker"]["accuracy"] == 1.0
    assert all(part["accuracy"] == 0.0 for role, part in team["by_role"].items() if role != "caller_worker")
    assert all("vote_margin" not in row for row in rows)  # a manager decides; nobody votes


class _Verdict:
    def __init__(self, correct: bool) -> None:
        self.correct, self.stage, self.reason = correct, "score" if correct else "api_name", None


def test_turn_scoring_is_generic_over_roles_rounds_and_skips_free_text_and_failed_turns():
    turns = [AgentTurn("manager", [], 0, 0, answer="Please check the calendar.", emits_call=False),
             AgentTurn("w", [], 1, 1, answer="I think [Right()]"),
             AgentTurn("w", [], 1, 2, answer="", error="HTTP 500"),
             AgentTurn("manager", [], 2, 0, answer="[Wrong()]")]
    asked = []

    def score(prediction):
        asked.append(prediction.text)
        assert prediction.call is not None and prediction.call.name in ("Right", "Wrong")  # parsed already
        return _Verdict(prediction.text == "[Right()]")

    fields = team_fields(turns, None, score)
    assert fields["agents_correct"] == [
        {"role": "w", "round": 1, "index": 1, "correct": True, "stage": "score"},
        {"role": "manager", "round": 2, "index": 0, "correct": False, "stage": "api_name"}]
    assert fields["oracle"] is True and "vote_margin" not in fields
    assert asked == ["[Right()]", "[Wrong()]"]  # the call the scorer reads, as for the team's answer
    assert vote_margin({"winner": 0, "tally": [["a", 2], ["b", 2], ["c", 1]]}) == 0
    assert vote_margin({"winner": None, "tally": []}) is None
