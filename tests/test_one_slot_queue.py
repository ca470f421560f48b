"""The order of requests to a one-slot server that keeps the previous prompt's KV cache (the embedded model,
llm/one_slot.py `OneSlotQueue`): one at a time, an instance's requests back to back, the earliest-started instance
first, and the server held for the instance it serves between two of its requests. Real threads, a simulated
clock: the order is decided by the queue, never by timing (each request joins before the next is let go)."""

from __future__ import annotations

import contextvars
import threading
import time
from contextlib import contextmanager

from apibank_bench.llm.config import model_config
from apibank_bench.core import settings
from apibank_bench.llm.breaker import InstanceStop, instance_scope
from apibank_bench.llm.client import ChatClient
from apibank_bench.llm.config import ModelConfig
from apibank_bench.llm.limit import Limiter
from apibank_bench.llm.one_slot import HOLD_S


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@contextmanager
def route(room):
    yield room[0]


class Server:
    """A one-slot server in front of `limiter`: `log` is the order in which it was sent requests."""

    def __init__(self, limiter: Limiter) -> None:
        self.limiter, self.log = limiter, []
        self.answer: dict[str, threading.Event] = {}  #: requests answered only once their event is set
        self._lock = threading.Lock()

    def ask(self, label: str) -> None:
        with self.limiter.slot(["u"], route) as ticket:
            with self._lock:
                self.log.append(label)
            if label in self.answer:
                self.answer[label].wait()
            ticket.answered(1.0, 1)

    def waiting(self) -> int:
        with self.limiter._cond:
            return len(self.limiter.queue.waiting)

    def until(self, condition) -> None:
        """Wait (in real time) until `condition()` holds: the threads' progress, not an outcome, is awaited."""
        deadline = time.monotonic() + 30
        while not condition():
            assert time.monotonic() < deadline, "the threads did not get there"
            time.sleep(0.002)


def instance(server: Server, stop: InstanceStop, rounds: list[list[tuple[str, threading.Event]]]) -> threading.Thread:
    """One instance's solver: each round's requests in parallel threads in the instance's context (as a team's
    LangGraph nodes), each sent once its event is set; the instance finishes after its last round."""

    def solve() -> None:
        with instance_scope(stop):
            for requests in rounds:
                threads = [threading.Thread(target=contextvars.copy_context().run, args=(send, label, go))
                           for label, go in requests]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()

    def send(label: str, go: threading.Event) -> None:
        go.wait()
        server.ask(label)

    thread = threading.Thread(target=solve)
    thread.start()
    return thread


def test_an_instances_requests_go_back_to_back_the_earliest_started_instance_first():
    server = Server(Limiter(ceiling=8, clock=Clock(), one_slot=True))
    a, b, c = InstanceStop(), InstanceStop(), InstanceStop()  # started in this order
    go = {label: threading.Event() for label in ["b1", "c1", "a1", "b2", "a2", "c2"]}
    rounds = {stop: [[(label, go[label]) for label in go if label[0] == name]] for stop, name in [(a, "a"), (b, "b"), (c, "c")]}
    with server.limiter.slot(["u"], route):  # the server is busy (a request outside any instance)
        threads = [instance(server, stop, rounds[stop]) for stop in (a, b, c)]
        for joined, label in enumerate(go, 1):  # they arrive interleaved, each joining before the next is sent
            go[label].set()
            server.until(lambda joined=joined: server.waiting() == joined)
        assert server.log == []
    for thread in threads:
        thread.join()
    assert server.log == ["a1", "a2", "b1", "b2", "c1", "c2"]


def test_the_server_is_held_for_the_instance_it_serves_between_its_rounds_until_it_finishes():
    clock = Clock()
    server = Server(Limiter(ceiling=8, clock=clock, one_slot=True))
    a, b = InstanceStop(), InstanceStop()
    a1, a2, b1 = threading.Event(), threading.Event(), threading.Event()
    solving = [instance(server, a, [[("a1", a1)], [("a2", a2)]]), instance(server, b, [[("b1", b1)]])]
    a1.set()
    server.until(lambda: server.log == ["a1"])
    b1.set()  # b waits while a is between its rounds (its client-side work)
    server.until(lambda: server.waiting() == 1)
    a2.set()
    for thread in solving:
        thread.join()
    assert server.log == ["a1", "a2", "b1"]  # a's second round reuses its first's prompt; b's comes after


def test_an_instance_that_sends_nothing_for_the_hold_lets_the_next_one_go_and_that_one_keeps_the_server():
    clock = Clock()
    server = Server(Limiter(ceiling=8, clock=clock, one_slot=True))
    a, b = InstanceStop(), InstanceStop()
    a1, a2, b1, b2 = (threading.Event() for _ in range(4))
    server.answer["b1"] = answer_b1 = threading.Event()
    solving = [instance(server, a, [[("a1", a1)], [("a2", a2)]]), instance(server, b, [[("b1", b1), ("b2", b2)]])]
    a1.set()
    server.until(lambda: server.log == ["a1"])
    b1.set()
    server.until(lambda: server.waiting() == 1)
    b2.set()
    server.until(lambda: server.waiting() == 2)
    assert server.log == ["a1"]  # held for a
    clock.now += HOLD_S  # a waits for something else (another endpoint): the hold ends
    server.limiter._wake()
    server.until(lambda: server.log == ["a1", "b1"])
    a2.set()  # a, started earlier, comes back while b is served
    server.until(lambda: server.waiting() == 2)
    answer_b1.set()
    for thread in solving:
        thread.join()
    assert server.log == ["a1", "b1", "b2", "a2"]  # b's round stays together, then a


def test_only_the_embedded_model_is_served_as_a_one_slot_server():
    def resolve(**options):
        return settings.resolve(lambda s: options.get(s.name), lambda s: None, environ={})

    local = model_config(resolve(), local_url="http://127.0.0.1:9/v1")
    remote = model_config(resolve(base_url="http://a/v1", model="m"))
    assert local.one_slot and not remote.one_slot
    one_slot, adaptive = ChatClient(local).limiter, ChatClient(remote).limiter
    assert one_slot.queue is not None and adaptive.queue is None
    assert ChatClient(ModelConfig(base_urls=["http://b/v1"], model="m")).limiter.queue is None
    for limiter in (one_slot, adaptive):
        with limiter.slot(["http://x/v1"], route):
            pass
    assert one_slot.limit == 1 and adaptive.limit > 1  # the remote server's limit is learned from 8
