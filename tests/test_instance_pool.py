"""The instance pool: a slow scoring (the first ToolSearcher search loads its embedding model) holds up
results, never the requests of other instances."""

from __future__ import annotations

import threading

import pytest

from apibank_bench.agents import Solution
from apibank_bench.data import manifests
from apibank_bench.data.tasks import get_task
from apibank_bench.core.settings import RunConfig
from apibank_bench.llm.config import ModelConfig
from apibank_bench.runs.instances import REMOTE_IN_FLIGHT, InstancePool, RunStopped, instances_in_flight
from apibank_bench.scoring import Score
from helpers import counted_run
from openai_stub import OpenAIStub, correct

IDS = manifests.manifest_ids("all")[:8]

WAIT = 60  # a safety net against a hang, never what the assertions measure


class SlowFirstScoring:
    """Scores every answer correct; the first scoring blocks until released (a model being loaded)."""

    def __init__(self) -> None:
        self.release, self.blocked, self.scored = threading.Event(), threading.Event(), []
        self._lock = threading.Lock()

    def score(self, task, answer) -> Score:
        with self._lock:
            first = not self.scored and not self.blocked.is_set()
            if first:
                self.blocked.set()
        if first:
            assert self.release.wait(WAIT)
        self.scored.append(task)
        return Score(True, "score", None)


def test_instances_keep_starting_while_a_scoring_is_slow(apibank_root):
    scorer, solved, all_solved = SlowFirstScoring(), [], threading.Event()

    def solver(task):
        solved.append(task.combined_id)
        if len(solved) == len(IDS):
            all_solved.set()
        return Solution(answer="[GetToday()]")

    pool = InstancePool(get_task, solver, scorer, concurrency=2)
    try:
        pool.start(IDS)
        assert scorer.blocked.wait(WAIT)
        # With two instance threads, every instance is solved while the first scoring is still blocked.
        assert all_solved.wait(WAIT) and sorted(solved) == sorted(IDS) and scorer.scored == []
        scorer.release.set()
        results = [pool.result(task_id) for task_id in IDS]
        assert [r.task.combined_id for r in results] == IDS and all(r.correct for r in results)
    finally:
        scorer.release.set()
        pool.close()


def gated_pool() -> tuple[InstancePool, threading.Event, threading.Event]:
    """A pool of one instance in flight whose solver signals `entered`, then waits for `gate`."""
    entered, gate, scorer = threading.Event(), threading.Event(), SlowFirstScoring()
    scorer.release.set()

    def solver(task):
        entered.set()
        assert gate.wait(WAIT)
        return Solution(answer="[GetToday()]")

    return InstancePool(get_task, solver, scorer, concurrency=1), entered, gate


def test_a_stopped_pool_reports_the_instances_it_never_started(apibank_root):
    pool, entered, gate = gated_pool()
    try:
        pool.start(IDS[:2])
        assert entered.wait(WAIT)  # the first is running, the second still queued
        pool.stop("stopped by the test")
        gate.set()
        assert pool.result(IDS[0]).correct  # it had started: it finishes
        with pytest.raises(RunStopped, match="stopped by the test"):
            pool.result(IDS[1])
    finally:
        gate.set()
        pool.close()


def test_a_pool_that_stops_while_instances_are_queued_keeps_what_started(apibank_root):
    """The breaker may trip on the first answers while `start` is still queueing (a fast endpoint failing
    every request): start returns, the started instance finishes, the rest report RunStopped."""
    pool, entered, gate = gated_pool()

    def ids():  # the pool stops while start() is still queueing, as a tripping breaker does
        yield IDS[0]
        assert entered.wait(WAIT)
        yield IDS[1]
        pool.stop("the breaker tripped")
        yield from IDS[2:]

    try:
        pool.start(ids())  # no exception: the fixture that starts the pool must not fail every test
        gate.set()
        assert pool.result(IDS[0]).correct
        for task_id in IDS[1:]:  # IDS[1] queued and cancelled, the rest never queued
            with pytest.raises(RunStopped, match="the breaker tripped"):
                pool.result(task_id)
    finally:
        gate.set()
        pool.close()


@pytest.fixture
def loaded(monkeypatch) -> list[tuple[str, str]]:
    """The (ToolSearcher scorer, level) of each catalog whose embeddings are loaded (none really is)."""
    import apibank_bench.scoring.toolsearcher_scorers as toolsearcher

    keys: list[tuple[str, str]] = []

    class Catalog:
        def __init__(self, scorer, level):
            self.key = (scorer, level)

        def embeddings(self):
            keys.append(self.key)

    monkeypatch.setattr(toolsearcher, "searched_catalog", lambda scorer, level, root: Catalog(scorer, level))
    return keys


def test_the_embedding_model_is_preloaded_only_when_the_selection_can_need_it(apibank_root, loaded):
    import apibank_bench.scoring.scorer as scoring

    tasks = [get_task(task_id) for task_id in manifests.manifest_ids("all")]
    searches = [t for t in tasks if t.gold.api_name == "ToolSearcher"]
    others = [t for t in tasks if t.gold.api_name != "ToolSearcher"]
    assert {t.level for t in searches} == {"2", "3"}

    assert scoring.Scorer().preload(others) is None  # no ToolSearcher call to score: nothing to load
    assert scoring.Scorer(toolsearcher_scorer="keyword").preload(searches) is None  # keywords never embed
    preload = scoring.Scorer().preload(tasks)  # official: each level's frozen catalog
    preload._thread.join(WAIT)
    assert loaded == [("official", "2"), ("official", "3")]


