"""`sdk` agents (OpenAI Agents SDK, the visible APIs as function tools) in every topology, against the scripted stub.

An agent is told apart by its seed (the reference's numbering, `agents.seeds.agent_seed`, as for chat agents).
The stub answers an `sdk` agent with a tool call and a `chat` agent with the same
call as text, so both kinds must give the same team results.
"""

from __future__ import annotations

import json

import pytest

from apibank_bench.agents.kinds import AGENT_KINDS
from apibank_bench.agents.prompts import role_prompt, visible_schemas
from apibank_bench.agents.topologies import build_topology, own_topologies
from apibank_bench.agents.topologies.sequential import PIPELINE
from apibank_bench.core.settings import RunConfig
from apibank_bench.runs.naming import results_dir
from apibank_bench.llm import ChatClient, ModelConfig
from apibank_bench.scoring.scorer import Scorer
from apibank_bench.scoring.stage import Reason
from apibank_bench.data.tasks import get_task, render_call
from tests.openai_stub import OpenAIStub, Reply, error, tool_call

BUILDERS = list(own_topologies())

TASKS = ["level-1::AddAgenda-AddAlarm-GetUserToken-level-2-1.jsonl::0", "level-2::AddAgenda-level-3-1.jsonl::2"]
ALARM = ("AddAlarm", {"token": "t", "time": "2023-09-12 13:50:00"})
AGENDA = ("AddAgenda", {"token": "t", "content": "Meeting", "time": "2023-09-12 14:00:00", "location": "office"})


@pytest.fixture(scope="module")
def task(apibank_root):
    return get_task(TASKS[0])


def client(stub: OpenAIStub, cache_dir=None, max_in_flight: int = 16) -> ChatClient:
    return ChatClient(ModelConfig(base_urls=[stub.url], model="stub-model", api_key="test", timeout=10,
                                  max_retries=0, cache_dir=cache_dir, constrained=False, max_in_flight=max_in_flight))


def gold(task) -> tuple[str, dict]:
    return task.gold.api_name, dict(task.gold.params)


def answering(kind: str, calls):
    """Answer each request with `calls(body)` (a (name, arguments) pair): a tool call for sdk, text for chat."""
    def reply(body: dict) -> Reply:
        name, arguments = calls(body)
        return tool_call(name, arguments) if kind == "sdk" else Reply(f"I will call {render_call(name, arguments)}")
    return reply


def solve(stub, task, topology, kind="sdk", n=4, r=2, calls=None, model=None, **settings):
    stub.default = answering(kind, calls or (lambda body: gold(task)))
    cfg = RunConfig(topology=topology, team_size=n, rounds=r, agent_kind=kind, **settings)
    return build_topology(cfg, model or client(stub))(task)


def expected_requests(topology: str, n: int, r: int) -> int:
    return {"single": 1, "independent": n, "decentralized": n * r, "centralized": n,
            "sequential": sum(1 for _, joins_at in PIPELINE if joins_at <= n)}[topology]


# -- request counts and tools ----------------------------------------------------------------

@pytest.mark.parametrize("topology", list(BUILDERS))
def test_every_topology_with_sdk_agents_makes_the_chat_request_count_and_sends_the_visible_apis(stub, task,
                                                                                                topology):
    solution = solve(stub, task, topology)
    calls = expected_requests(topology, 4, 2)
    bodies = stub.chat_requests
    assert len(bodies) == solution.model_calls == calls
    if topology == "decentralized":
        assert calls == 8  # N=4, R=2 (rounds in all)
    names = [schema["name"] for schema in visible_schemas(task)]
    for body in bodies:
        assert [tool["function"]["name"] for tool in body["tools"]] == names
        assert all(tool["type"] == "function" and tool["function"]["parameters"]["type"] == "object"
                   for tool in body["tools"])
    assert solution.answer == render_call(*gold(task)) and solution.error is None


def test_a_tool_call_becomes_the_agents_prediction_and_is_recorded(stub, task):
    solution = solve(stub, task, "independent", n=2, calls=lambda body: ALARM)
    assert solution.answer == render_call(*ALARM)
    for agent in solution.to_trace()["agents"]:
        assert agent["answer"] == render_call(*ALARM)
        assert agent["tool_calls"] == [{"name": "AddAlarm", "arguments": json.dumps(ALARM[1])}]
        assert agent["messages"][0]["content"].startswith(role_prompt("independent", "solver"))


