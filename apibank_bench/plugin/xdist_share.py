"""The benchmark session's xdist side: the embedded model started once by the controller, its URL and the
run's settings handed to each worker in `workerinput` (the one channel), each worker's share of the
instances up front (so it can keep them in flight), its counts handed back in `workeroutput`, and an
error row for the instance of a worker that died (xdist's `pytest_handlecrashitem`)."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from xdist.scheduler import LoadScheduling

from apibank_bench.core import settings
from apibank_bench.plugin.options import SETTINGS_KEY, SHARE_KEY, URL_KEY, VOICE_KEY
from apibank_bench.runs.benchmark_run import BenchmarkRun
from apibank_bench.scoring.stage import Reason

#: Seconds the embedded server gets to exit on SIGTERM before SIGKILL. Its graceful shutdown (uvicorn's) waits
#: for the completions being generated, a minute each at worst, which a stopped run has abandoned; an idle
#: server exits at once.
STOP_GRACE_S = 1.0
COUNTS_KEY, CLOSED_KEY = "apibank_endpoints", "apibank_closed"  #: a worker's `workeroutput` keys


class XdistParts:
    """Mixed into `BenchSession`: its hooks that only an xdist run calls, and the embedded model's announcement."""

    config: pytest.Config
    run: BenchmarkRun
    requested: bool
    worker_pids: list[int]  #: the controller's xdist workers' process ids
    configured_nodes = 0  #: workers configured so far (in order: gw0, gw1...)

    def announce_start(self, title: str) -> None:
        """One line as an embedded model starts; it starts inside a test's setup, so past pytest's capture."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        capture = self.config.pluginmanager.get_plugin("capturemanager")
        if reporter is None:
            return
        with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
            reporter.write_line(f"apibank: starting the embedded local model ({title})")

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodeready(self, node: Any) -> None:
        """A worker is up; its process is the gateway's (execnet's popen, the one handle on it): a SIGTERM to
        the controller is handed on to it (plugin.interrupt)."""
        pid = getattr(getattr(getattr(getattr(node, "gateway", None), "_io", None), "popen", None), "pid", None)
        if isinstance(pid, int):
            self.worker_pids.append(pid)

    def hand_back_counts(self) -> None:
        """A worker's requests and closed connections travel to the controller with the worker's end."""
        output = self.config.workeroutput  # type: ignore[attr-defined]  # xdist sets it on a worker
        output[COUNTS_KEY] = self.run.endpoint_counts()
        output[CLOSED_KEY] = self.run.own_closed()

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        output = getattr(node, "workeroutput", {})
        self.run.add_worker(output.get(COUNTS_KEY), output.get(CLOSED_KEY))

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:  # the controller, once per worker, in order
        from apibank_bench.agents.models import needs_local_server

        index, count = self.configured_nodes, node.workerinput["workercount"]
        self.configured_nodes += 1
        node.workerinput[SHARE_KEY] = None
        if not self.requested:
            return
        node.workerinput[SETTINGS_KEY] = self.run.cfg.to_record()  # resolved once, by the controller
        node.workerinput[VOICE_KEY] = settings.voice()  # its messages' words: `run`'s flags under the CLI
        if needs_local_server(self.run.cfg):
            node.workerinput[URL_KEY] = self.run.parts.embedded_urls()
        if self.config.getoption("dist", "load") == "load" and index < count:
            node.workerinput[SHARE_KEY] = [index, count]  # a worker replacing a crashed one gets leftovers

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        if self.requested and config.getoption("dist", "load") == "load":
            return ShareScheduling(config, log)
        return None

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self.run.collect([case for case in map(self.case_of_node, ids) if case is not None])

    def case_of_node(self, nodeid: str) -> str | None:
        """The case of a benchmark test the controller knows only by node ID (xdist's collection and crash
        reports): looked up among the run's cases by the ID pytest gives each (`pytest_generate_tests`)."""
        ids = getattr(self, "_case_ids", None)
        if ids is None:
            ids = self._case_ids = {f"[{case}]": case for case in self.run.cases()}
        return ids.get(nodeid[nodeid.find("["):]) if "[" in nodeid else None

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem: str, report: Any, sched: Any) -> None:
        """xdist: the worker running `crashitem` died. An instance's case gets an error row, so none goes missing."""
        from apibank_bench.data.tasks import get_task
        from apibank_bench.runs.epochs import split_case
        from apibank_bench.runs.instances import error_result

        case = self.case_of_node(crashitem)
        if case is None:
            return None  # not one of this run's cases
        task_id, epoch = split_case(case)
        try:
            task = get_task(task_id, root=self.run.cfg.root)
        except (KeyError, ValueError, OSError):
            return None
        message = f"harness crash: the test process died ({str(report.longrepr).strip().splitlines()[0][:200]})"
        self.add(error_result(task, message, epoch, reason=Reason.ERROR_WORKER_CRASH).payload)
        return None  # the report stays a failure; xdist does not reschedule the case

    def add(self, payload: dict) -> None:
        raise NotImplementedError  # BenchSession's


class ShareScheduling(LoadScheduling):
    """xdist's load scheduler, except that worker k of n gets items k, k + n, ... all at once."""

    collection: list[str] | None  # LoadScheduling's, declared in its __init__ (which mypy cannot see from here)
    maxschedchunk: int | None

    def schedule(self) -> None:
        if self.collection is not None:  # a replacement worker after a crash: hand out what is left
            return super().schedule()
        if not self._check_nodes_have_same_collection():
            self.log("**Different tests collected, aborting run**")
            return
        collection = list(next(iter(self.node2collection.values())))
        self.collection = collection
        self.pending[:] = []
        self.maxschedchunk = self.maxschedchunk or len(collection)
        # A worker that replaced one lost during collection has no share: it goes last.
        nodes = sorted(self.nodes, key=lambda node: (node.workerinput.get(SHARE_KEY) or [len(self.nodes)])[0])
        for index, node in enumerate(nodes):
            share = list(range(index, len(collection), len(nodes)))
            if share:
                self.node2pending[node].extend(share)
                node.send_runtest_some(share)
        for node in nodes:
            node.shutdown()
