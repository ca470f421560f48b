"""Commands import what they use when they run: the data, scoring and report commands (and `--help`)
never import the model layer, LangGraph, openai or an optimizer (their start-up is timed in
benchmarks/bench_startup.py; here only what is imported is checked)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from apibank_bench.core.paths import PROJECT_ROOT

#: Modules no light command may import.
HEAVY = re.compile(r"(openai|langgraph|langchain_core|agents|torch|sentence_transformers|dspy|gepa|litellm"
                   r"|apibank_bench\.(llm|agents|optimize\.(gepa_method|mipro|maspo|job|context|roles)))(\.|$)")


def imports_of(argv: list[str], env: dict) -> list[str]:
    command = [sys.executable, "-X", "importtime", "-m", "apibank_bench", *argv]
    done = subprocess.run(command, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    # -X importtime writes one line per imported module to stderr: "import time: self | cumulative | name".
    return [line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")]


@pytest.fixture(scope="module")
def folders(tmp_path_factory, apibank_root):
    """Two scored results folders (two gold answers each) for `compare`, and their answers for `score`."""
    base = tmp_path_factory.mktemp("imports")
    answers = base / "answers.jsonl"
    answers.write_text("".join(json.dumps({"id": task_id, "prediction": "[GetToday()]"}) + "\n"
                               for task_id in ("level-1::AddAgenda-AddMeeting-GetUserToken-level-2-3.jsonl::0",
                                               "level-2::AddAgenda-level-3-2.jsonl::0")), encoding="utf-8")
    env = {**os.environ, "APIBANK_ROOT": str(apibank_root)}
    for name in ("a", "b"):
        subprocess.run([sys.executable, "-m", "apibank_bench", "score", str(answers), "--out-dir", str(base / name)],
                       cwd=PROJECT_ROOT, env=env, check=True, capture_output=True)
    return base, env


@pytest.mark.parametrize("argv", [
    ["--help"], ["run", "--help"], ["optimize", "--help"], ["summary", "--level", "1", "--limit", "100"],
    ["tasks"], ["data", "verify"], ["manifests", "split", "--train", "3", "--validation", "3"],
    ["score", "{answers}", "--out-dir", "{out}"], ["compare", "{a}", "{b}"],
], ids=lambda argv: " ".join(argv[:2]))
def test_a_light_command_imports_no_model_layer_and_no_optimizer(argv, folders):
    base, env = folders
    argv = [arg.format(answers=base / "answers.jsonl", out=base / "scored", a=base / "a", b=base / "b")
            for arg in argv]
    imported = imports_of(argv, env)
    assert "apibank_bench.cli" in imported  # the trace did record the command's imports
    heavy = [name for name in imported if HEAVY.match(name)]
    assert not heavy, f"`apibank-bench {' '.join(argv)}` imported {heavy[:6]}"


@pytest.mark.parametrize("collecting", [True, False])
def test_run_imports_langgraph_with_the_collector_as_it_found_it_and_its_objects_frozen(collecting):
    script = f"""
import gc, sys
from apibank_bench.agents import import_solver_modules
from apibank_bench.core.settings import RunConfig
import_solver_modules(RunConfig(model="gold"))
assert "langgraph" not in sys.modules and gc.get_freeze_count() == 0
{"" if collecting else "gc.disable()"}
import_solver_modules(RunConfig(model="stub"))
assert "langgraph.graph" in sys.modules
assert gc.isenabled() is {collecting}, gc.isenabled()
assert gc.get_freeze_count() > 50_000, gc.get_freeze_count()
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
