"""The topologies and the Agents SDK runner against the scripted OpenAI stub (real HTTP on 127.0.0.1).

Agents are told apart by what the stub receives: the system prompt (the role) and
the seed (the reference's numbering, agents/seeds.py; tests/test_protocol.py checks it request by request).
"""

from __future__ import annotations

import json

import pytest

from apibank_bench.agents.chat_agent import AgentTurn, report
from apibank_bench.agents.prompts import role_prompt
from apibank_bench.agents.sdk_agent import parameters_schema
from apibank_bench.agents.topologies import build_topology
from apibank_bench.agents.topologies.centralized import BRIEF, WORKER_ROLES
from apibank_bench.agents.topologies.sequential import PIPELINE
from apibank_bench.agents.topologies import TEAM_SIZES
from apibank_bench.core.settings import RunConfig
from apibank_bench.llm import ChatClient, ModelConfig
from apibank_bench.data.tasks import get_task
from tests.openai_stub import OpenAIStub, Reply, correct, error, tool_call

TASK = "level-1::AddAgenda-AddAlarm-GetUserToken-level-2-1.jsonl::0"
GOLD = "[GetUserToken(username='JaneSmith', password='password')]"
CANONICAL = "[GetUserToken(password='password', username='JaneSmith')]"  # sorted arguments
DIALOGUE = "DIALOGUE SO FAR"


@pytest.fixture(scope="module")
def task(apibank_root):
    return get_task(TASK)


@pytest.fixture
def stub(stub):
    """conftest's stand-in, answering every request with the gold call."""
    stub.default = correct(GOLD)
    return stub


def client(stub: OpenAIStub) -> ChatClient:
    return ChatClient(ModelConfig(base_urls=[stub.url], model="stub-model", api_key="test", timeout=10,
                                  max_retries=0, cache_dir=None, constrained=False, max_in_flight=16))


def solve(stub, task, topology, n=4, r=2, fmt="freeform", script=None):
    if script is not None:
        stub.default = lambda body: Reply(script(body))
    cfg = RunConfig(topology=topology, team_size=n, rounds=r, message_format=fmt)
    return build_topology(cfg, client(stub))(task)


def system(body):
    return body["messages"][0]["content"]


def user(body):
    return body["messages"][1]["content"]


def team_section(body) -> str:
    text = user(body)
    if "FROM YOUR TEAM:\n" not in text:
        return ""
    return text.split("FROM YOUR TEAM:\n", 1)[1].rsplit("\n\nAnswer with exactly one call", 1)[0]


def noted(body) -> str:
    """An answer that names its author (by seed) and ends with the gold call."""
    return f"Reasoning <note-{body['seed']}> then {GOLD}"


def by_seed(stub) -> dict[int, dict]:
    seeds = [body["seed"] for body in stub.chat_requests]
    assert len(seeds) == len(set(seeds)), "two agents sampled with the same seed"
    return {body["seed"]: body for body in stub.chat_requests}


# -- how many model calls each shape makes ----------------------------------------------

def stages(n: int) -> int:
    return sum(1 for _, joins_at in PIPELINE if joins_at <= n)


SHAPES = [("single", 1, 1, 1)]
SHAPES += [("independent", n, 1, n) for n in TEAM_SIZES]
SHAPES += [("decentralized", n, r, n * r) for n in TEAM_SIZES for r in (1, 2)]  # R rounds in all
SHAPES += [("centralized", n, 1, (n - 1) + 1) for n in TEAM_SIZES]  # N - 1 workers, then the manager
SHAPES += [("sequential", n, 1, n) for n in TEAM_SIZES]  # a team of N is N pipeline stages


@pytest.mark.parametrize("topology,n,r,calls", SHAPES, ids=[f"{t}-N{n}-R{r}" for t, n, r, _ in SHAPES])
def test_model_calls_per_instance(stub, task, topology, n, r, calls):
    solution = solve(stub, task, topology, n, r)
    assert len(stub.chat_requests) == calls
    assert solution.model_calls == calls and len(solution.to_trace()["agents"]) == calls
    assert (solution.prompt_tokens, solution.completion_tokens) == (11 * calls, 7 * calls)
    assert solution.answer == GOLD and solution.error is None


