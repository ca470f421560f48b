"""Stopping does not wait for the server: Ctrl-C and SIGTERM end a run with requests in flight that would
take minutes, abandoning them (no row: `--resume` runs them again), keeping what finished."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from apibank_bench.agents.prompts import format_history
from apibank_bench.core.exit_codes import ExitCode
from apibank_bench.core.paths import PROJECT_ROOT
from apibank_bench.data import manifests
from apibank_bench.llm import ChatClient, ModelConfig, ModelError
from apibank_bench.data.tasks import get_task
from apibank_bench.runs.results import read_jsonl
from openai_stub import OpenAIStub, Reply

SLOW = 600.0  #: seconds a slow answer takes: far longer than any test may wait
#: seconds a fast answer takes. Answered at once, their latencies of milliseconds differed by the machine's jitter,
#: which the in-flight limit read as a queue (10 ms, then 40 ms: cut from 8 to 3 on a simulated clock), so the run
#: kept fewer slow requests in flight than the tests wait for (CI waited 120 s for the fourth)
FAST_S = 1.0
MESSAGES = [{"role": "user", "content": "What day is it?"}]


def _fast_for(fast_ids: list[str], ids: list[str]):
    """A stub's replies: the instances `fast_ids` are answered after FAST_S, every other one after SLOW s (rows are
    written in the tests' order, so the fast ones must be the first)."""
    histories = {format_history(get_task(task_id)): task_id for task_id in ids}

    def reply(body: dict) -> Reply:
        prompt = body["messages"][-1]["content"]
        # The longest history the prompt holds: an earlier turn's history prefixes a later one's.
        task_id = max(((h, t) for h, t in histories.items() if h and h in prompt), key=lambda ht: len(ht[0]))[1]
        return Reply(delay=FAST_S) if task_id in fast_ids else Reply(delay=SLOW)

    return reply


def _until(condition, what: str, process: subprocess.Popen | None = None, seconds: float = 120) -> None:
    """Wait for an event (a guard against a hang, not a time limit on the code under test)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if process is not None and process.poll() is not None:
            out = process.stdout.read() if process.stdout else ""
            raise AssertionError(f"the run ended (exit {process.returncode}) before {what}:\n{out[-3000:]}")
        if time.monotonic() >= deadline:
            out = ""
            if process is not None:  # what the run said: where it hangs (CI once waited here with nothing to read)
                process.send_signal(signal.SIGABRT)  # the run's faulthandler (_run) prints every thread's stack
                try:
                    out = process.communicate(timeout=10)[0] or ""
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    out = process.communicate()[0] or ""
            said = f"; the run's output:\n{out[-30000:]}" if out else ""
            raise AssertionError(f"no {what} after {seconds:g} s{said}")
        time.sleep(0.05)


@contextmanager
def _reaped(run: subprocess.Popen):
    """The run's whole process group is killed if it is still running when the block ends (a failed wait)."""
    try:
        yield
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()


# -- the client: abandon cuts requests off -------------------------------------------------------------


def test_abandon_cuts_off_a_request_in_flight_without_waiting_for_its_answer():
    with OpenAIStub(default=Reply(delay=SLOW)) as stub:
        client = ChatClient(ModelConfig(base_urls=[stub.url], model="stub-model", timeout=SLOW * 2, max_retries=5,
                                        down_after=0.001))
        outcome: list[BaseException] = []
        thread = threading.Thread(target=lambda: outcome.append(pytest.raises(ModelError, client.complete,
                                                                              MESSAGES).value))
        thread.start()
        _until(lambda: stub.active == 1, "request at the stub")
        client.abandon("the test stopped")
        _until(lambda: not thread.is_alive(), "return from complete")
        _until(lambda: stub.closed_early == 1, "closed connection at the stub")
        [error] = outcome
        completion = error.completion
        assert completion.stopped == "run" and "abandoned: the test stopped" in completion.error
        assert completion.attempts == 1 and len(stub.chat_requests) == 1  # not retried
        time.sleep(0.01)  # past the breaker's window: a failure counted would trip it now
        client.breaker.check()
        assert client.breaker.reason is None  # cut off by us: not the endpoint's failure
        # Nothing is asked any more.
        with pytest.raises(ModelError, match="abandoned"):
            client.complete(MESSAGES)
        assert len(stub.chat_requests) == 1


def test_abandoning_a_team_cuts_off_every_role_model():
    # With a model per role, each model has its own client: the run's end must reach every one of them.
    from apibank_bench.agents.team_models import TeamModels

    with OpenAIStub(default=Reply(delay=SLOW)) as a, OpenAIStub(default=Reply(delay=SLOW)) as b:
        clients = [ChatClient(ModelConfig(base_urls=[stub.url], model=name, timeout=SLOW * 2, max_retries=5))
                   for stub, name in ((a, "model-a"), (b, "model-b"))]
        team = TeamModels(clients[0], {"final": clients[1]}, "final")
        threads = [threading.Thread(target=lambda c=client: pytest.raises(ModelError, c.complete, MESSAGES))
                   for client in clients]
        for thread in threads:
            thread.start()
        _until(lambda: a.active == 1 and b.active == 1, "a request at each stub")
        team.abandon("the test stopped")
        _until(lambda: not any(thread.is_alive() for thread in threads), "return from both requests")
        _until(lambda: a.closed_early == 1 and b.closed_early == 1, "both connections closed")


# -- a whole run, stopped by a signal --------------------------------------------------------------------


LIMIT, FAST = 6, 2
IDS = [task_id for task_id in manifests.manifest_ids("all") if task_id.startswith("level-1::")][:LIMIT]


