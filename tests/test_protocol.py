"""The agents send what the reference harness sends (juyangbai/MAS-PromptBench @1aade27).

`reference_requests` below is our own model of the reference's protocol, written from
reading its runners (`topologies/*/apibank/*.py`, `teamsizes/apibank_common.py`): per
topology the requests of one instance, each with its role, its seed and the earlier
answers it quotes. Every answer of the scripted endpoint is a unique marker text
(which agent wrote it is readable in any ten consecutive characters), so each later
request shows whose answers it quotes and how many of their characters survived the
reference's cuts: the last 1,200 characters of each answer, and the last 5,000 of a
block of peers' or reports (label `role:` and a blank line between them).
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field

import pytest

from apibank_bench.agents.models import model_client
from apibank_bench.core.paths import PROJECT_ROOT
from apibank_bench.agents.prompts import role_prompt
from apibank_bench.agents.topologies import build_topology, roles
from apibank_bench.core.settings import RunConfig
from apibank_bench.data.tasks import get_task
from tests.openai_stub import OpenAIStub, Reply

QUOTE_CHARS, BLOCK_CHARS = 1200, 5000  # the reference's cuts, both keep the last characters
TASK = "level-2::AddAgenda-level-3-1.jsonl::2"
SAMPLING = {"temperature": 0.2, "top_p": 0.9, "max_tokens": 1024}
VLLM_FIELDS = {"repetition_penalty": 1.05, "chat_template_kwargs": {"enable_thinking": False}}
#: The role whose prompt the reference's team-size runners use for every replica.
FINAL_ROLE = {"independent": "solver", "decentralized": "debater", "centralized": "manager", "sequential": "verifier"}
#: The reference's own teams at their one size (N = 4), which ours must equal there.
REFERENCE_WORKERS = ["inspector_worker", "caller_worker", "validator_worker"]
REFERENCE_STAGES = ["dialogue_reader", "schema_mapper", "argument_planner", "verifier"]


def answer(seed: int) -> str:
    """The endpoint's answer to the request with this seed: cells `SSS-JJJJJ|`, 700 to 1,600 characters."""
    cells = 70 + 15 * (seed % 7)
    return "".join(f"{seed:03d}-{j:05d}|" for j in range(cells))


@dataclass
class Expected:
    seed: int
    role: str
    block: list[tuple[str, int]] = field(default_factory=list)  #: (label, seed) of the quoted answers, in order
    own: int | None = None  #: a debater's own previous answer (cut to 1,200, outside the block)

    def quoted(self) -> dict[int, int]:
        """Seed -> characters of its answer that survive in this request."""
        chunks = [f"{label}:\n{answer(seed)[-QUOTE_CHARS:]}" for label, seed in self.block]
        text = "\n\n".join(chunks)
        cut = max(0, len(text) - BLOCK_CHARS)
        survived, end = {}, 0
        for (label, seed), chunk in zip(self.block, chunks):
            start, end = end + (2 if end else 0), end + (2 if end else 0) + len(chunk)
            body_start = start + len(label) + 2
            if end - max(body_start, cut) > 0:
                survived[seed] = end - max(body_start, cut)
        if self.own is not None:
            survived[self.own] = min(len(answer(self.own)), QUOTE_CHARS)
        return survived


def reference_requests(topology: str, n: int, r: int, protocol: str = "topology") -> list[Expected]:
    """One instance's requests under the reference's protocol, in the order it sends them."""
    if protocol == "replicas" and topology in FINAL_ROLE:  # teamsizes/apibank_common.py: no topology at all
        return [Expected(i, FINAL_ROLE[topology]) for i in range(n)]
    if topology == "single":
        return [Expected(0, "solver")]
    if topology == "independent":
        return [Expected(i, "solver") for i in range(n)]
    if topology == "decentralized":  # R rounds in all; seed round x N + peer
        return [Expected(rd * n + p, "debater",
                         [("debater", (rd - 1) * n + q) for q in range(n) if q != p] if rd else [],
                         (rd - 1) * n + p if rd else None)
                for rd in range(r) for p in range(n)]
    team = roles(RunConfig(topology=topology, team_size=n))
    if topology == "centralized":  # the workers first (seeds 0..), each on the whole task; then the manager
        workers = [role for role in team if role != "manager"]
        assert len(workers) == n - 1 and (n != 4 or workers == REFERENCE_WORKERS)
        return [Expected(i, role) for i, role in enumerate(workers)] + [
            Expected(n - 1, "manager", [(role, i) for i, role in enumerate(workers)])]
    if topology == "sequential":  # stage k quotes every earlier stage
        assert len(team) == n and (n != 4 or team == REFERENCE_STAGES)
        return [Expected(k, role, [(team[j], j) for j in range(k)]) for k, role in enumerate(team)]
    raise AssertionError(topology)


def surviving(text: str, seed: int) -> int:
    """How many of the last characters of `seed`'s answer `text` holds (under ten: none)."""
    whole, low, high = answer(seed), 0, len(answer(seed))
    while low < high:  # the longest suffix present (a shorter suffix of a present one is present too)
        mid = (low + high + 1) // 2
        low, high = (mid, high) if whole[-mid:] in text else (low, mid - 1)
    return low if low >= 10 else 0


