"""A dead endpoint stops the run in seconds: the model layer's breaker ends every wait to retry, and a
team instance whose member failed for good asks nothing more (issue 20, finding 6)."""

from __future__ import annotations

import json
import threading

import pytest

from apibank_bench.agents import build_solver
from apibank_bench.core import settings
from apibank_bench.data.tasks import get_task
from apibank_bench.llm import ChatClient, ModelConfig, ModelError
from apibank_bench.llm.breaker import Breaker
from apibank_bench.runs.instances import score, solve
from apibank_bench.runs.results import read_jsonl
from apibank_bench.scoring import Scorer
from openai_stub import OpenAIStub, Reply, correct, error, reset
from helpers import EVAL_IDS, mixed, run_command

MESSAGES = [{"role": "user", "content": "What day is it?"}]
#: Long enough that a wait which is not cut short would hold a test up for minutes.
LONG_WAIT = 60.0


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def client_for(stub: OpenAIStub, *, down_after: float = 0.0, retries: int = 5, clock: Clock | None = None,
               **kwargs) -> ChatClient:
    """A client whose breaker reads `clock` (the simulated time an endpoint has been failing)."""
    config = ModelConfig(base_urls=[stub.url], model="stub-model", max_retries=retries, timeout=5.0,
                         down_after=down_after)
    breaker = Breaker(down_after, clock=clock) if clock is not None else None
    return ChatClient(config, retry_base_delay=LONG_WAIT, retry_max_delay=LONG_WAIT, breaker=breaker, **kwargs)


def test_a_tripped_breaker_ends_every_wait_to_retry_and_refuses_new_requests():
    tripped: list[str] = []
    errors: list[str] = []
    clock = Clock()
    with OpenAIStub(default=reset()) as stub:
        client = client_for(stub, down_after=20, clock=clock)
        client.breaker.on_trip(tripped.append)

        def ask(question: str) -> None:
            with pytest.raises(ModelError) as info:
                client.complete([{"role": "user", "content": question}])
            errors.append(str(info.value))

        first = threading.Thread(target=ask, args=("first",))
        first.start()
        while client.waiting < 1:  # its first attempt failed at 0 s: it waits a minute to retry
            first.join(0.01)
        clock.now = 25.0  # no success since, and this request fails too: the endpoint is down
        ask("second")
        first.join()
        assert len(stub.chat_requests) == 2  # one attempt each: the first request's wait was cut short
        with pytest.raises(ModelError, match="the run was stopped"):
            client.complete([{"role": "user", "content": "another question"}])
        assert len(stub.chat_requests) == 2  # nothing more was sent
    assert len(tripped) == 1 and "answered no model request for 25 s while 2 attempts failed" in tripped[0]
    assert len(errors) == 2 and all("the run was stopped" in text for text in errors)
    assert client.waiting == 0


def test_a_success_resets_the_window_and_429_does_not_count():
    clock = Clock()

    def wait(seconds: float) -> None:
        clock.now += 15.0  # every retry 15 s after the last attempt: two failures in a row span 15 s

    script = [error(500), error(500), correct(), error(429), error(429), error(500), correct(), error(500), correct()]
    with OpenAIStub(*script) as stub:
        client = client_for(stub, down_after=20, clock=clock, sleep=wait)
        for _ in range(3):
            assert client.complete(MESSAGES).text == "[GetToday()]"
    assert client.breaker.reason is None and clock.now == 6 * 15.0  # 429s at 45 and 60 s, a 500 at 75 s: alive


def test_a_burst_shorter_than_the_window_stops_nothing_however_many_requests_fail():
    clock = Clock()
    breaker = Breaker(20, clock=clock)
    tokens = [breaker.sent() for _ in range(128)]
    for i, token in enumerate(tokens):  # 128 in flight all fail within 19 s
        clock.now = i * 19 / 127
        breaker.done(token, "HTTP 503")
    breaker.done(breaker.sent())  # then an answer
    clock.now = 30.0
    breaker.done(breaker.sent(), "HTTP 503")  # a failure 11 s after that answer: a new window
    assert breaker.reason is None


def test_a_dead_endpoint_trips_the_breaker_once_the_window_has_passed():
    clock = Clock()
    breaker = Breaker(20, clock=clock)
    for second in range(0, 20, 2):
        clock.now = float(second)
        breaker.done(breaker.sent(), "Connection refused")
    assert breaker.reason is None  # 18 s of failures
    clock.now = 21.0
    breaker.done(breaker.sent(), "Connection refused")
    assert breaker.reason and "for 21 s while 11 attempts failed (last: Connection refused)" in breaker.reason


def test_a_slow_endpoint_still_answering_an_older_request_is_not_down():
    """Failures for minutes, but a request sent before they began is still being answered: a slow server
    working on it (one completion at a time) is alive; once it ends too, the endpoint is down."""
    clock = Clock()
    breaker = Breaker(20, clock=clock)
    slow = breaker.sent()
    for second in range(1, 300, 5):
        clock.now = float(second)
        breaker.done(breaker.sent(), "HTTP 503")
    assert breaker.reason is None
    breaker.done(slow, "Request timed out.")
    assert breaker.reason is not None


def test_a_window_of_zero_never_trips():
    clock = Clock()
    breaker = Breaker(0, clock=clock)
    for second in range(1000):
        clock.now = float(second)
        breaker.done(breaker.sent(), "HTTP 500")
    assert breaker.reason is None


