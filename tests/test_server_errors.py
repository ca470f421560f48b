"""Errors that say what to do: a prompt longer than the server's context, answers that stop at max_tokens,
a server that closes connections under load."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from apibank_bench.core.paths import PROJECT_ROOT
from apibank_bench.data import manifests
from apibank_bench.llm import ChatClient, ModelConfig, ModelError
from apibank_bench.llm.http import ContextLengthError, ErrorAnswer, status_error
from apibank_bench.runs.results import read_jsonl
from openai_stub import OpenAIStub, Reply, error, reset

MESSAGES = [{"role": "user", "content": "What day is it?"}]

#: What each server answers (HTTP 400) to a request that does not fit its context, as their sources write it,
#: with the prompt and context sizes it names (tests/context_overflows.json).
OVERFLOWS = {server: (case["body"], (case["prompt_tokens"], case["context_tokens"])) for server, case in
             json.loads((Path(__file__).parent / "context_overflows.json").read_text(encoding="utf-8")).items()}


@pytest.mark.parametrize("server", sorted(OVERFLOWS))
def test_a_context_overflow_names_both_sizes_and_the_fix(server):
    body, (prompt, context) = OVERFLOWS[server]
    exc = status_error(ErrorAnswer(400, {}, body))
    assert isinstance(exc, ContextLengthError) and exc.status_code == 400
    assert (exc.prompt_tokens, exc.context_tokens) == (prompt, context)
    message = str(exc)
    assert f"the prompt ({prompt} tokens)" in message and f"the server's context ({context} tokens)" in message
    assert "--max-tokens" in message


def test_an_overflow_that_names_no_size_still_says_what_to_do():
    exc = status_error(ErrorAnswer(400, {}, '{"error": {"code": 400, "message": "the request exceeds the available '
                                            'context size, try increasing it", "type": "invalid_request_error"}}'))
    assert isinstance(exc, ContextLengthError) and (exc.prompt_tokens, exc.context_tokens) == (None, None)
    assert "a size it did not say" in str(exc) and "--max-tokens" in str(exc)


def test_other_400s_are_not_context_overflows():
    exc = status_error(ErrorAnswer(400, {}, '{"error": {"message": "Invalid grammar: unexpected token"}}'))
    assert not isinstance(exc, ContextLengthError)
    exc = status_error(ErrorAnswer(500, {}, '{"error": {"message": "context length exceeded while decoding"}}'))
    assert not isinstance(exc, ContextLengthError)


def test_the_client_reports_an_overflow_at_once_in_its_error():
    body = OVERFLOWS["llama-server"][0]
    with OpenAIStub(error(400, body=body)) as stub:
        client = ChatClient(ModelConfig(base_urls=[stub.url], model="stub-model", max_retries=3))
        with pytest.raises(ModelError) as info:
            client.complete(MESSAGES)
    assert len(stub.chat_requests) == 1  # not retried: it would not fit the next time either
    assert "ContextLengthError" in str(info.value) and "(4476 tokens)" in str(info.value)


def test_closed_connections_are_counted_with_the_requests_in_flight():
    with OpenAIStub(reset(), default=Reply()) as stub:
        client = ChatClient(ModelConfig(base_urls=[stub.url], model="stub-model", max_retries=2),
                            retry_base_delay=0.01, retry_max_delay=0.02)
        assert client.complete(MESSAGES).text
    assert (client.closed.count, client.closed.most_in_flight) == (1, 1)
    assert client.in_flight_limit() >= 1


# -- in a run ---------------------------------------------------------------------------------------------

IDS = [task_id for task_id in manifests.manifest_ids("all") if task_id.startswith("level-1::")][:10]
OVERFLOW_BODY = OVERFLOWS["vllm"][0]


def test_a_run_says_once_what_to_fix(tmp_path):
    """Two resets, one prompt too long, and answers that all stop at max_tokens."""
    lock, seen = threading.Lock(), [0]

    def reply(body: dict) -> Reply:
        with lock:
            seen[0] += 1
            number = seen[0]
        if number <= 2:
            return reset()
        if number == 3:
            return error(400, body=OVERFLOW_BODY)
        return Reply(text="[GetToday()] and then I kept talking", finish_reason="length")

    with OpenAIStub(default=reply) as stub:
        run = subprocess.run([sys.executable, "-m", "apibank_bench", "run", "--model", "stub", "--base-url", stub.url,
                              "--only", ",".join(IDS), "--limit", "0", "--no-cache", "--concurrency", "1",
                              "--out-dir", str(tmp_path)], cwd=PROJECT_ROOT, capture_output=True, text=True,
                             timeout=600)
    out = run.stdout + run.stderr
    assert run.returncode == 1, out[-3000:]  # the overflow is an error row
    rows = read_jsonl(tmp_path / "results.jsonl")
    [overflow] = [row for row in rows if row["stage"] == "error"]
    assert "(2076 tokens)" in overflow["error"] and "(2048 tokens)" in overflow["error"]
    warnings = [line for line in out.splitlines() if line.startswith("apibank: warning:")]
    assert sum("does not fit the server's context" in line for line in warnings) == 1, out[-3000:]
    assert sum("stopped at max_tokens" in line for line in warnings) == 1, out[-3000:]
    [cut] = [line for line in warnings if "stopped at max_tokens" in line]  # no grammar: a server taken for hosted
    assert "the fix is the grammar" in cut and "--server-kind llama.cpp --constrained" in cut, cut
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["answers_at_max_tokens"] == {"answers": 9, "at_max_tokens": 9}
    assert summary["closed_connections"]["count"] == 2
    assert "closes connections under load" in out and "the in-flight limit that held" in out


def test_a_run_whose_server_answers_no_choices_retries_then_writes_an_error_row_in_json(tmp_path):
    """A 200 with `"choices": []` is retried (here once, `--max-retries 1`), then the instance is an error row
    that quotes the body as JSON."""
    empty = Reply(raw=b'{"id": "x", "choices": []}', headers={"Content-Type": "application/json"})
    with OpenAIStub(default=empty) as stub:
        run = subprocess.run([sys.executable, "-m", "apibank_bench", "run", "--model", "stub", "--base-url", stub.url,
                              "--only", IDS[0], "--limit", "0", "--no-cache", "--max-retries", "1",
                              "--out-dir", str(tmp_path)], cwd=PROJECT_ROOT, capture_output=True, text=True,
                             timeout=600)
        requests = len(stub.chat_requests)
    out = run.stdout + run.stderr
    [row] = read_jsonl(tmp_path / "results.jsonl")
    assert row["stage"] == "error" and run.returncode == 1, out[-3000:]
    assert requests == 2 and "gave up after 2 attempts" in row["error"], row["error"]
    assert '"choices": []' in row["error"] and "'choices'" not in row["error"], row["error"]