# -- the model's own check: the cases below exercise both cuts ------------------------------

def test_the_reference_model_exercises_both_cuts():
    [_, _, _, _, _, _, _, _, *later] = reference_requests("decentralized", 8, 2)
    assert len(later) == 8
    quoted = later[0].quoted()
    own = quoted.pop(later[0].own)
    assert own == min(len(answer(later[0].own)), QUOTE_CHARS)
    assert 1 < len(quoted) < 7  # N = 8: only some of the seven peers survive the 5,000 cap ...
    whole = [seed for seed, chars in quoted.items() if chars == min(len(answer(seed)), QUOTE_CHARS)]
    assert len(whole) == len(quoted) - 1 and min(quoted) not in whole  # ... the earliest of them cut short
    assert any(len(answer(s)) < QUOTE_CHARS for s in range(8)) and any(len(answer(s)) > QUOTE_CHARS for s in range(8))
    for case in CASES:
        for request in reference_requests(*case):
            assert all(chars >= 10 for chars in request.quoted().values())  # never too short to attribute


# -- against our harness ------------------------------------------------------------------

CASES = [("single", 1, 1, "topology")]
CASES += [(t, n, r, "topology") for t in FINAL_ROLE for n in (2, 4, 8) for r in (1, 2, 3)]
CASES += [(t, n, 2, "replicas") for t in FINAL_ROLE for n in (2, 4, 8)]


@pytest.fixture(scope="module")
def task(apibank_root):
    return get_task(TASK)


@pytest.fixture(scope="module")
def vllm():
    with OpenAIStub(default=lambda body: Reply(answer(body["seed"])), owned_by="vllm") as server:
        yield server


def run(stub, task, **settings):
    cfg = RunConfig(base_url=[stub.url], model="stub-model", cache=False, max_retries=0, **settings)
    stub.requests.clear()
    solution = build_topology(cfg, model_client(cfg, local_url=None))(task)
    return solution, stub.chat_requests


@pytest.mark.parametrize("topology,n,r,protocol", CASES, ids=["-".join(map(str, case)) for case in CASES])
def test_requests_match_the_reference(vllm, task, topology, n, r, protocol):
    solution, bodies = run(vllm, task, topology=topology, team_size=n, rounds=r, team_protocol=protocol)
    expected = reference_requests(topology, n, r, protocol)
    assert len(bodies) == len(expected) == solution.model_calls
    by_seed = {body["seed"]: body for body in bodies}
    assert sorted(by_seed) == sorted(e.seed for e in expected)  # every seed once
    earlier = sorted(by_seed)
    for want in expected:
        body = by_seed[want.seed]
        assert {k: body[k] for k in SAMPLING} == SAMPLING
        assert {k: body.get(k) for k in VLLM_FIELDS} == VLLM_FIELDS
        assert body["messages"][0] == {"role": "system", "content": role_prompt(topology, want.role)}
        user = body["messages"][1]["content"]
        got = {seed: chars for seed in earlier if seed != want.seed and (chars := surviving(user, seed))}
        assert got == want.quoted(), (want.seed, want.role)
    # The trace keeps one turn per request: role, round, answer and messages as sent.
    sent = sorted((json.dumps(body["messages"]), answer(body["seed"])) for body in bodies)
    assert sorted((json.dumps(turn["messages"]), turn["answer"]) for turn in solution.to_trace()["agents"]) == sent
    assert all({"role", "round", "index"} <= turn.keys() for turn in solution.to_trace()["agents"])


# -- sampling fields in the form each server takes -------------------------------------------

@pytest.mark.parametrize("owned_by,setting,fields", [
    ("vllm", "auto", VLLM_FIELDS),
    ("sglang", "auto", VLLM_FIELDS),
    ("llamacpp", "auto", {"repeat_penalty": 1.05, "chat_template_kwargs": {"enable_thinking": False}}),
    ("openai", "auto", {}),  # a hosted API rejects fields it does not know: it gets neither
    ("system", "auto", {}),
    (None, "auto", {}),  # no owner named: taken as a hosted API
    ("openai", "vllm", VLLM_FIELDS),  # --server-kind wins over what the endpoint says
    ("vllm", "openai", {}),
])
def test_extra_sampling_fields_follow_the_server_kind(task, owned_by, setting, fields):
    with OpenAIStub(default=Reply("[GetToday()]"), owned_by=owned_by) as stub:
        _, [body] = run(stub, task, topology="single", server_kind=setting)
    standard = {"model", "messages", "temperature", "top_p", "max_tokens", "seed"}
    assert set(body) == standard | set(fields)
    assert {k: body[k] for k in fields} == fields and body["seed"] == 0


def test_penalty_and_thinking_are_settings(vllm, task):
    _, [body] = run(vllm, task, topology="single", repetition_penalty=1.2, thinking=True, seed=7)
    assert body["repetition_penalty"] == 1.2 and body["chat_template_kwargs"] == {"enable_thinking": True}
    assert body["seed"] == 7