def test_requests_waiting_to_retry_are_counted_for_the_progress_line():
    seen: list[int] = []
    with OpenAIStub(error(503), error(503)) as stub:
        client = client_for(stub, sleep=lambda seconds: seen.append(client.waiting))
        assert client.complete(MESSAGES).attempts == 3
    assert seen == [1, 1] and client.waiting == 0


def test_the_progress_line_shows_requests_waiting_to_retry_and_the_limit():
    from types import SimpleNamespace

    from apibank_bench.plugin.progress import Progress
    from apibank_bench.runs.benchmark_run import BenchmarkRun
    from apibank_bench.runs.parts import RunParts

    class Reporter:
        lines: list[str] = []
        currentfspath = None

        def ensure_newline(self):
            pass

        def write(self, line, **_):
            self.lines.append(line)

    class Client:
        limiter = type("Limiter", (), {"active": 2, "limit": 6})()
        waiting = 31

    config = SimpleNamespace(pluginmanager=SimpleNamespace(get_plugin=lambda name: Reporter()))
    cfg = settings.resolve(lambda s: None)
    run = BenchmarkRun(cfg, parts=RunParts(cfg, models=Client()))
    run.selection.total, run.tally.done, run.tally.errors, run.running_since = 100, 10, 10, 0.0
    Progress(config, run, quiet=False).plain()
    assert "2 requests in flight (limit 6), 31 waiting to retry" in Reporter.lines[-1]  # the learned limit too


def _debate(stub: OpenAIStub, root, retries: int = 1):
    """A debate of 4 over 3 rounds in all (the reference's R): 12 requests."""
    cfg = settings.resolve(lambda s: {"topology": "decentralized", "team_size": "4", "rounds": "3",
                                      "base_url": stub.url, "model": "stub-model", "cache": "false"}.get(s.name))
    client = client_for(stub, retries=retries)
    return build_solver(cfg, client), Scorer(root), client


def test_a_team_asks_nothing_more_once_a_members_request_failed_for_good(apibank_root):
    """Member 0 of the first round gets a 400 (final at once); member 1 gets 500s and would retry."""
    def reply(body: dict) -> Reply:
        return {0: error(400, body='{"error": {"message": "bad member"}}'), 1: error(500)}.get(body["seed"], correct())

    task = get_task(EVAL_IDS[0], root=apibank_root)
    with OpenAIStub(default=reply, hold=0.2) as stub:
        solver, scorer, client = _debate(stub, apibank_root, retries=3)
        result = score(solve(task, solver), scorer)
        seeds = [body["seed"] for body in stub.chat_requests]
    assert result.is_error and "HTTP 400" in result.score.error and "bad member" in result.score.error
    assert sorted(seeds) == [0, 1, 2, 3]  # the first round only, and member 1 never retried (not 12 requests)
    trace = result.payload["trace"]["agents"]
    assert [turn["round"] for turn in trace] == [0] * 4 + [1] * 4 + [2] * 4
    assert all("not asked" in turn["error"] for turn in trace[4:])
    assert client.waiting == 0


def test_a_team_whose_members_all_answer_is_not_stopped(apibank_root):
    task = get_task(EVAL_IDS[0], root=apibank_root)
    with OpenAIStub(default=correct(f"[{task.gold_call[1:-1]}]")) as stub:
        solver, scorer, _ = _debate(stub, apibank_root)
        result = score(solve(task, solver), scorer)
        assert len(stub.chat_requests) == 12
    assert result.correct and not result.is_error


def test_a_dead_endpoint_stops_the_run_and_every_unfinished_instance_is_accounted_for(tmp_path):
    """Default retries (5, backoff from 1 s), a 2 s window: each of the 8 instances in flight would send 6
    attempts over 31 s; the breaker stops them after about 2 s of failures."""
    args = ("--model", "stub", "--limit", "24", "--no-cache", "--concurrency", "8")
    with OpenAIStub(default=reset()) as dead:
        first = run_command(tmp_path, *args, "--base-url", dead.url, "--down-after", "2")
        sent = len(dead.chat_requests)
    assert first.returncode == 1, first.stdout[-2000:]
    assert "the endpoint answered no model request for" in first.stdout
    rows = read_jsonl(tmp_path / "results.jsonl")
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert all(row["stage"] == "error" for row in rows)  # never a wrong answer
    assert len(rows) + summary["not_run"] == 24 and summary["complete"] is False
    assert sent <= 8 * 3 + 8, sent  # attempts at 0, 1 and 3 s (backoff with jitter), and the instances they ended

    with OpenAIStub(default=mixed) as alive:
        second = run_command(tmp_path, *args, "--base-url", alive.url, "--resume")
    assert second.returncode == 0, second.stdout[-2000:]
    rows = read_jsonl(tmp_path / "results.jsonl")
    assert [row["id"] for row in rows] == EVAL_IDS[:24] and not any(row["stage"] == "error" for row in rows)


def test_the_window_can_pass_while_every_request_waits_to_retry():
    """Failures at 0 and 5 s, then every request in its backoff: the breaker trips when asked at 21 s."""
    clock = Clock()
    breaker = Breaker(20, clock=clock)
    for second in (0.0, 5.0):
        clock.now = second
        breaker.done(breaker.sent(), "Connection refused")
    clock.now = 19.0
    breaker.check()
    assert breaker.reason is None
    clock.now = 21.0
    breaker.check()
    assert breaker.reason and "for 21 s while 2 attempts failed (last: Connection refused)" in breaker.reason
