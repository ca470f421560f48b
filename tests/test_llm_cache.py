"""The response cache is best-effort: it never costs an answer and never keeps a bad entry."""

from __future__ import annotations

import json
import threading
import warnings

import pytest

from apibank_bench.llm import cache as cache_module
from apibank_bench.llm import ChatClient, ModelConfig
from openai_stub import Reply, correct, tool_call

MESSAGES = [{"role": "user", "content": "What day is it?"}]


@pytest.fixture(autouse=True)
def fresh_warning(monkeypatch):
    monkeypatch.setattr(cache_module, "_warned", threading.Event())  # "once per process", per test


def client_for(url, cache_dir):
    return ChatClient(ModelConfig(base_urls=[url], model="stub-model", max_retries=0, cache_dir=cache_dir))


def entry_files(folder):
    return [path for path in folder.rglob("*") if path.is_file()]


@pytest.mark.parametrize("empty", [Reply(text=""), Reply(text="", tool_calls=[])], ids=["empty-string", "content-null"])
def test_empty_answers_are_not_cached(stub, tmp_path, empty):
    stub.push(empty)
    client = client_for(stub.url, tmp_path)
    assert client.complete(MESSAGES).text == ""
    assert entry_files(tmp_path) == []
    assert client.complete(MESSAGES).text == "[GetToday()]"  # asked again, not read back as ""
    assert len(stub.chat_requests) == 2 and len(entry_files(tmp_path)) == 1


def test_a_tool_call_answer_is_cached_with_its_tool_calls(stub, tmp_path):
    stub.push(tool_call("GetToday"))
    client = client_for(stub.url, tmp_path)
    first = client.complete(MESSAGES)
    again = client.complete(MESSAGES)
    assert first.text == "" and first.tool_calls == [{"name": "GetToday", "arguments": "{}"}]
    assert again.cached and again.tool_calls == first.tool_calls  # not read back as an empty answer
    assert len(stub.chat_requests) == 1


def test_a_cache_hit_gives_back_the_answer_it_kept(stub, tmp_path):
    stub.push(Reply(text="[GetToday()]", finish_reason="length"))
    client = client_for(stub.url, tmp_path)
    first = client.complete(MESSAGES)
    again = client_for(stub.url, tmp_path).complete(MESSAGES)  # another client: read from the disk
    kept = ("text", "prompt_tokens", "completion_tokens", "base_url", "finish_reason", "tool_calls")
    assert {name: getattr(again, name) for name in kept} == {name: getattr(first, name) for name in kept}
    assert first.prompt_tokens > 0 and first.finish_reason == "length" and first.base_url == stub.url
    assert again.cached and again.attempts == 0 and not first.cached and len(stub.chat_requests) == 1


def test_a_cache_folder_that_is_a_file_costs_no_answer_and_warns_once(stub, tmp_path):
    blocker = tmp_path / "cache"
    blocker.write_text("not a folder")
    client = client_for(stub.url, blocker)
    with pytest.warns(RuntimeWarning, match="response cache") as caught:
        answers = [client.complete(MESSAGES).text for _ in range(3)]
    assert answers == ["[GetToday()]"] * 3 and len(stub.chat_requests) == 3
    assert len(caught) == 1 and "NotADirectoryError" in str(caught[0].message)


def test_a_disk_error_on_write_costs_no_answer(stub, tmp_path, monkeypatch):
    def disk_full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cache_module.os, "fsync", disk_full)
    client = client_for(stub.url, tmp_path)
    with pytest.warns(RuntimeWarning, match="No space left"):
        assert client.complete(MESSAGES).text == "[GetToday()]"
    assert entry_files(tmp_path) == []  # the temporary file is gone too
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no second warning
        assert client.complete(MESSAGES).text == "[GetToday()]"


@pytest.mark.parametrize("bad", ['{"key": "%s"}', '{"key": "%s", "text": 5}', '{"key": "%s", "text": ""}',
                                 '{"key": "%s", "text": "x", "prompt_tokens": "many"}', "{torn", "[1, 2]"])
def test_a_malformed_entry_is_a_miss_and_is_repaired(stub, tmp_path, bad):
    client = client_for(stub.url, tmp_path)
    key = client.cache_key(client.request_body(MESSAGES))
    path = client.cache.path(key)
    path.parent.mkdir(parents=True)
    path.write_text(bad.replace("%s", key) if "%s" in bad else bad)
    first = client.complete(MESSAGES)
    assert not first.cached and first.text == "[GetToday()]"
    assert json.loads(path.read_text())["text"] == "[GetToday()]"  # overwritten by the good answer
    assert client.complete(MESSAGES).cached and len(stub.chat_requests) == 1


def test_a_lone_surrogate_answer_is_cached_and_read_back(stub, tmp_path):
    answer = "[GetToday(x='\ud800')]"
    stub.push(correct(answer))
    client = client_for(stub.url, tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert client.complete(MESSAGES).text == answer
        again = client.complete(MESSAGES)
    assert again.cached and again.text == answer and len(stub.chat_requests) == 1


def test_a_lone_surrogate_in_the_request_still_has_a_key():
    assert cache_module.request_key({"messages": [{"content": "\udfff"}]}) != cache_module.request_key({})