def test_the_shapes_named_in_the_brief(stub, task):
    """Run, not read from SHAPES: a debate of 4 over 2 rounds makes 8 calls, 4 in each round, and the
    team votes on the last round's; a sequential team of N is N stages; centralized has a worker role
    for each of its N - 1 workers."""
    solution = solve(stub, task, "decentralized", 4, 2)
    turns = solution.to_trace()["agents"]
    assert len(stub.chat_requests) == solution.model_calls == 8
    assert [(turn["round"], turn["index"]) for turn in turns] == [(r, i) for r in range(2) for i in range(4)]
    assert len(solution.trace["vote"]["keys"]) == 4  # the last round's 4 answers are voted
    for n in TEAM_SIZES:
        before = len(stub.chat_requests)
        assert solve(stub, task, "sequential", n).model_calls == len(stub.chat_requests) - before == stages(n) == n
    assert len(WORKER_ROLES) >= max(TEAM_SIZES) - 1


# -- who sees what ----------------------------------------------------------------------

@pytest.mark.parametrize("n", [2, 4])
def test_centralized_workers_see_the_task_and_the_manager_hears_them(stub, task, n):
    manager = role_prompt("centralized", "manager")
    solution = solve(stub, task, "centralized", n, script=noted)
    seen = by_seed(stub)
    assert sorted(seen) == list(range(n))  # workers 0..N-2, the manager N-1
    for i, role in enumerate(WORKER_ROLES[: n - 1]):
        assert system(seen[i]) == role_prompt("centralized", role)
        assert DIALOGUE in user(seen[i]) and "JaneSmith" in user(seen[i])  # the whole task
        assert team_section(seen[i]) == BRIEF
    decide = seen[n - 1]
    assert system(decide) == manager and DIALOGUE in user(decide)
    assert all(f"<note-{i}>" in team_section(decide) for i in range(n - 1))
    assert [agent["role"] for agent in solution.to_trace()["agents"]] == [*WORKER_ROLES[: n - 1], "manager"]
    assert solution.to_trace()["agents"][-1]["messages"][1]["content"] == user(decide)
    assert solution.answer == GOLD


def test_decentralized_later_rounds_see_their_own_and_their_peers_previous_answers(stub, task):
    n, rounds = 4, 3
    solve(stub, task, "decentralized", n, rounds, script=noted)
    seen = by_seed(stub)
    assert sorted(seen) == list(range(n * rounds))  # round x N + peer
    for seed, body in seen.items():
        round, index = divmod(seed, n)
        team = team_section(body)
        if round == 0:
            assert team == ""
            continue
        own, peers = team.split("Your peers' previous answers:\n")
        for peer in range(n):
            previous = f"<note-{(round - 1) * n + peer}>"
            assert (previous in peers) == (peer != index) and (previous in own) == (peer == index), (seed, peer)
            assert f"<note-{round * n + peer}>" not in team  # nobody sees the current round
            assert f"<note-{(round - 2) * n + peer}>" not in team  # only the previous round


def test_sequential_stage_k_sees_the_stages_before_it(stub, task):
    n = 4
    roles = [role for role, joins_at in PIPELINE if joins_at <= n]
    solution = solve(stub, task, "sequential", n, script=noted)
    seen = by_seed(stub)
    assert sorted(seen) == list(range(n))  # stage k has seed k
    for k, role in enumerate(roles):
        body = seen[k]
        assert system(body) == role_prompt("sequential", role)
        assert DIALOGUE in user(body)
        for j in range(n):
            assert (f"<note-{j}>" in team_section(body)) == (j < k), (k, j)
    assert [agent["role"] for agent in solution.to_trace()["agents"]] == roles
    assert solution.answer == GOLD and f"<note-{n - 1}>" in solution.to_trace()["agents"][-1]["answer"]


