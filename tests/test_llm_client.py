"""ChatClient against a real local HTTP stub of the OpenAI protocol (127.0.0.1 only)."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from apibank_bench.llm import ChatClient, ModelConfig, ModelError, RetryPolicy
from apibank_bench.llm.http import APIConnectionError
from apibank_bench.llm.limit import Limiter
from openai_stub import OpenAIStub, Reply, correct, error, malformed, slow, wrong

MESSAGES = [{"role": "system", "content": "You call APIs."}, {"role": "user", "content": "What day is it?"}]


def make_client(*urls: str, **overrides) -> ChatClient:
    settings = dict(base_urls=list(urls), model="stub-model", api_key="test", timeout=5.0, max_retries=3)
    settings.update(overrides)
    return ChatClient(ModelConfig(**settings), retry_base_delay=0.01, retry_max_delay=0.05)


def test_correct_answer_records_tokens_latency_and_request(stub):
    stub.push(correct("[GetToday()]"))
    client = make_client(stub.url, seed=7, temperature=0.3, top_p=0.8, max_tokens=99, extra_body={"grammar": "g"})
    out = client.complete(MESSAGES)
    assert out.text == "[GetToday()]"
    assert (out.prompt_tokens, out.completion_tokens) == (11, 7)
    assert out.latency_s > 0 and out.attempts == 1 and not out.cached and out.error is None
    assert out.base_url == stub.url and out.finish_reason == "stop"
    [sent] = stub.chat_requests
    assert sent["messages"] == MESSAGES and sent["model"] == "stub-model"
    assert (sent["seed"], sent["temperature"], sent["top_p"], sent["max_tokens"]) == (7, 0.3, 0.8, 99)
    assert sent["grammar"] == "g"
    assert client.stats.snapshot()["prompt_tokens"] == 11


def test_wrong_answer_is_returned_as_is(stub):
    stub.push(wrong("[AddAlarm(time='never')]"))
    assert make_client(stub.url).complete(MESSAGES).text == "[AddAlarm(time='never')]"


def test_call_extra_body_and_seed_override_are_sent(stub):
    client = make_client(stub.url, extra_body={"a": 1, "b": 1})
    client.complete(MESSAGES, extra_body={"b": 2}, seed=42)
    [sent] = stub.chat_requests
    assert (sent["a"], sent["b"], sent["seed"]) == (1, 2, 42)


def test_500_then_success_costs_exactly_one_retry(stub):
    stub.push(error(500), correct("[GetToday()]"))
    client = make_client(stub.url)
    out = client.complete(MESSAGES)
    assert out.text == "[GetToday()]" and out.error is None and out.attempts == 2
    assert len(stub.chat_requests) == 2
    stats = client.stats.snapshot()
    assert (stats["retries"], stats["errors"], stats["requests"], stats["calls"]) == (1, 0, 2, 1)


def test_429_is_retried(stub):
    stub.push(error(429, {"Retry-After": "0"}), error(429), correct("[GetToday()]"))
    out = make_client(stub.url).complete(MESSAGES)
    assert out.text == "[GetToday()]" and out.attempts == 3
    assert len(stub.chat_requests) == 3


def test_400_fails_without_retry_and_records_the_error(stub):
    stub.push(error(400), correct())
    client = make_client(stub.url)
    with pytest.raises(ModelError) as info:
        client.complete(MESSAGES)
    failed = info.value.completion
    assert failed.attempts == 1 and failed.text == ""
    assert "400" in failed.error and "400" in str(info.value)
    assert len(stub.chat_requests) == 1
    assert client.stats.snapshot()["errors"] == 1
    # The failure belongs to that request only: the next one works.
    assert client.complete(MESSAGES).text == "[GetToday()]"


def test_timeout_is_retried(stub):
    stub.push(slow(2.0), correct("[GetToday()]"))
    out = make_client(stub.url, timeout=0.5).complete(MESSAGES)
    assert out.text == "[GetToday()]" and out.attempts == 2
    assert len(stub.chat_requests) == 2


def test_retries_are_bounded(stub):
    stub.push(*[error(503)] * 5)
    with pytest.raises(ModelError) as info:
        make_client(stub.url, max_retries=2).complete(MESSAGES)
    assert info.value.completion.attempts == 3 and "gave up after 3 attempts" in info.value.completion.error
    assert len(stub.chat_requests) == 3


def test_a_body_that_is_not_json_is_retried_as_a_transient_failure(stub):
    stub.push(malformed(), correct())
    out = make_client(stub.url).complete(MESSAGES)
    assert out.text == "[GetToday()]" and out.attempts == 2
    assert len(stub.chat_requests) == 2


def test_connection_refused_is_retried_then_reported():
    with OpenAIStub() as gone:
        url = gone.url
    with pytest.raises(ModelError) as info:
        make_client(url, max_retries=1).complete(MESSAGES)
    assert info.value.completion.attempts == 2 and "Connection" in info.value.completion.error


def test_in_flight_cap_holds_across_threads_and_clients():
    with OpenAIStub(hold=0.15) as server:
        limiter = Limiter(2)  # one ceiling (and one learned limit per endpoint) shared by both clients
        clients = [ChatClient(ModelConfig(base_urls=[server.url], model="m"), limiter=limiter) for _ in range(2)]
        errors: list[BaseException] = []

        def work(i: int) -> None:
            try:
                clients[i % 2].complete([{"role": "user", "content": f"q{i}"}])
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        assert len(server.chat_requests) == 8
        assert server.max_concurrent == 2 == limiter.peak  # the cap was reached and never exceeded
        assert limiter.active == 0  # every slot was given back


def test_a_rate_limited_endpoint_lowers_the_limit_of_the_client():
    """Three 429s for one request, each sent after the last cut (a new round trip): 8 halved three times."""
    with OpenAIStub(*[error(429, {"Retry-After": "0"})] * 3) as server:
        client = make_client(server.url, max_retries=5, max_in_flight=16)
        assert client.complete(MESSAGES).text
    (limit,) = client.limiter.endpoints.values()
    assert [n for _, n in limit.changes[:4]] == [8, 4, 2, 1]  # then regained in slow start (+1 per answer)
    assert limit.limit == 2 and client.limiter.ceiling == 16


def test_identical_requests_in_flight_at_once_are_sent_once(tmp_path):
    with OpenAIStub(hold=0.3) as server:
        client = make_client(server.url, cache_dir=tmp_path)
        answers: list = []
        threads = [threading.Thread(target=lambda: answers.append(client.complete(MESSAGES))) for _ in range(5)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert len(server.chat_requests) == 1
    assert len(answers) == 5 and len({answer.text for answer in answers}) == 1
    assert sum(not answer.cached for answer in answers) == 1


def test_cache_hit_makes_no_request_and_seed_is_part_of_the_key(stub, tmp_path):
    client = make_client(stub.url, cache_dir=tmp_path)
    first = client.complete(MESSAGES)
    again = client.complete(MESSAGES)
    assert len(stub.chat_requests) == 1
    assert again.cached and not first.cached and again.attempts == 0
    assert (again.text, again.prompt_tokens, again.completion_tokens) == (first.text, 11, 7)
    client.complete(MESSAGES, seed=1)
    assert len(stub.chat_requests) == 2
    client.complete(MESSAGES, extra_body={"grammar": "x"})
    assert len(stub.chat_requests) == 3
    # A new client (a resumed run) reads the same files.
    assert make_client(stub.url, cache_dir=tmp_path).complete(MESSAGES).cached
    assert len(stub.chat_requests) == 3
    files = sorted(tmp_path.rglob("*"))
    entries = [f for f in files if f.is_file()]
    assert len(entries) == 3 and all(f.suffix == ".json" for f in entries)  # no temp files left
    entry = json.loads(entries[0].read_text())
    assert entry["text"] == "[GetToday()]" and entry["request"]["model"] == "stub-model"
    assert client.stats.snapshot()["cache_hits"] == 1


def test_errors_are_not_cached(stub, tmp_path):
    stub.push(error(400))
    client = make_client(stub.url, cache_dir=tmp_path)
    with pytest.raises(ModelError):
        client.complete(MESSAGES)
    assert client.complete(MESSAGES).text == "[GetToday()]"
    assert len(stub.chat_requests) == 2


def test_cache_off_always_asks(stub):
    client = make_client(stub.url, cache_dir=None)
    assert client.cache is None
    client.complete(MESSAGES)
    out = client.complete(MESSAGES)
    assert not out.cached and len(stub.chat_requests) == 2


def test_round_robin_alternates_between_two_servers():
    with OpenAIStub() as a, OpenAIStub(hold=0.05) as b:
        client = make_client(a.url, b.url, routing="round_robin")
        used = [client.complete([{"role": "user", "content": str(i)}]).base_url for i in range(6)]
        assert used == [a.url, b.url] * 3
        assert len(a.chat_requests) == len(b.chat_requests) == 3


def test_routing_by_load_sends_requests_in_flight_mostly_to_the_faster_server():
    with OpenAIStub(hold=0.02) as fast, OpenAIStub(hold=0.2) as slow:
        client = make_client(fast.url, slow.url, max_in_flight=8)
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda i: client.complete([{"role": "user", "content": str(i)}]), range(80)))
        counts = client.router.snapshot()
        fast_part, slow_part = counts[fast.url], counts[slow.url]
    assert fast_part["requests"] + slow_part["requests"] == 80
    assert fast_part["requests"] > 3 * slow_part["requests"] > 0
    assert slow_part["ewma_latency_s"] > fast_part["ewma_latency_s"]


def test_retry_moves_to_the_next_server():
    with OpenAIStub(error(500)) as a, OpenAIStub() as b:
        out = make_client(a.url, b.url).complete(MESSAGES)
        assert out.attempts == 2 and out.base_url == b.url
        assert len(a.chat_requests) == len(b.chat_requests) == 1


def test_client_needs_url_and_model():
    with pytest.raises(ValueError):
        ChatClient(ModelConfig(model="m"))
    with pytest.raises(ValueError):
        ChatClient(ModelConfig(base_urls=["http://127.0.0.1:9/v1"]))


def test_fold_system_moves_the_system_prompt_into_the_first_user_turn(stub):
    make_client(stub.url, fold_system=True).complete(MESSAGES + [{"role": "assistant", "content": "x"}])
    [sent] = stub.chat_requests
    assert sent["messages"] == [
        {"role": "user", "content": "You call APIs.\n\nWhat day is it?"},
        {"role": "assistant", "content": "x"},
    ]


def test_the_default_cap_is_max_in_flight():
    with OpenAIStub(hold=0.15) as server:
        client = ChatClient(ModelConfig(base_urls=[server.url], model="m", max_in_flight=3))
        threads = [threading.Thread(target=client.complete, args=([{"role": "user", "content": str(i)}],))
                   for i in range(7)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert server.max_concurrent == 3 and len(server.chat_requests) == 7


def test_retries_wait_with_backoff_and_honour_retry_after_up_to_the_cap(stub):
    waits: list[float] = []
    stub.push(error(503), error(429, {"Retry-After": "7"}), error(429, {"Retry-After": "999"}), correct())
    config = ModelConfig(base_urls=[stub.url], model="stub-model", max_retries=5)
    out = ChatClient(config, retry_base_delay=0.5, retry_max_delay=10.0, sleep=waits.append).complete(MESSAGES)
    assert out.text == "[GetToday()]" and out.attempts == 4
    assert 0.5 <= waits[0] <= 1.0  # the first backoff: base, plus up to base of jitter
    assert waits[1:] == [7.0, 10.0]  # Retry-After when longer than the backoff, never above the cap


def test_429s_are_rate_limits_with_the_time_waited_not_errors(stub):
    waits: list[float] = []
    stub.push(error(503), error(429, {"Retry-After": "7"}), error(429, {"Retry-After": "3"}), correct())
    config = ModelConfig(base_urls=[stub.url], model="stub-model", max_retries=5)
    client = ChatClient(config, retry_base_delay=0.5, retry_max_delay=10.0, sleep=waits.append)
    assert client.complete(MESSAGES).error is None
    report = client.endpoint_report()[stub.url]
    # the 503 is an error; the two 429s are rate limits, with the waits after them (7 s, then max(backoff, 3 s))
    assert (report["requests"], report["errors"], report["rate_limited"]) == (4, 1, 2)
    assert report["rate_limit_wait_s"] == round(waits[1] + waits[2], 3) and waits[1] == 7.0


def test_retry_after_as_an_http_date_is_honoured(stub):
    waits: list[float] = []
    stub.push(error(503, {"Retry-After": "Wed, 21 Oct 2099 07:28:00 GMT"}), correct())
    config = ModelConfig(base_urls=[stub.url], model="stub-model", max_retries=1)
    ChatClient(config, retry_base_delay=0.01, retry_max_delay=5.0, sleep=waits.append).complete(MESSAGES)
    assert waits == [5.0]


def test_the_policy_is_usable_on_its_own():
    calls: list[int] = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise APIConnectionError()
        return "done"

    waits: list[float] = []
    assert RetryPolicy(max_retries=2, base_delay=0.1, sleep=waits.append).call(flaky) == "done"
    assert 0.1 <= waits[0] <= 0.2 and 0.2 <= waits[1] <= 0.3  # doubling backoff, plus up to the base of jitter
    calls.clear()
    with pytest.raises(APIConnectionError):
        RetryPolicy(max_retries=1, sleep=waits.append).call(flaky)
    assert len(calls) == 2
    with pytest.raises(KeyError):  # not a retryable error: raised at once
        RetryPolicy(sleep=waits.append).call(lambda: {}["x"])


@pytest.mark.parametrize("usage", [None, "n/a", {"prompt_tokens": "12", "completion_tokens": None}, [1, 2]],
                         ids=["absent", "a-string", "not-numbers", "a-list"])
def test_an_answer_without_readable_usage_is_an_answer_with_no_tokens(stub, usage):
    body = {"choices": [{"message": {"role": "assistant", "content": "[GetToday()]"}, "finish_reason": "stop"}]}
    if usage is not None:
        body["usage"] = usage
    stub.push(Reply(raw=json.dumps(body).encode(), headers={"Content-Type": "application/json"}))
    out = make_client(stub.url).complete(MESSAGES)
    assert (out.text, out.error, out.prompt_tokens, out.completion_tokens) == ("[GetToday()]", None, 0, 0)


NOT_COMPLETIONS = [{"choices": []}, {"choices": [{"message": {"content": 5}}]}, {"error": "x"}, [1]]
NOT_COMPLETION_IDS = ["no-choice", "content-not-text", "no-choices", "a-list"]


def _raw(body) -> Reply:
    return Reply(raw=json.dumps(body).encode(), headers={"Content-Type": "application/json"})


@pytest.mark.parametrize("body", NOT_COMPLETIONS, ids=NOT_COMPLETION_IDS)
def test_a_200_that_is_not_a_chat_completion_is_retried_as_a_transient_failure(stub, body):
    """An empty `choices` (a proxy's or a content filter's hiccup) is asked again, and the next answer counts."""
    stub.push(_raw(body), correct())
    out = make_client(stub.url).complete(MESSAGES)
    assert out.text == "[GetToday()]" and out.error is None and out.attempts == 2
    assert len(stub.chat_requests) == 2


@pytest.mark.parametrize("body", NOT_COMPLETIONS, ids=NOT_COMPLETION_IDS)
def test_a_200_that_is_never_a_chat_completion_is_an_error_quoting_it_in_json(body):
    """Retries are bounded (max_retries); the error quotes the body as JSON, not as Python's repr."""
    with OpenAIStub(default=_raw(body)) as server:
        with pytest.raises(ModelError) as info:
            make_client(server.url, max_retries=2).complete(MESSAGES)
        assert len(server.chat_requests) == 3
    error_text = info.value.completion.error
    assert error_text.startswith("gave up after 3 attempts: MalformedResponse: not a chat completion: ")
    quoted = error_text.split("not a chat completion: ", 1)[1]
    assert json.loads(quoted) == body, error_text


