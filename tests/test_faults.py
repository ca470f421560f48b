"""The chat client against a faulty endpoint: a failure is a ModelError after bounded retries, never an answer."""

from __future__ import annotations

import pytest

from apibank_bench.llm import ChatClient, ModelConfig, ModelError
from openai_stub import (OpenAIStub, correct, echo_key, empty, error, malformed, oversized, reset, slow,
                         surrogate)

MESSAGES = [{"role": "user", "content": "What day is it?"}]
KEY = "fault-test-key-8d1e"
RETRIES = 2


def client_for(stub: OpenAIStub, waits: list[float], **overrides) -> ChatClient:
    settings = dict(base_urls=[stub.url], model="stub-model", api_key=KEY, timeout=5.0, max_retries=RETRIES)
    settings.update(overrides)
    return ChatClient(ModelConfig(**settings), retry_base_delay=0.5, retry_max_delay=2.0, sleep=waits.append)


def failure(client: ChatClient) -> str:
    with pytest.raises(ModelError) as info:
        client.complete(MESSAGES)
    completion = info.value.completion
    assert completion.text == "" and completion.error == str(info.value)
    return completion.error


@pytest.mark.parametrize("fault", [
    error(500, body="<html>upstream exploded</html>"),
    error(502, body=""),
    error(503, {"Retry-After": "1"}),
    error(429),
    error(408),
    reset(),
    slow(2.0),
    malformed(),
], ids=["500-html", "502-empty-body", "503-retry-after", "429", "408", "connection-reset", "timeout", "malformed-200"])
def test_retryable_faults_end_in_a_model_error_after_bounded_retries(fault):
    waits: list[float] = []
    with OpenAIStub(default=fault) as stub:
        error_text = failure(client_for(stub, waits, timeout=0.5))
        assert len(stub.chat_requests) == RETRIES + 1 and len(waits) == RETRIES
    assert f"gave up after {RETRIES + 1} attempts" in error_text
    assert all(0 < wait <= 2.0 for wait in waits)


@pytest.mark.parametrize("fault", [error(400, body='{"error": {"message": "bad request"}}'), error(404),
                                   error(401)], ids=["400", "404", "401"])
def test_other_faults_end_in_a_model_error_at_once(fault):
    waits: list[float] = []
    with OpenAIStub(fault) as stub:
        error_text = failure(client_for(stub, waits))
        assert len(stub.chat_requests) == 1 and waits == []
    assert "gave up" not in error_text


@pytest.mark.parametrize("fault", [reset(), error(500), slow(2.0)], ids=["reset", "500", "timeout"])
def test_a_passing_fault_costs_one_retry(fault):
    waits: list[float] = []
    with OpenAIStub(fault) as stub:
        out = client_for(stub, waits, timeout=0.5).complete(MESSAGES)
    assert out.text == "[GetToday()]" and out.attempts == 2 and len(waits) == 1


def test_an_error_body_echoing_the_key_is_not_repeated():
    with OpenAIStub(echo_key()) as stub:
        error_text = failure(client_for(stub, []))
    assert "invalid credentials: Bearer ***" in error_text and KEY not in error_text


def test_a_dead_server_is_an_error_not_an_answer():
    waits: list[float] = []
    with OpenAIStub(dead_after=1) as stub:
        client = client_for(stub, waits)
        assert client.complete(MESSAGES).text == "[GetToday()]"
        first = failure(client)  # reset, then refused
        later = failure(client)  # refused from the start
        assert len(stub.chat_requests) == 2  # nothing reached it after it died
    assert "gave up after 3 attempts" in first and "Connection" in later


def test_content_null_is_an_empty_answer_not_an_error():
    with OpenAIStub(empty()) as stub:
        out = client_for(stub, []).complete(MESSAGES)
    assert out.text == "" and out.error is None and out.attempts == 1


def test_surrogates_and_oversized_answers_arrive_whole():
    big = oversized(2_000_000)
    with OpenAIStub(surrogate("[GetToday(x='\ud800')]"), big) as stub:
        client = client_for(stub, [])
        assert client.complete(MESSAGES).text == "[GetToday(x='\ud800')]"
        assert client.complete(MESSAGES).text == big.text


def test_the_next_request_after_a_failure_is_unaffected():
    with OpenAIStub(error(500), error(500), error(500), correct("[GetToday()]")) as stub:
        client = client_for(stub, [])
        failure(client)
        assert client.complete(MESSAGES).text == "[GetToday()]"
        stats = client.stats.snapshot()
    assert (stats["calls"], stats["errors"], stats["requests"]) == (2, 1, 4)


def test_a_lone_surrogate_in_the_conversation_can_still_be_sent():
    with OpenAIStub() as stub:
        out = client_for(stub, []).complete([{"role": "user", "content": "an earlier answer: [F(x='\udfff')]"}])
        [sent] = stub.chat_requests
    assert out.text == "[GetToday()]"
    assert sent["messages"][0]["content"] == "an earlier answer: [F(x='\ufffd')]"
