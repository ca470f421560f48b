"""Secrets never reach an output: keys, bearer tokens and URL credentials are masked."""

import pytest

from apibank_bench.agents.models import describe_model
from apibank_bench.core.settings import RunConfig
from apibank_bench.llm import ChatClient, ModelConfig, ModelError
from apibank_bench.core.redact import redact
from openai_stub import OpenAIStub, error

KEY = "local-test-key-4f9a2c"


@pytest.mark.parametrize("text, expected", [
    ("Incorrect API key provided: sk-proj-abc123XYZ456.", "Incorrect API key provided: sk-***."),
    ("Authorization: Bearer abc.def-ghi==", "Authorization: Bearer ***"),
    ("http://user:secret@host:8080/v1", "http://***@host:8080/v1"),
    ("https://token@example.com/v1", "https://***@example.com/v1"),
    ("GET /v1/models?api_key=zzz&x=1", "GET /v1/models?api_key=***&x=1"),
    ('{"api_key": "hunter22"}', '{"api_key": "***"}'),
    (f"you sent {KEY}, which is wrong", "you sent ***, which is wrong"),
])
def test_secrets_are_masked(text, expected):
    assert redact(text, [KEY]) == expected


@pytest.mark.parametrize("text", ["http://127.0.0.1:8080/v1", "[AddAlarm(time='2023-03-05 14:00:00')]",
                                  "the key=value pair", "a risk-free task"])
def test_ordinary_text_is_left_alone(text):
    assert redact(text, ["", None, "x"]) == text  # empty and very short "secrets" are ignored


def test_an_endpoint_error_echoing_the_key_is_reported_without_it():
    with OpenAIStub(error(401, body=f'{{"error": {{"message": "bad key {KEY}"}}}}')) as stub:
        client = ChatClient(ModelConfig(base_urls=[stub.url], model="m", api_key=KEY, max_retries=0))
        with pytest.raises(ModelError) as info:
            client.complete([{"role": "user", "content": "hi"}])
    message = info.value.completion.error
    assert "401" in message and "bad key ***" in message and KEY not in message and KEY not in str(info.value)


def test_the_summary_shows_base_urls_without_credentials(monkeypatch):
    monkeypatch.delenv("APIBANK_BASE_URLS", raising=False)
    described = describe_model(RunConfig(model="m", base_url=["http://user:secret@example.com:9/v1"]))
    assert described["base_urls"] == ["http://***@example.com:9/v1"]


def test_the_default_model_keeps_its_endpoint_when_a_role_is_embedded(monkeypatch):
    """`--base-url U --model m --model-role solver#1=embedded`: the summary's model is m at U (its own server
    kind and fields), the embedded model only the role's."""
    monkeypatch.delenv("APIBANK_BASE_URLS", raising=False)
    described = describe_model(RunConfig(model="m", base_url=["http://example.com:9/v1"], topology="independent",
                                         team_size=2, model_role=["solver#1=embedded"]))
    assert described["base_urls"] == ["http://example.com:9/v1"]
    assert described["server_kind"] != "llama.cpp" and "repeat_penalty" not in described["request_fields"]
    assert described["role_models"]["solver#1"]["base_url"] == "embedded llama.cpp server"