def test_summary_records_the_fields_sent(tmp_path):
    """`apibank-bench run` against a vLLM-like and a hosted-like endpoint: summary.json says what every request carried."""
    for owned_by, fields in (("vllm", VLLM_FIELDS), ("openai", {})):
        with OpenAIStub(default=Reply("[GetToday()]"), owned_by=owned_by) as stub:
            out = tmp_path / owned_by
            done = subprocess.run([sys.executable, "-m", "apibank_bench", "run", "--out-dir", str(out), "--limit", "1",
                                   "--base-url", stub.url, "--model", "stub-model", "--no-cache"],
                                  cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600)
            assert done.returncode == 0, done.stderr[-2000:]
            [body] = stub.chat_requests
        model = json.loads((out / "summary.json").read_text())["config"]["model"]
        assert model["server_kind"] == ("vllm" if fields else "openai")
        assert repr(owned_by) in model["server_kind_from"]
        sent = {k: v for k, v in body.items() if k not in ("model", "messages")}
        assert {k: v for k, v in model["request_fields"].items() if k != "seed"} == {
            k: v for k, v in sent.items() if k != "seed"}


# -- what the prompts show -------------------------------------------------------------------

REFERENCE_TOOLSEARCHER = ('{"name": "ToolSearcher", "description": "Searches for relevant tools in the API library '
                          'based on concise keywords.", "input_parameters": {"keywords": {"type": "str", "description": '
                          '"Concise keywords describing the user request, such as \'add schedule\'."}}, '
                          '"output_parameters": {"best_matchs": {"type": "Union[List[dict], dict]", "description": '
                          '"The best matching API description or descriptions."}}}')


@pytest.mark.parametrize("task_id", [TASK, "level-3::level-3.json::0::0"])
def test_levels_2_and_3_show_the_reference_toolsearcher_description(vllm, apibank_root, task_id):
    _, [body] = run(vllm, get_task(task_id), topology="single")
    user = body["messages"][1]["content"]
    assert REFERENCE_TOOLSEARCHER in user  # the reference's own text, byte for byte, as its prompts show it
    assert "AVAILABLE APIS:\n" + REFERENCE_TOOLSEARCHER + "\n" in user  # the only API shown


def test_level_1_shows_upstream_descriptions(vllm, apibank_root):
    from apibank_bench.data import specs

    task = get_task("level-1::AddAgenda-AddAlarm-GetUserToken-level-2-1.jsonl::0")
    _, [body] = run(vllm, task, topology="single")
    for name in ("AddAgenda", "AddAlarm", "GetUserToken"):
        assert json.dumps(specs.description_payload(specs.LEVEL12, name)) in body["messages"][1]["content"]
    assert "ToolSearcher" not in body["messages"][1]["content"]


def test_prompts_dir_takes_the_reference_layout(vllm, task, tmp_path):
    (tmp_path / "centralized" / "apibank").mkdir(parents=True)
    (tmp_path / "centralized" / "apibank" / "manager.txt").write_text("REFERENCE-STYLE MANAGER\n")
    (tmp_path / "centralized" / "apibank" / "inspector_worker.txt").write_text("REFERENCE-STYLE INSPECTOR\n")
    (tmp_path / "centralized" / "inspector_worker.txt").write_text("OUR-LAYOUT INSPECTOR\n")  # ours first
    _, bodies = run(vllm, task, topology="centralized", team_size=4, prompts_dir=str(tmp_path))
    systems = {body["seed"]: body["messages"][0]["content"] for body in bodies}
    assert systems[3].startswith("REFERENCE-STYLE MANAGER\n\n") and systems[0].startswith("OUR-LAYOUT INSPECTOR\n\n")
    assert systems[1] == role_prompt("centralized", "caller_worker")  # no file: the packaged prompt


def test_the_settings_table_names_every_server_kind():
    from apibank_bench.core.settings import BY_NAME
    from apibank_bench.llm.config import AUTO, SERVER_KINDS

    assert set(BY_NAME["server_kind"].allowed()) == {AUTO, *SERVER_KINDS}


def test_team_protocol_is_a_sweep_axis():
    from apibank_bench.sweeps.grid import axes_of

    assert axes_of({"team_protocol": "topology,replicas"}) == {"team_protocol": ["topology", "replicas"]}


@pytest.mark.parametrize("topology", ["decentralized", "independent"])
def test_every_agent_of_a_wide_step_asks_with_its_epochs_seed(vllm, task, topology):
    """A step's agents run on other threads than the instance's; the epoch (a context variable) goes with them."""
    from apibank_bench.agents.chat_agent import EPOCH_SEED_STRIDE, solving_epoch

    with solving_epoch(2):
        _, bodies = run(vllm, task, topology=topology, team_size=4, rounds=2)
    assert sorted(body["seed"] for body in bodies) == sorted(
        2 * EPOCH_SEED_STRIDE + want.seed for want in reference_requests(topology, 4, 2, "topology"))