def _run(out_dir: Path, stub: OpenAIStub, *args: str) -> subprocess.Popen:
    """`apibank-bench run` on the first LIMIT Level-1 instances (one model request each), every one in flight."""
    command = [sys.executable, "-m", "apibank_bench", "run", "--model", "stub", "--base-url", stub.url,
               "--only", ",".join(IDS), "--limit", "0", "--no-cache", "--timeout", str(SLOW * 2),
               "--out-dir", str(out_dir), *args]
    # Its own process group, as a shell gives a job, with Ctrl-C's default action restored (a child of a
    # background job inherits it ignored).
    return subprocess.Popen(command, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
                            env={**os.environ, "PYTHONFAULTHANDLER": "1"})  # a hang's stacks on SIGABRT (_until)


@pytest.mark.parametrize("how, workers", [("ctrl-c", 0), ("sigterm", 0), ("ctrl-c", 2), ("sigterm", 2),
                                         ("ctrl-c twice", 0), ("ctrl-c twice", 2)])
def test_a_signal_ends_the_run_at_once_and_resume_finishes_it(tmp_path, how, workers):
    """Ctrl-C, Ctrl-C twice 0.3 s apart (the second while the run winds down), or SIGTERM: exit 130 with the rows
    that finished, summary.json and the closing table, and `--resume` finishes the run."""
    slow = LIMIT - FAST
    with OpenAIStub(default=_fast_for(IDS[:FAST], IDS)) as stub:
        run = _run(tmp_path, stub, *(["--workers", str(workers)] if workers else []))
        with _reaped(run):
            _until(lambda: len(read_jsonl(tmp_path / "results.jsonl")) == FAST and stub.active == slow,
                   "rows of the fast answers with the slow ones in flight", run)
            if how.startswith("ctrl-c"):
                os.killpg(run.pid, signal.SIGINT)  # a terminal's Ctrl-C reaches the whole group
                if how == "ctrl-c twice":
                    time.sleep(0.3)
                    os.killpg(run.pid, signal.SIGINT)
            else:
                run.send_signal(signal.SIGTERM)  # `kill PID`: the main process alone
            out, _ = run.communicate(timeout=300)
        assert run.returncode == ExitCode.INTERRUPTED, out[-3000:]
        # The run returned while every slow answer was still being computed: it closed their connections.
        assert stub.closed_early == slow, out[-3000:]
        rows = read_jsonl(tmp_path / "results.jsonl")
        assert len(rows) == FAST and not any(row["stage"] == "error" for row in rows)  # abandoned: no row
        summary = json.loads((tmp_path / "summary.json").read_text())
        assert (summary["selected"], summary["not_run"], summary["errors"]) == (LIMIT, slow, 0)
        assert "API-Bank:" in out and f"{slow} did not run" in out  # the closing table
        assert "Warning" not in out and "Traceback" not in out, out[-3000:]

        stub.default = Reply()
        asked = len(stub.chat_requests)
        resumed = _run(tmp_path, stub, "--resume")
        out, _ = resumed.communicate(timeout=300)
        assert resumed.returncode == 0, out[-3000:]
        assert len(stub.chat_requests) - asked == slow  # only the abandoned instances are asked again
    rows = read_jsonl(tmp_path / "results.jsonl")
    assert sorted(row["id"] for row in rows) == sorted(IDS) and not any(row["stage"] == "error" for row in rows)


def test_a_second_ctrl_c_under_pytest_xdist_still_ends_with_the_table_and_the_summary(tmp_path):
    """`pytest -n 2`, Ctrl-C twice 0.3 s apart: the second, while the run winds down, was an uncaught
    KeyboardInterrupt in pytest's own reporting (the process killed by SIGINT, or no table, no summary.json)."""
    from helpers import bench

    with OpenAIStub(default=Reply(text="[GetToday()]", delay=0.5)) as stub:
        run = bench(tmp_path, "--apibank-model", "stub", "--apibank-base-url", stub.url, "--apibank-limit", "40",
                    "--apibank-no-cache", "-n", "2", wait=False)
        with _reaped(run):
            _until(lambda: len(read_jsonl(tmp_path / "results.jsonl")) >= 4, "four rows", run)
            os.killpg(run.pid, signal.SIGINT)
            time.sleep(0.3)
            os.killpg(run.pid, signal.SIGINT)
            out, _ = run.communicate(timeout=120)
    assert run.returncode == ExitCode.INTERRUPTED, out[-3000:]
    rows = read_jsonl(tmp_path / "results.jsonl")
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert (summary["selected"], summary["attempts"], summary["not_run"]) == (40, len(rows), 40 - len(rows))
    assert "API-Bank: single / stub" in out and f"{40 - len(rows)} did not run" in out, out[-3000:]
    assert "Warning" not in out and "Traceback" not in out, out[-3000:]


def test_an_interrupt_while_a_row_is_written_acts_once_it_is_written():
    from apibank_bench.core.interrupt import deferred

    # Ctrl-C's handler as Python installs it: a test session started in the background (`cmd &`) inherits SIGINT
    # ignored, and then no handler raises (the test failed so in a run started by nohup).
    outside = signal.signal(signal.SIGINT, signal.default_int_handler)
    steps = []
    try:
        with pytest.raises(KeyboardInterrupt):
            with deferred():
                steps.append("row")
                os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C between the row and its trace
                time.sleep(0.05)  # the handler would have run by now
                steps.append("trace")
            steps.append("after")  # not reached: the interrupt acts as the block ends
        assert steps == ["row", "trace"]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored
    finally:
        signal.signal(signal.SIGINT, outside)