# -- voting -----------------------------------------------------------------------------

A = "[AddAlarm(token='t', time='2023-09-12 13:50:00')]"
B = "[AddAgenda(token='t', content='Meeting with John', time='2023-09-12 14:00:00', location='office')]"


@pytest.mark.parametrize("answers,winner", [
    ([B, A, A, B], 0),  # 2-2: the earliest agent's call
    ([A, B, B, A], 0),
    (["no call here", A, B, B], 2),  # prose votes with its own text: 1-1-2
    (["I am unsure", "I am unsure", "I am unsure", A], 0),  # ... and can win (the reference's rule)
    ([B, "[AddAlarm(time=' 2023-09-12 13:50:00', token='t')]", A, "??"], 0),  # exact arguments: four 1-vote keys
    (["maybe", "no idea", "No  IDEA", "no idea"], 1),  # text keys are lower-cased and trimmed, not folded
])
def test_independent_vote(stub, task, answers, winner):
    """The topology applies agents/vote.py's rule (tests/test_vote.py covers the rule itself)."""
    solution = solve(stub, task, "independent", 4, script=lambda body: answers[body["seed"]])
    assert solution.trace["vote"]["winner"] == winner and solution.trace["vote"]["rule"] == "reference"
    assert solution.answer == answers[winner].strip()


def test_a_model_error_costs_one_agent_not_the_instance(stub, task):
    stub.push(error(500))
    solution = solve(stub, task, "independent", 2)
    assert solution.answer == GOLD and solution.error is None
    assert [bool(agent["error"]) for agent in solution.to_trace()["agents"]].count(True) == 1
    stub.push(error(500))
    solution = solve(stub, task, "single")
    assert not solution.answer and "500" in solution.error


# -- message formats --------------------------------------------------------------------

FORMAT_CASES = [("sequential", 2, 2), ("decentralized", 2, 2), ("centralized", 2, 2)]


def consumer(stub, topology):
    """The request that received a teammate's report, and the seed of that teammate (N = 2, R = 2)."""
    reader, author = {"sequential": (1, 0), "decentralized": (2, 1), "centralized": (1, 0)}[topology]
    return by_seed(stub)[reader], author


def reported(body) -> str:
    """The teammates' reports a request shows (a debater's own previous answer is quoted apart, as written)."""
    return team_section(body).split("Your peers' previous answers:\n")[-1]


@pytest.mark.parametrize("topology,n,r", FORMAT_CASES)
def test_message_formats_change_what_is_passed_not_the_answer(stub, task, topology, n, r):
    answers, sections = set(), {}
    for fmt in ("freeform", "semi_structured", "structured_soft"):
        stub.requests.clear()
        solution = solve(stub, task, topology, n, r, fmt, script=noted)
        answers.add(solution.answer)
        body, author = consumer(stub, topology)
        team = reported(body)
        sections[fmt] = team
        note = f"<note-{author}>"
        if fmt == "freeform":
            assert f": Reasoning {note} then {GOLD}" in team
        elif fmt == "semi_structured":
            assert f"PROPOSED CALL: {CANONICAL}\nNOTES: Reasoning {note} then" in team and GOLD not in team
        else:
            [message] = [json.loads(line) for line in team.splitlines() if line.startswith("{")]
            assert message["proposed_call"] == CANONICAL and message["parsed"] is True
            assert message["notes"] == f"Reasoning {note} then"
    assert answers == {GOLD}
    assert len(set(sections.values())) == 3


def test_report_notes_keep_the_prose_between_two_calls():
    turn = AgentTurn(role="solver", messages=[], answer=f"First {A} but the user wants a schedule, so {B} done",
                     call="[AddAgenda()]")
    notes = json.loads(report(turn, "structured_soft"))["notes"]
    assert notes == "First  but the user wants a schedule, so  done"


# -- the OpenAI Agents SDK runner -------------------------------------------------------

def sdk(stub, task):
    return build_topology(RunConfig(topology="agents_sdk"), client(stub))(task)