def test_a_text_answer_with_a_bracketed_call_still_counts(stub, task):
    stub.default = lambda body: Reply(f"No tool needed: {render_call(*ALARM)}")
    solution = build_topology(RunConfig(topology="independent", team_size=2, agent_kind="sdk"), client(stub))(task)
    assert solution.answer == render_call(*ALARM)
    assert [agent["tool_calls"] for agent in solution.to_trace()["agents"]] == [[], []]


def test_a_call_to_an_unknown_tool_is_a_wrong_answer_not_an_error(stub, task):
    solution = solve(stub, task, "single", calls=lambda body: ("DeleteEverything", {"now": True}))
    assert solution.answer == "" and solution.error is None  # no API of the level: the (empty) text is read
    assert solution.prediction.error.reason == Reason.PARSE_TOOL_UNKNOWN
    assert solution.to_trace()["agents"][0]["error"] is None
    # an API of the level the agent was not given is read, as the reference reads it in a text answer
    solution = solve(stub, task, "single", calls=lambda body: ("GetToday", {}))
    assert "GetToday" not in [schema["name"] for schema in visible_schemas(task)]
    assert solution.answer == "[GetToday()]" and solution.answered_by == "tool_call"


def test_tool_arguments_that_are_not_a_json_object_leave_the_text_to_read(stub, task):
    stub.push(Reply(text=f"Maybe {render_call(*ALARM)}", tool_calls=[{"name": "AddAlarm", "arguments": "[1, 2]"}]))
    solution = solve(stub, task, "single")
    assert solution.answer == render_call(*ALARM)
    stub.push(tool_call("AddAlarm", "{not json"))
    solution = solve(stub, task, "single")
    assert solution.answer is not None and not solution.answer and solution.error is None
    assert (solution.answered_by, solution.prediction.error.reason) == ("text_fallback", Reason.PARSE_TOOL_ARGUMENTS)


def test_a_vote_among_sdk_peers_breaks_ties_to_the_earliest_agent(stub, task):
    order = [AGENDA, ALARM, ALARM, AGENDA]
    solution = solve(stub, task, "independent", calls=lambda body: order[body["seed"]])
    assert solution.answer == render_call(*AGENDA) and solution.trace["vote"]["winner"] == 0
    assert [count for _, count in solution.trace["vote"]["tally"]] == [2, 2]


def test_decentralized_sdk_peers_see_each_others_previous_calls(stub, task):
    def calls(body):  # agent i proposes a token of its own
        return "AddAlarm", {"token": f"peer-token-{body['seed']}", "time": "2023-09-12 13:50:00"}

    solve(stub, task, "decentralized", n=3, r=2, calls=calls)
    later = [body for body in stub.chat_requests if body["seed"] >= 3]  # round 1: seeds 3 + peer
    assert len(later) == 3
    for body in later:
        index = body["seed"] - 3
        own, peers = body["messages"][-1]["content"].split("Your peers' previous answers:\n")
        for peer in range(3):
            assert (f"[AddAlarm(token='peer-token-{peer}'" in peers) == (peer != index)
        assert f"[AddAlarm(token='peer-token-{index}'" in own  # its own previous call, shown apart


def test_an_endpoint_failure_is_an_error_not_an_answer(stub, task):
    stub.push(error(500))
    solution = solve(stub, task, "single")
    assert not solution.answer and "500" in solution.error
    stub.push(error(500))
    solution = solve(stub, task, "independent", n=2)
    assert solution.answer == render_call(*gold(task)) and solution.error is None
    assert sorted("500" in (agent["error"] or "") for agent in solution.to_trace()["agents"]) == [False, True]


