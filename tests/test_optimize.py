"""`apibank-bench optimize` against a scripted OpenAI-protocol server (real HTTP on 127.0.0.1).

The server answers a task request with the instance's gold call only when the
system prompt holds MARKER (else with a wrong call), and answers every other
request (GEPA's reflection) with a new prompt that holds MARKER. So seed prompts
score 0 and any prompt the optimizer adopts from a reflection scores 1.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from openai_stub import OpenAIStub, Reply

from apibank_bench import cli

from apibank_bench.data import manifests
from apibank_bench.agents.prompts import format_history, role_prompt, role_text
from apibank_bench.llm import ChatClient, ModelConfig
from apibank_bench.optimize import grid
from apibank_bench.optimize.context import Context
from apibank_bench.optimize.events import EventLog
from apibank_bench.optimize.roles import roles
from apibank_bench.core.paths import PROJECT_ROOT
from apibank_bench.runs.parts import RunParts
from apibank_bench.runs.results import read_jsonl
from apibank_bench.scoring import Scorer
from apibank_bench.core import settings
from apibank_bench.core.settings import RunConfig
from apibank_bench.data.tasks import get_task

MARKER = "Copy every argument value exactly as the dialogue states it (marker 7Q)."
WRONG = "[NoSuchApi(x='y')]"
CONTRACT = role_prompt("single", "solver")[len(role_text("single", "solver")):].strip()
TRAIN, VALIDATION, EVAL_LIMIT = 3, 3, 3
#: Per method: a cell's topology and tiny-budget flags. A method is tested here once its module is in the
#: package (the MASPO and MIPROv2 modules come from their own branch).
METHOD_CASES = {
    "gepa": ("single", ["--budget", "12"]),
    "maspo": ("sequential", ["--team-size", "2", "--budget", "40", "--maspo-rounds", "1", "--steps", "1",
                             "--minibatch", "3", "--pool", "3"]),
    "mipro": ("single", ["--budget", "3", "--num-candidates", "2", "--trial-minibatch-size", "3"]),
}
PRESENT = list(METHOD_CASES)  # every registered method is tested
SPLIT = manifests.splits(TRAIN, VALIDATION, 0)
EVAL_IDS = manifests.manifest_ids("all")
USED = SPLIT["train"] + SPLIT["validation"] + EVAL_IDS[:EVAL_LIMIT]
_STABLE_SKIP = {"latency_s"}


class Scripted:
    """The server's responder: gold call iff MARKER is in the system prompt; reflections offer MARKER."""

    def __init__(self) -> None:
        self.gold = {format_history(get_task(task_id)): get_task(task_id).gold_call for task_id in USED}
        self.by_history = {format_history(get_task(task_id)): task_id for task_id in USED}

    def instance(self, body: dict) -> str | None:
        """The task an agent's request is about (the longest known dialogue in it); None for other requests."""
        messages = body["messages"]
        agent = messages[0]["role"] == "system" and messages[0]["content"].endswith(CONTRACT)
        if not agent or "DIALOGUE SO FAR:" not in messages[-1]["content"]:
            return None  # agents' system prompts end with the output contract; reflections and judges do not
        user = messages[-1]["content"]
        found = [history for history in self.gold if history in user]
        return self.by_history[max(found, key=len)] if found else None

    def __call__(self, body: dict) -> Reply:
        task_id = self.instance(body)
        if task_id is None:
            return Reply(f"Here is a better instruction:\n```\nPredict the next API call. {MARKER}\n```")
        system = body["messages"][0]["content"]
        return Reply(get_task(task_id).gold_call if MARKER in system else WRONG)


@pytest.fixture(scope="module")
def scripted(apibank_root):
    return Scripted()


@pytest.fixture(scope="module")
def scripted_stub(scripted):
    with OpenAIStub(default=scripted) as server:
        yield server


def optimize_args(out: Path, url: str, *extra: str, method: str = "gepa") -> list[str]:
    topology, flags = METHOD_CASES[method]
    return ["optimize", "--method", method, "--dataset", "apibank", "--topology", topology,
            "--seed", "0", "--out", str(out), "--base-url", url, "--train", str(TRAIN),
            "--validation", str(VALIDATION), "--eval-limit", str(EVAL_LIMIT), "--concurrency", "3", *flags, *extra]


@dataclass
class Job:
    method: str
    out: Path
    requests: list[dict]  #: what the server saw during the job

    @property
    def topology(self) -> str:
        return METHOD_CASES[self.method][0]