def test_the_body_on_the_wire_is_the_one_the_openai_sdk_sends(stub):
    """What the reference's SDK client would send for the same request, field for field."""
    import openai

    client = make_client(stub.url, server_kind="vllm", extra_body={"top_k": 20})
    body = client.request_body(MESSAGES, seed=7, extra_body={"guided_grammar": "root ::= \"[\""})
    client.complete(MESSAGES, seed=7, extra_body={"guided_grammar": "root ::= \"[\""})
    fields = {key: value for key, value in body.items() if key != "extra_body"}
    openai.OpenAI(base_url=stub.url, api_key="test", max_retries=0).chat.completions.create(
        **fields, extra_body=body["extra_body"])
    ours, sdk = stub.chat_requests
    assert ours == sdk and ours["repetition_penalty"] == 1.05 and ours["top_k"] == 20 and ours["seed"] == 7


def test_a_redirect_is_an_error_and_is_not_followed(stub):
    """As with the SDK's client: a 3xx is the answer; the chat request is not sent on to the Location."""
    with OpenAIStub() as elsewhere:
        stub.push(error(302, headers={"Location": elsewhere.url + "/chat/completions"}))
        with pytest.raises(ModelError) as info:  # (urllib alone would follow a 302 with a GET)
            make_client(stub.url, max_retries=0).complete(MESSAGES)
        assert "Error code: 302" in info.value.completion.error
        assert elsewhere.requests == []