def test_agents_sdk_topology_is_single_with_sdk_agents(stub, task):
    stub.default = answering("sdk", lambda body: gold(task))
    alias = build_topology(RunConfig(topology="agents_sdk", agent_kind="chat"), client(stub))(task)
    assert len(stub.chat_requests) == 1 and "tools" in stub.chat_requests[0]  # the alias sets the kind itself
    assert alias.answer == render_call(*gold(task))
    assert alias.to_trace()["agents"][0]["role"] == "solver" and alias.to_trace()["agents"][0]["tool_calls"]


# -- same answers, same results ---------------------------------------------------------------

SPREAD = [AGENDA, ALARM, ALARM, AGENDA, ALARM]


@pytest.mark.parametrize("topology", list(BUILDERS))
def test_sdk_and_chat_agents_give_the_same_results_for_the_same_answers(stub, task, topology):
    def calls(body):
        return SPREAD[body["seed"] % len(SPREAD)]

    results = {}
    for kind in AGENT_KINDS.names():
        stub.requests.clear()
        solution = solve(stub, task, topology, kind=kind, calls=calls)
        results[kind] = (solution.answer, solution.model_calls, solution.trace.get("vote"),
                         [(agent["role"], agent["index"], agent["round"], agent["call"])
                          for agent in solution.to_trace()["agents"]])
        assert len(stub.chat_requests) == expected_requests(topology, 4, 2)
    assert results["sdk"] == results["chat"]


# -- shared model layer: cache and in-flight cap ------------------------------------------

def test_sdk_requests_are_cached(stub, task, tmp_path):
    first = solve(stub, task, "independent", model=client(stub, tmp_path))
    assert len(stub.chat_requests) == 4
    again = solve(stub, task, "independent", model=client(stub, tmp_path))
    assert len(stub.chat_requests) == 4 and again.answer == first.answer  # all four from the cache
    assert all(agent["cached"] for agent in again.to_trace()["agents"])
    assert again.to_trace()["agents"][0]["tool_calls"] == first.to_trace()["agents"][0]["tool_calls"] != []


def test_tools_are_part_of_the_request_and_its_cache_key(stub, tmp_path):
    model, messages = client(stub, tmp_path), [{"role": "user", "content": "hi"}]
    tools = [{"type": "function", "function": {"name": "F", "parameters": {"type": "object", "properties": {}}}}]
    stub.default = tool_call("F", {"a": 1})
    assert model.complete(messages, tools=tools).tool_calls == [{"name": "F", "arguments": '{"a": 1}'}]
    assert stub.chat_requests[0]["tools"] == tools
    cached = model.complete(messages, tools=tools)
    assert cached.cached and cached.tool_calls == [{"name": "F", "arguments": '{"a": 1}'}]
    model.complete(messages)  # no tools: another request, sent without a `tools` field
    model.complete(messages, tools=[{**tools[0], "function": {**tools[0]["function"], "name": "G"}}])
    assert len(stub.chat_requests) == 3 and "tools" not in stub.chat_requests[1]


def test_sdk_agents_respect_the_in_flight_cap(task):
    with OpenAIStub(hold=0.05) as stub:
        solve(stub, task, "independent", n=8, model=client(stub, max_in_flight=2))
        assert len(stub.chat_requests) == 8 and stub.max_concurrent <= 2


# -- every topology x agent kind on two instances -------------------------------------------

@pytest.mark.parametrize("kind", AGENT_KINDS.names())
@pytest.mark.parametrize("topology", list(BUILDERS))
def test_every_topology_and_agent_kind_on_two_instances(stub, apibank_root, topology, kind):
    scorer = Scorer()
    for task_id in TASKS:
        task = get_task(task_id)
        stub.requests.clear()
        solution = solve(stub, task, topology, kind=kind, n=2, r=2)
        assert len(stub.chat_requests) == solution.model_calls == expected_requests(topology, 2, 2)
        assert scorer.score(task, solution.answer).correct, (task_id, solution.answer)


def test_each_agent_kind_writes_its_own_results_folder():
    assert results_dir(RunConfig(topology="independent")).endswith("results/apibank/embedded/independent-n4")
    assert results_dir(RunConfig(topology="independent", agent_kind="sdk")).endswith(
        "results/apibank/embedded/independent_sdk-n4")
    assert results_dir(RunConfig(topology="agents_sdk")).endswith("results/apibank/embedded/agents_sdk")
