"""Endpoints routed by load: least outstanding requests weighted by latency, failing endpoints out for a while."""

from __future__ import annotations

import json
import socket

import pytest

from apibank_bench.llm import router as router_module
from apibank_bench.llm.http import APIConnectionError, BadRequestError, ErrorAnswer
from apibank_bench.llm.router import Router, merge_snapshots
from openai_stub import OpenAIStub
from helpers import mixed, run_command


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def refused() -> APIConnectionError:
    return APIConnectionError()


def answer(router: Router, clock: Clock, latency: float, avoid: str = "") -> str:
    with router.request(avoid) as url:
        clock.now += latency
    return url


def fail(router: Router, exc: BaseException, avoid: str = "") -> str:
    with pytest.raises(type(exc)):
        with router.request(avoid) as url:
            raise exc
    return url


def test_a_slow_endpoint_gets_fewer_requests_in_flight_in_proportion_to_its_latency():
    clock = Clock()
    router = Router(["http://fast", "http://slow"], clock=clock)
    assert answer(router, clock, 1.0) == "http://fast"  # both unmeasured: the first
    assert answer(router, clock, 4.0) == "http://slow"  # unmeasured counts as the fastest: tried next
    held = []
    for _ in range(10):  # ten requests at once, none finished
        context = router.request()
        held.append((context, context.__enter__()))
    sent = [url for _, url in held]
    # expected latency = latency + outstanding x latency per request (here the same: one at a time):
    # fast at 1 + n, slow at 4 + 4n, so of ten requests fast takes 8 and slow 2
    assert sent.count("http://fast") == 8 and sent.count("http://slow") == 2
    for context, _ in held:
        context.__exit__(None, None, None)
    report = router.snapshot()
    assert report["http://fast"]["requests"] == 9 and report["http://slow"]["requests"] == 3


def test_round_robin_would_split_them_evenly_which_is_what_the_routing_setting_keeps():
    clock = Clock()
    router = Router(["http://a", "http://b"], clock=clock, policy="round_robin")
    answer(router, clock, 1.0)
    answer(router, clock, 9.0)
    assert [answer(router, clock, 0.0) for _ in range(4)] == ["http://a", "http://b"] * 2


def test_an_endpoint_that_keeps_failing_is_out_for_a_cooldown_then_tried_again():
    clock = Clock()
    router = Router(["http://dead", "http://live"], clock=clock)
    for _ in range(router_module.FAILURES_TO_EJECT):
        # each failure on `dead` is followed by a retry that avoids it
        assert fail(router, refused()) == "http://dead"
        assert answer(router, clock, 0.1, avoid="http://dead") == "http://live"
    assert {answer(router, clock, 0.1) for _ in range(20)} == {"http://live"}  # out of rotation
    clock.now += router_module.COOLDOWN_S + 0.1
    assert fail(router, refused()) == "http://dead"  # back after the cooldown; fails again: out at once
    clock.now += router_module.COOLDOWN_S + 0.1
    assert answer(router, clock, 0.1) == "http://live"  # the second cooldown is twice as long
    clock.now += router_module.COOLDOWN_S
    assert answer(router, clock, 0.01) == "http://dead"  # it recovered
    report = router.snapshot()["http://dead"]
    assert report["errors"] == router_module.FAILURES_TO_EJECT + 1 and report["ejections"] == 2


def test_a_request_error_that_is_not_the_endpoints_fault_does_not_take_it_out():
    clock = Clock()
    router = Router(["http://a", "http://b"], clock=clock)
    bad_request = BadRequestError("no", response=ErrorAnswer(400, {}, "no"))
    for _ in range(router_module.FAILURES_TO_EJECT + 2):
        fail(router, bad_request, avoid="http://b")
    assert router.snapshot()["http://a"]["ejections"] == 0
    assert router.snapshot()["http://a"]["errors"] == router_module.FAILURES_TO_EJECT + 2


def test_when_every_endpoint_is_out_the_one_due_back_first_is_used():
    clock = Clock()
    router = Router(["http://a", "http://b"], clock=clock)
    for _ in range(router_module.FAILURES_TO_EJECT):
        fail(router, refused(), avoid="http://b")
    clock.now += 1.0
    for _ in range(router_module.FAILURES_TO_EJECT):
        fail(router, refused(), avoid="http://a")
    assert answer(router, clock, 0.0) == "http://a"


def test_snapshots_of_several_processes_add_up():
    limit = {"initial": 4, "min": 2, "max": 5, "final": 3, "changes": [[0.0, 4], [1.0, 2]]}
    one = {"http://a": {"requests": 2, "errors": 1, "mean_latency_s": 1.0, "ewma_latency_s": 1.0, "ejections": 0,
                        "rate_limited": 3, "rate_limit_wait_s": 1.5, "in_flight_limit": [limit]}}
    two = {"http://a": {"requests": 6, "errors": 0, "mean_latency_s": 3.0, "ewma_latency_s": 2.0, "ejections": 1},
           "http://b": {"requests": 0, "errors": 0, "mean_latency_s": None, "ewma_latency_s": None, "ejections": 0}}
    merged = merge_snapshots([one, two, one])
    assert merged["http://a"] == {"requests": 10, "errors": 2, "mean_latency_s": 2.2, "ewma_latency_s": 1.3333,
                                  "ejections": 1, "rate_limited": 6, "rate_limit_wait_s": 3.0,
                                  "in_flight_limit": [limit, limit]}  # one limit record a process
    # (a snapshot written before rate limits were counted, `two`, adds none)
    assert merged["http://b"]["requests"] == 0
    json.dumps(merged)


def test_a_run_with_one_endpoint_dead_finishes_on_the_other_with_no_error_rows(tmp_path):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    with OpenAIStub(default=mixed) as live:
        result = run_command(tmp_path, "--model", "stub", "--base-url", dead, live.url, "--limit", "6", "--no-cache")
        url = live.url
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["complete"] and summary["errors"] == 0 and summary["total"] == 6
    endpoints = summary["endpoints"]
    assert endpoints[url]["requests"] == 6 and endpoints[url]["errors"] == 0
    assert endpoints[dead]["requests"] == endpoints[dead]["errors"] and endpoints[dead]["ejections"] >= 1