@pytest.fixture(scope="module", params=PRESENT)
def run(request, scripted_stub, tmp_path_factory):
    """One uninterrupted run per method on an on-grid cell (the alias `qwen` pointed at the stub's model)."""
    method = request.param
    out = tmp_path_factory.mktemp(method)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("APIBANK_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        before = len(scripted_stub.chat_requests)
        code = cli.main(optimize_args(out, scripted_stub.url, "--model", "qwen", "--model-aliases", "qwen=stub-model",
                                      method=method))
        requests = scripted_stub.chat_requests[before:]
    assert code == 0
    return Job(method, out, requests)


def read_prompts(folder: Path) -> dict[str, str]:
    return {str(path.relative_to(folder)): path.read_text() for path in sorted(folder.rglob("*.txt"))}


# -- the whole job ---------------------------------------------------------------------

def test_the_method_adopts_the_marker_prompt_and_beats_the_seed_on_eval(run):
    out, topology = run.out, run.topology
    prompts = read_prompts(out / "prompts")
    assert sorted(prompts) == sorted(read_prompts(out / "seed_prompts"))
    assert any(MARKER in text for text in prompts.values())
    for name, text in read_prompts(out / "seed_prompts").items():
        assert text.strip() == role_text(topology, Path(name).stem)
    final = json.loads((out / "final.json").read_text())
    assert final["seed"]["accuracy"] == 0.0 and final["optimized"]["accuracy"] == 1.0
    assert final["improved"] == EVAL_IDS[:EVAL_LIMIT] and final["regressed"] == []
    assert final["paired_test"]["p_value"] == pytest.approx(0.25)
    validation = json.loads((out / "validation.json").read_text())
    assert (validation["seed"]["correct"], validation["optimized"]["correct"]) == (0, VALIDATION)
    for name in ("seed", "optimized"):
        results = read_jsonl(out / "final" / name / "results.jsonl")
        assert [line["id"] for line in results] == EVAL_IDS[:EVAL_LIMIT]
        assert json.loads((out / "final" / name / "summary.json").read_text())["total"] == EVAL_LIMIT
    config = json.loads((out / "config.json").read_text())
    assert config["splits"]["train"] == SPLIT["train"] and config["splits"]["validation"] == SPLIT["validation"]
    assert config["excluded_eval_ids"] == EVAL_IDS
    assert config["cell"]["alias"] == "qwen" and config["off_grid"] is None
    if run.method == "gepa":
        assert config["optimizer_packages"]["gepa"] == "0.1.4"
        assert (out / "gepa").is_dir()  # GEPA's own run dir


def test_log_accounts_for_every_task_request(run, scripted):
    out, requests = run.out, run.requests
    log = read_jsonl(out / "log.jsonl")
    task_requests = [body for body in requests if scripted.instance(body) is not None]
    counted = sum(r.get("requests", 0) for r in log if r["event"] in ("evaluation", "final_instance"))
    assert len(task_requests) == counted > 0
    asked = sum(r.get("requests", 0) for r in log if r["event"] == "ask")
    assert len(requests) - len(task_requests) == asked > 0
    if run.method == "gepa":  # GEPA's budget is task rollouts: the optimize phase's evaluations used exactly it
        assert sum(r["tasks"] for r in log if r["event"] == "evaluation" and r["phase"] == "optimize") == 12


def test_no_request_before_the_final_comparison_shows_an_eval_instance(run, scripted):
    requests = run.requests
    held_out = set(EVAL_IDS)
    assert not held_out & set(SPLIT["train"] + SPLIT["validation"])
    about = [scripted.instance(body) for body in requests]
    first_eval = next(i for i, task_id in enumerate(about) if task_id in held_out)
    assert all(task_id not in held_out for task_id in about[:first_eval])
    assert all(task_id in held_out for task_id in about[first_eval:])  # the final phase comes last
    eval_dialogues = [format_history(get_task(task_id)) for task_id in EVAL_IDS[:EVAL_LIMIT]]
    reflections = [body["messages"][-1]["content"] for body, task_id in zip(requests, about) if task_id is None]
    assert reflections and not any(d in text for d in eval_dialogues for text in reflections)
    # Feedback (the scorer's verdict and the gold call) comes from training tasks only.
    validation_dialogues = [format_history(get_task(task_id)) for task_id in SPLIT["validation"]]
    assert not any(d in text for d in validation_dialogues for text in reflections)
    if run.method == "gepa":  # GEPA's reflective dataset: the scorer's stage and the gold call
        train_golds = [get_task(task_id).gold_call for task_id in SPLIT["train"]]
        assert all("Gold: " in text and "api_name" in text and any(g in text for g in train_golds)
                   for text in reflections)


def test_run_with_the_optimized_prompts_reproduces_final_optimized(run, scripted_stub, tmp_path):
    out = run.out
    topology, flags = METHOD_CASES[run.method]
    team = flags[flags.index("--team-size"):][:2] if "--team-size" in flags else []
    command = [sys.executable, "-m", "apibank_bench", "run", "--topology", topology, *team,
               "--prompts-dir", str(out / "prompts"),
               "--limit", str(EVAL_LIMIT), "--base-url", scripted_stub.url, "--model", "stub-model", "--seed", "0",
               "--no-cache", "--out-dir", str(tmp_path)]
    done = subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    def stable(folder: Path) -> list[dict]:
        return [{k: v for k, v in line.items() if k not in _STABLE_SKIP} for line in read_jsonl(folder)]

    assert stable(tmp_path / "results.jsonl") == stable(out / "final" / "optimized" / "results.jsonl")
    assert all(line["correct"] for line in read_jsonl(tmp_path / "results.jsonl"))


def test_a_team_with_a_separate_optimizer_endpoint(scripted_stub, scripted, tmp_path, monkeypatch):
    """Centralized, team of 2 (manager + inspector_worker); reflections go to the optimizer endpoint only."""
    monkeypatch.setenv("APIBANK_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "team"
    with OpenAIStub(default=Reply(f"```\nPredict the next API call. {MARKER}\n```")) as reflector:
        before = len(scripted_stub.chat_requests)
        args = optimize_args(out, scripted_stub.url, "--model", "stub-model", "--allow-any-cell", "--optimizer-base-url",
                             reflector.url, "--optimizer-model", "reflector-model")
        args[args.index("single")] = "centralized"
        assert cli.main([*args, "--team-size", "2"]) == 0
        reflections = reflector.chat_requests
    task_side = scripted_stub.chat_requests[before:]
    assert reflections and all(body["model"] == "reflector-model" for body in reflections)
    assert all(body["messages"][0]["role"] == "system" for body in task_side)  # no reflection reached it
    assert sorted(p.name for p in (out / "prompts" / "centralized").iterdir()) == ["inspector_worker.txt",
                                                                                  "manager.txt"]
    assert MARKER in (out / "prompts" / "centralized" / "manager.txt").read_text()  # round robin starts there
    final = json.loads((out / "final.json").read_text())
    assert final["optimized"]["accuracy"] > final["seed"]["accuracy"]
    config = json.loads((out / "config.json").read_text())
    assert config["roles"] == ["manager", "inspector_worker"]
    assert config["optimizer_model"]["model"] == "reflector-model"


# -- the grid --------------------------------------------------------------------------

def test_an_off_grid_cell_is_refused_in_one_line_naming_the_flag(scripted_stub, tmp_path, capsys):
    code = cli.main(optimize_args(tmp_path / "refused", scripted_stub.url, "--model", "stub-model"))
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "--allow-any-cell" in err
    assert not (tmp_path / "refused").exists()


def test_grid_cells():
    aliases = grid.model_aliases()
    assert grid.off_grid_reason(grid.cell("gepa", "single", "qwen", 0, aliases)) is None
    assert grid.cell("maspo", "decentralized", "llama", 2, aliases).model == aliases["llama"]
    # A concrete name finds its alias; MASPO has no single-agent cell; seeds and models are listed.
    assert grid.cell("mipro", "sequential", aliases["qwen"], 1, aliases).alias == "qwen"
    for method, topology, model, seed in (("maspo", "single", "qwen", 0), ("gepa", "single", "qwen", 7),
                                          ("gepa", "single", "other/model", 0), ("gepa", "single", None, 0)):
        assert grid.check_cell(grid.cell(method, topology, model, seed, aliases), False)
        assert grid.check_cell(grid.cell(method, topology, model, seed, aliases), True) is None
    overridden = grid.model_aliases(settings.value_from_environment(
        "model_aliases", {"APIBANK_MODEL_ALIASES": "qwen=c/d,new=e/f"}))
    assert (overridden["qwen"], overridden["new"]) == ("c/d", "e/f")
    assert grid.model_aliases(["qwen=a/b"])["qwen"] == "a/b"


# -- resume ----------------------------------------------------------------------------

def test_a_killed_run_resumed_ends_with_the_same_prompts(run, scripted, tmp_path):
    out = tmp_path / "killed"
    env = {**os.environ, "APIBANK_CACHE_DIR": str(tmp_path / "cache")}
    with OpenAIStub(default=scripted, hold=0.3) as slow:
        args = optimize_args(out, slow.url, "--model", "stub-model", "--allow-any-cell", method=run.method)
        child = subprocess.Popen([sys.executable, "-m", "apibank_bench", *args], cwd=PROJECT_ROOT, env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            while child.poll() is None and not any(
                    r["event"] == "evaluation" for r in read_jsonl(out / "log.jsonl")):
                time.sleep(0.2)
        finally:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
        assert not (out / "prompts").exists(), "the run finished before it could be killed"
        resumed = subprocess.run([sys.executable, "-m", "apibank_bench", *args, "--resume"], cwd=PROJECT_ROOT,
                                 env=env, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert read_prompts(out / "prompts") == read_prompts(run.out / "prompts")
    assert json.loads((out / "final.json").read_text()) == json.loads((run.out / "final.json").read_text())
    log = read_jsonl(out / "log.jsonl")
    after = log[[r["event"] for r in log].index("resume"):]
    assert any(r["event"] == "evaluation" and r["cache_hits"] > 0 for r in after)  # replayed from the cache


def test_resume_refuses_other_arguments_and_a_fresh_start_refuses_a_used_folder(run, scripted_stub, capsys):
    out, same = run.out, ("--model", "qwen", "--model-aliases", "qwen=stub-model")
    assert cli.main(optimize_args(out, scripted_stub.url, *same, method=run.method)) == 2
    assert "--resume" in capsys.readouterr().err
    changed = optimize_args(out, scripted_stub.url, *same, "--resume", method=run.method)
    changed[changed.index("--budget") + 1] = "99"
    assert cli.main(changed) == 2
    assert "method" in capsys.readouterr().err  # the budget is part of the method's settings


# -- the pieces ------------------------------------------------------------------------

def test_evaluate_refuses_eval_instances_before_any_request(scripted_stub, apibank_root, tmp_path):
    client = ChatClient(ModelConfig(base_urls=[scripted_stub.url], model="stub-model", cache_dir=None, max_retries=0))
    cfg = RunConfig(topology="single", model="stub-model", base_url=[scripted_stub.url])
    ctx = Context(topology="single", roles=["solver"], seed_prompts={"solver": "x"}, train_ids=SPLIT["train"],
                  validation_ids=SPLIT["validation"], seed=0, budget=1, hyper={}, out_dir=tmp_path,
                  parts=RunParts(cfg, models=client, scorer=Scorer(apibank_root)),
                  events=EventLog(tmp_path / "log.jsonl", stream=None), protected_ids=EVAL_IDS)
    before = len(scripted_stub.chat_requests)
    with pytest.raises(ValueError, match="eval-set"):
        ctx.evaluate({"solver": MARKER}, [SPLIT["train"][0], EVAL_IDS[0]])
    unused = next(task_id for task_id in manifests.read_manifest(manifests.POOL_MANIFEST)["ids"]
                  if task_id not in USED and task_id not in EVAL_IDS)
    with pytest.raises(ValueError, match="outside"):
        ctx.evaluate({"solver": MARKER}, [unused])
    assert len(scripted_stub.chat_requests) == before
    rollouts = ctx.evaluate({"solver": MARKER}, SPLIT["train"])
    assert [r.task_id for r in rollouts] == SPLIT["train"] and all(r.correct for r in rollouts)
    assert all(r.agents and r.agents[0]["role"] == "solver" and "DIALOGUE SO FAR" in r.dialogue for r in rollouts)


@pytest.mark.parametrize("topology,size,expected", [
    ("single", 4, ["solver"]), ("independent", 8, ["solver"]), ("decentralized", 2, ["debater"]),
    ("centralized", 4, ["manager", "inspector_worker", "caller_worker", "validator_worker"]),
    ("sequential", 2, ["argument_planner", "verifier"]),
    ("sequential", 4, ["dialogue_reader", "schema_mapper", "argument_planner", "verifier"]),
])
def test_roles_follow_the_topology_at_its_team_size(topology, size, expected):
    found = roles(RunConfig(topology=topology, team_size=size))
    assert found == expected
    assert all(role_text(topology, role) for role in found)  # each has a packaged prompt


def test_each_hyperparameter_is_a_flag():
    args = cli.build_parser().parse_args(["optimize", "--method", "gepa", "--topology", "single", "--out", "x",
                                          "--minibatch-size", "5", "--use-merge"])
    from apibank_bench.optimize import gepa_method
    from apibank_bench.optimize.methods import hyperparameters

    values = hyperparameters(args, "gepa", gepa_method)
    assert values["minibatch_size"] == 5 and values["use_merge"] is True
    assert values["turns_per_task"] == gepa_method.HYPERPARAMETERS["turns_per_task"][1]


# -- the embedded model ------------------------------------------------------------------

#: Per method: the cell and the tiniest budget that still makes every kind of model call.
EMBEDDED_CASES = {
    "gepa": ("single", ["--budget", "3", "--minibatch-size", "1", "--no-skip-perfect-score"]),
    "maspo": ("single", ["--budget", "4", "--maspo-rounds", "1", "--steps", "1", "--minibatch", "1", "--pool", "1"]),
    "mipro": ("single", ["--budget", "1", "--num-candidates", "1", "--trial-minibatch-size", "1"]),
}


@pytest.mark.slow
@pytest.mark.parametrize("method", list(EMBEDDED_CASES))
def test_each_method_runs_on_the_embedded_model(tmp_path, method):
    topology, flags = EMBEDDED_CASES[method]
    env = {key: value for key, value in os.environ.items()
           if key not in {"OPENAI_BASE_URL", "APIBANK_BASE_URL", "APIBANK_BASE_URLS", "APIBANK_MODEL"}}
    env.update(APIBANK_MAX_TOKENS="256")
    out = tmp_path / "embedded"
    done = subprocess.run([sys.executable, "-m", "apibank_bench", "optimize", "--method", method, "--topology",
                           topology, "--out", str(out), "--train", "1", "--validation", "1", *flags,
                           "--eval-limit", "1", "--concurrency", "1", "--allow-any-cell", "--no-cache"],
                          cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    final = json.loads((out / "final.json").read_text())
    assert final["instances"] == 1
    assert (out / "prompts" / topology / "solver.txt").read_text().strip()
    log = read_jsonl(out / "log.jsonl")
    assert any(r["event"] == "ask" and r["requests"] > 0 for r in log)  # a real optimizer-model call was made
    assert json.loads((out / "config.json").read_text())["model"]["constrained"] is True


def test_a_roles_reflective_records_are_its_last_round_turns_with_the_scorer_verdict():
    from apibank_bench.optimize.context import Rollout
    from apibank_bench.optimize.gepa_method import role_records

    def turn(index, round, answer):
        seen = f"seen {index}/{round} " + "x" * 50
        return {"role": "debater", "index": index, "round": round, "answer": answer,
                "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": seen}]}

    agents = [turn(i, r, f"[A(n={i}{r})]") for r in (0, 1) for i in (2, 0, 1)]
    rollout = Rollout("t", False, "api_name", "API name mismatch: A != B", "[A(n=1)]", "[B(m=2)]", "[A(n=1)]",
                      agents, "dialogue")
    records = role_records(rollout, "debater", 2, 30)
    assert [r["Generated Outputs"] for r in records] == ["[A(n=01)]", "[A(n=11)]"]  # last round, by index
    assert all(r["Inputs"].startswith("[...]") and len(r["Inputs"]) < 40 for r in records)  # the tail is kept
    feedback = records[0]["Feedback"]
    assert "stage api_name" in feedback and "[A(n=1)]" in feedback and "Gold: [B(m=2)]" in feedback
    assert role_records(rollout, "manager", 2, 30) == []


def test_a_final_run_killed_after_its_last_row_is_summarized_on_resume(scripted_stub, tmp_path, monkeypatch):
    """Killed after the final run's last row but before its summary.json: the resume has nothing left to solve
    there, and still writes that summary and the same final.json."""
    out = tmp_path / "job"
    monkeypatch.setenv("APIBANK_CACHE_DIR", str(tmp_path / "cache"))
    args = optimize_args(out, scripted_stub.url, "--model", "qwen", "--model-aliases", "qwen=stub-model")
    assert cli.main(args) == 0
    final = json.loads((out / "final.json").read_text())
    (out / "final" / "optimized" / "summary.json").unlink()
    (out / "final.json").unlink()
    assert cli.main([*args, "--resume"]) == 0
    assert json.loads((out / "final" / "optimized" / "summary.json").read_text())["total"] == EVAL_LIMIT
    assert json.loads((out / "final.json").read_text()) == final