def test_sdk_tool_call_is_the_prediction(stub, task):
    stub.push(tool_call("GetUserToken", {"username": "JaneSmith", "password": "password"}))
    solution = sdk(stub, task)
    assert solution.answer == GOLD and solution.error is None
    [body] = stub.chat_requests  # stops at the first tool call: no second model call
    assert all(r["path"].endswith("/chat/completions") for r in stub.requests)
    tools = {t["function"]["name"]: t["function"] for t in body["tools"]}
    assert sorted(tools) == ["AddAgenda", "AddAlarm", "GetUserToken"]
    assert tools["GetUserToken"]["parameters"]["properties"]["username"]["type"] == "string"
    assert body["seed"] == 0 and body["model"] == "stub-model"
    assert DIALOGUE in json.dumps(body["messages"])
    [agent] = solution.to_trace()["agents"]
    assert agent["answer"] == GOLD and agent["call"] == CANONICAL and agent["error"] is None
    assert (solution.prompt_tokens, solution.completion_tokens, solution.model_calls) == (11, 7, 1)
    assert solution.to_trace()["agents"][0]["latency_s"] > 0
    assert solution.to_trace()["agents"][0]["tool_calls"][0]["name"] == "GetUserToken"


def test_sdk_first_of_several_tool_calls_counts(stub, task):
    stub.push(tool_call("AddAlarm", {"token": "t", "time": "2023-09-12 13:50:00"},
                        ("GetUserToken", {"username": "JaneSmith", "password": "password"})))
    solution = sdk(stub, task)
    assert solution.answer == "[AddAlarm(token='t', time='2023-09-12 13:50:00')]"
    assert len(stub.chat_requests) == 1


def test_sdk_text_answer_with_a_bracketed_call_counts(stub, task):
    stub.push(correct(f"The user gave credentials, so: {GOLD}"))
    solution = sdk(stub, task)
    assert solution.answer == GOLD and solution.to_trace()["agents"][0]["tool_calls"] == []
    assert len(stub.chat_requests) == 1


def test_sdk_model_error_is_recorded_not_raised(stub, task):
    stub.push(error(500))
    solution = sdk(stub, task)
    assert not solution.answer and "500" in solution.error


def test_sdk_retries_under_the_chat_clients_policy(stub, task):
    stub.push(error(503), error(500))
    waits = []
    model = ChatClient(ModelConfig(base_urls=[stub.url], model="stub-model", max_retries=2, cache_dir=None,
                                   constrained=False), sleep=waits.append)
    solution = build_topology(RunConfig(topology="agents_sdk"), model)(task)
    assert solution.answer == GOLD and solution.error is None
    assert len(stub.chat_requests) == 3 and len(waits) == 2  # openai's own retries are off


def test_sdk_level2_tools_are_toolsearcher_and_what_it_found(stub, apibank_root):
    stub.push(tool_call("GetUserToken", {"username": "newuser", "password": "newpass"}))
    solution = sdk(stub, get_task("level-2::AddAgenda-level-3-1.jsonl::2"))
    assert solution.answer == "[GetUserToken(username='newuser', password='newpass')]"
    [body] = stub.chat_requests
    assert [t["function"]["name"] for t in body["tools"]] == ["ToolSearcher", "GetUserToken", "AddAgenda"]


def test_parameters_schema_types():
    schema = parameters_schema({name: {"type": kind, "description": f"d-{name}"} for name, kind in [
        ("s", "str"), ("i", "int"), ("f", "float"), ("b", "bool"), ("l", "list"), ("ls", "list(str)"),
        ("other", "datetime")]})
    types = {name: prop["type"] for name, prop in schema["properties"].items()}
    assert types == {"s": "string", "i": "integer", "f": "number", "b": "boolean", "l": "array", "ls": "array",
                     "other": "string"}
    assert schema["properties"]["ls"]["items"] == {"type": "string"} and schema["properties"]["i"]["description"] == "d-i"