def test_stopping_the_preload_skips_what_has_not_started_and_waits_for_what_has(monkeypatch):
    import apibank_bench.scoring.toolsearcher_scorers as toolsearcher
    from apibank_bench.scoring.scorer import Scorer

    started, release, loaded = threading.Event(), threading.Event(), []

    class Catalog:
        def __init__(self, scorer, level):
            self.level = level

        def embeddings(self):
            started.set()
            release.wait(WAIT)
            loaded.append(self.level)

    monkeypatch.setattr(toolsearcher, "searched_catalog", lambda scorer, level, root: Catalog(scorer, level))
    preload = Scorer().preload(get_task(task_id) for task_id in manifests.manifest_ids("all"))
    assert started.wait(WAIT)  # the Level-2 catalog is loading
    stopper = threading.Thread(target=preload.stop)
    stopper.start()
    stopper.join(0.2)
    assert stopper.is_alive() and preload.running  # stop() waits for the load under way...
    release.set()
    stopper.join(WAIT)
    assert not preload.running and loaded == ["2"]  # ...and the Level-3 catalog never started


def test_the_interpreter_waits_for_a_preload_rather_than_cutting_it_off_at_exit(tmp_path):
    # A daemon thread still loading when the interpreter ends is killed wherever it is: inside native code
    # (onnx, tokenizers) that aborted finished runs with 134. The preload's thread is waited for instead.
    import subprocess
    import sys

    done = tmp_path / "loaded"
    script = (f"import time\nfrom apibank_bench.scoring.scorer import Preload\n"
              f"Preload([lambda: (time.sleep(0.5), open({str(done)!r}, 'w').close())]).start()\n")
    ended = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=WAIT)
    assert ended.returncode == 0, ended.stderr
    assert done.exists()  # the load finished before the interpreter did


def test_the_pool_fills_the_request_ceiling_only_at_a_server_known_to_batch():
    """A single agent sends one request at a time and a team of 4 four: against vLLM the pool keeps enough of
    them for the ceiling, elsewhere 32 (a server that queues keeps its queue in the client either way)."""
    remote = dict(model="stub", base_url=["http://x/v1"], max_in_flight=128)
    assert instances_in_flight(RunConfig(**remote), batches=True) == 128
    assert instances_in_flight(RunConfig(**remote, topology="decentralized", team_size=4), batches=True) == 32
    assert instances_in_flight(RunConfig(**remote, topology="decentralized", team_size=2), batches=True) == 64
    assert instances_in_flight(RunConfig(**remote), batches=False) == REMOTE_IN_FLIGHT == 32
    assert instances_in_flight(RunConfig(**remote, concurrency=5), batches=True) == 5  # asked for: as asked
    assert instances_in_flight(RunConfig(model="gold"), batches=True) == 1


def test_the_default_ceiling_is_a_batching_servers_default_batch():
    """Without --max-in-flight the ceiling is 128 requests, or vLLM's default batch (256) when every server
    batches: a team of 4 then keeps 64 instances in flight there, not 32 (a run against vLLM waited in waves)."""
    remote = dict(model="stub", base_url=["http://x/v1"])
    assert RunConfig(**remote).max_in_flight is None
    assert instances_in_flight(RunConfig(**remote), batches=True) == 256
    assert instances_in_flight(RunConfig(**remote, topology="decentralized", team_size=4), batches=True) == 64
    assert instances_in_flight(RunConfig(**remote, topology="decentralized", team_size=4), batches=False) == 32
    assert [ModelConfig(base_urls=["http://x/v1"], model="m", server_kind=kind).ceiling
            for kind in ("vllm", "sglang", "llama.cpp", "openai")] == [256, 256, 128, 128]
    assert ModelConfig(base_urls=["http://x/v1"], model="m", server_kind="vllm", max_in_flight=16).ceiling == 16


def test_run_starts_loading_the_embedding_model_of_its_selection_before_pytest_starts(loaded):
    """`run` warms what scoring a model's answers may load (commands.run.warm_scoring, through the run's parts)
    while LangGraph is imported: the catalogs of its selection's ToolSearcher tasks; nothing for gold, for xdist
    workers (they score in their own processes) or for a selection without such tasks."""
    from apibank_bench.commands.run import warm_scoring

    assert warm_scoring(RunConfig(model="gold", level="all", limit=None), workers=False) is None
    assert warm_scoring(RunConfig(model="stub", level="all", limit=None), workers=True) is None
    warmed = warm_scoring(RunConfig(model="stub", level="all", limit=None), workers=False)
    assert warmed.scorer() is warmed.scorer()  # the run's one scorer, which the session is handed
    warmed.close()  # waits for the load under way
    assert loaded == [("official", "2"), ("official", "3")]
    loaded.clear()
    searches = [i for i in manifests.manifest_ids("all") if get_task(i).gold.api_name == "ToolSearcher"]
    others = [i for i in manifests.manifest_ids("all") if i not in searches]
    warm_scoring(RunConfig(model="stub", level="all", limit=None, only=others[:5]), workers=False).close()
    assert loaded == []


def test_run_scores_with_the_scorer_it_warmed(tmp_path):
    """The warm-up's scorer is the run's: `run` builds its parts' scorer once, warms it, and hands it to the pytest
    session (plugin.options.GivenSettings), which scores with it."""
    with OpenAIStub(default=lambda body: correct()) as stub:
        counts = counted_run(["run", "--model", "A", "--base-url", stub.url, "--limit", "2", "--no-cache",
                              "--out-dir", str(tmp_path / "out")],
                             {"scorers": ("apibank_bench.scoring.scorer", "Scorer.__init__")})
    assert counts == {"code": 0, "scorers": 1}