class _RecordingProxy:
    """A forward HTTP proxy on 127.0.0.1 that passes each request on and remembers the target it was asked for."""

    def __init__(self) -> None:
        import http.server
        import urllib.request

        self.targets: list[str] = []
        proxy = self
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                proxy.targets.append(self.path)  # a proxy is asked for the absolute URL
                body = self.rfile.read(int(self.headers["Content-Length"]))
                forwarded = urllib.request.Request(self.path, data=body, method="POST",
                                                   headers={"Content-Type": "application/json"})
                with direct.open(forwarded, timeout=5) as answer:
                    payload = answer.read()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.mark.parametrize("bypass", [False, True])
def test_requests_go_through_the_proxy_the_environment_names(stub, monkeypatch, bypass):
    """HTTP_PROXY is honoured and NO_PROXY exempts a host, as in every other urllib request of the suite."""
    proxy = _RecordingProxy()
    try:
        for name in ("HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("http_proxy", proxy.url)
        if bypass:
            monkeypatch.setenv("no_proxy", "127.0.0.1")
        stub.push(correct("[GetToday()]"))
        assert make_client(stub.url).complete(MESSAGES).text == "[GetToday()]"
        assert proxy.targets == ([] if bypass else [stub.url + "/chat/completions"])
        assert len(stub.chat_requests) == 1
    finally:
        proxy.close()


@pytest.mark.parametrize("kind, initial", [("vllm", 256), ("sglang", 256), ("llama.cpp", 8), ("openai", 8)])
def test_the_limit_starts_wide_only_at_a_server_known_to_batch(kind, initial):
    """vLLM and SGLang work on up to 256 completions at once (vLLM's default batch), which is where their limit
    starts and, unless --max-in-flight says otherwise, its ceiling; llama.cpp's slots, Ollama or an unknown server
    may serve one at a time, where a wide start would queue slow completions past the timeout."""
    with OpenAIStub() as server:
        client = make_client(server.url, server_kind=kind)
        client.complete(MESSAGES)
    (limit,) = client.limiter.endpoints.values()
    assert limit.changes[0] == (0.0, initial)
