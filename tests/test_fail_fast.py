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
from apibank_bench.runs.instances import score, solve
from apibank_bench.runs.results import read_jsonl
from apibank_bench.scoring import Scorer
from openai_stub import OpenAIStub, Reply, correct, error, reset
from test_bench_suite import EVAL_IDS
from test_run_reliability import mixed, run_command

MESSAGES = [{"role": "user", "content": "What day is it?"}]
#: Long enough that a wait which is not cut short would hold a test up for minutes.
LONG_WAIT = 60.0


def client_for(stub: OpenAIStub, *, breaker: int = 0, retries: int = 5, **kwargs) -> ChatClient:
    config = ModelConfig(base_urls=[stub.url], model="stub-model", max_retries=retries, timeout=5.0,
                         max_consecutive_errors=breaker)
    return ChatClient(config, retry_base_delay=LONG_WAIT, retry_max_delay=LONG_WAIT, **kwargs)


def test_a_tripped_breaker_ends_every_wait_to_retry_and_refuses_new_requests():
    tripped: list[str] = []
    errors: list[str] = []
    with OpenAIStub(default=reset()) as stub:
        client = client_for(stub, breaker=3)
        client.breaker.on_trip(tripped.append)

        def ask() -> None:
            with pytest.raises(ModelError) as info:
                client.complete(MESSAGES)
            errors.append(str(info.value))

        threads = [threading.Thread(target=ask) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(stub.chat_requests) == 3  # one attempt each: the third failure in a row tripped it
        with pytest.raises(ModelError, match="the run was stopped"):
            client.complete([{"role": "user", "content": "another question"}])
        assert len(stub.chat_requests) == 3  # nothing more was sent
    assert len(tripped) == 1 and "3 model requests in a row failed" in tripped[0]
    assert len(errors) == 3 and all("the run was stopped" in text for text in errors)
    assert client.waiting == 0


def test_a_success_resets_the_streak_and_429_does_not_count():
    waits: list[float] = []
    script = [error(500), error(500), correct(), error(429), error(429), error(500), correct(), error(500), correct()]
    with OpenAIStub(*script) as stub:
        client = client_for(stub, breaker=3, sleep=waits.append)
        for _ in range(3):
            assert client.complete(MESSAGES).text == "[GetToday()]"
    assert client.breaker.reason is None and len(waits) == 6


def test_requests_waiting_to_retry_are_counted_for_the_progress_line():
    seen: list[int] = []
    with OpenAIStub(error(503), error(503)) as stub:
        client = client_for(stub, sleep=lambda seconds: seen.append(client.waiting))
        assert client.complete(MESSAGES).attempts == 3
    assert seen == [1, 1] and client.waiting == 0


def test_the_progress_line_shows_requests_waiting_to_retry(tmp_path):
    from apibank_bench.plugin.writer import Writer

    class Reporter:
        lines: list[str] = []
        currentfspath = None

        def ensure_newline(self):
            pass

        def write(self, line, **_):
            self.lines.append(line)

    class Client:
        limiter = type("Limiter", (), {"active": 2})()
        waiting = 31

    class Config:
        stash = {}
        pluginmanager = type("PM", (), {"get_plugin": staticmethod(lambda name: Reporter())})()

    from apibank_bench.plugin.keys import MODEL

    writer = Writer.__new__(Writer)
    writer.config, writer.total, writer.done, writer.errors, writer.correct = Config(), 100, 10, 10, 0
    writer.started = writer.last_progress = writer.running_since = 0.0
    writer.cache_hits = 0
    Config.stash = {MODEL: Client()}
    writer.progress()
    assert "2 requests in flight, 31 waiting to retry" in Reporter.lines[-1]


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
    """Default retries (5, backoff from 1 s): before, each of the 8 instances in flight sent 6 attempts."""
    args = ("--model", "stub", "--limit", "24", "--no-cache", "--concurrency", "8")
    with OpenAIStub(default=reset()) as dead:
        first = run_command(tmp_path, *args, "--base-url", dead.url)
        sent = len(dead.chat_requests)
    assert first.returncode == 1, first.stdout[-2000:]
    assert "model requests in a row failed at the endpoint" in first.stdout
    rows = read_jsonl(tmp_path / "results.jsonl")
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert all(row["stage"] == "error" for row in rows)  # never a wrong answer
    assert len(rows) + summary["not_run"] == 24 and summary["complete"] is False
    assert sent <= 8 + 10, sent  # the first attempts, and at most the retries that brought the streak to 10

    with OpenAIStub(default=mixed) as alive:
        second = run_command(tmp_path, *args, "--base-url", alive.url, "--resume")
    assert second.returncode == 0, second.stdout[-2000:]
    rows = read_jsonl(tmp_path / "results.jsonl")
    assert [row["id"] for row in rows] == EVAL_IDS[:24] and not any(row["stage"] == "error" for row in rows)
