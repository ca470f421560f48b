"""The embedded model: started once per run by the controller, its URL handed to xdist workers
in `workerinput` (the one channel), stopped at the end. Also the xdist scheduler that gives
each worker its share of instances up front, so it can keep them in flight."""

from __future__ import annotations

import contextlib

import pytest

from apibank_bench.agents.models import needs_local_server
from apibank_bench.llm.local_server import OnDemandServer

#: Seconds the embedded server gets to exit on SIGTERM before SIGKILL. Its graceful shutdown (uvicorn's) waits
#: for the completions being generated, a minute each at worst, which a stopped run has abandoned; an idle
#: server exits at once.
STOP_GRACE_S = 1.0


class EndpointPlugin:
    def __init__(self, config) -> None:
        self.config = config
        self.local: OnDemandServer | None = None
        self.worker_counts: list[dict] = []  #: each finished xdist worker's requests per endpoint
        self.worker_closed: list[dict] = []  #: each finished xdist worker's closed connections (`own_closed`)

    def own_counts(self) -> dict:
        """This process's requests, errors, latency and learned in-flight limit per endpoint (URL credentials
        masked)."""
        from apibank_bench.core.redact import redact
        from apibank_bench.plugin.keys import MODEL

        client = self.config.stash.get(MODEL, None)
        if client is None:
            return {}
        counts = client.endpoint_counts() if hasattr(client, "endpoint_counts") else client.endpoint_report()
        return {redact(url): part for url, part in counts.items()}

    def endpoint_counts(self) -> dict:
        """The run's requests per endpoint: this process's and its workers'."""
        from apibank_bench.llm.router import merge_snapshots

        return merge_snapshots([self.own_counts(), *self.worker_counts])

    def own_closed(self) -> dict:
        """The connections the server closed on this process's requests, and the in-flight limit that held."""
        from apibank_bench.plugin.keys import MODEL

        client = self.config.stash.get(MODEL, None)
        if client is None:
            return {}
        return {"count": client.closed.count, "most_in_flight": client.closed.most_in_flight,
                "in_flight_limit": client.in_flight_limit()}

    def closed_connections(self) -> dict:
        """The run's closed connections: counts summed over its processes, as are their in-flight limits (each
        process has its own), and the most in flight at a close in any one of them."""
        parts = [part for part in (self.own_closed(), *self.worker_closed) if part]
        if not parts:
            return {}
        return {"count": sum(part["count"] for part in parts),
                "most_in_flight": max(part["most_in_flight"] for part in parts),
                "in_flight_limit": sum(part["in_flight_limit"] for part in parts)}

    def pytest_sessionfinish(self) -> None:
        from apibank_bench.plugin.run import is_worker

        if is_worker(self.config):  # travels to the controller with the worker's end
            self.config.workeroutput["apibank_endpoints"] = self.own_counts()
            self.config.workeroutput["apibank_closed"] = self.own_closed()

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error) -> None:
        output = getattr(node, "workeroutput", {})
        if output.get("apibank_endpoints"):
            self.worker_counts.append(output["apibank_endpoints"])
        if output.get("apibank_closed"):
            self.worker_closed.append(output["apibank_closed"])

    def base_url(self) -> str:
        """The embedded server's URL: from the controller on a worker, else started here."""
        from apibank_bench.plugin.run import is_worker, run_config

        if is_worker(self.config) and self.config.workerinput.get("apibank_base_url"):
            return self.config.workerinput["apibank_base_url"]
        if self.local is None:
            self.local = OnDemandServer(run_config(self.config).cache_root, self.announce_start)
        return self.local.url()

    def announce_start(self) -> None:
        """One line as the embedded model starts; it starts inside a test's setup, so past pytest's capture."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        capture = self.config.pluginmanager.get_plugin("capturemanager")
        if reporter is None:
            return
        with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
            reporter.write_line("apibank: starting the embedded local model (Gemma 3 270M, a smoke model)")

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node):  # xdist controller, once per worker
        from apibank_bench.plugin.run import SETTINGS_KEY, bench_requested, run_config

        node.workerinput["apibank_share"] = None
        if bench_requested(self.config):
            node.workerinput[SETTINGS_KEY] = run_config(self.config).to_record()  # resolved once, by the controller
            if needs_local_server(run_config(self.config)):
                node.workerinput["apibank_base_url"] = self.base_url()
            if self.config.getoption("dist", "load") == "load":
                index, count = int(node.workerinput["workerid"][2:]), node.workerinput["workercount"]
                if index < count:  # a worker that replaces a crashed one gets leftovers, not a share
                    node.workerinput["apibank_share"] = [index, count]

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config, log):
        from apibank_bench.plugin.run import bench_requested

        if bench_requested(config) and config.getoption("dist", "load") == "load":
            return share_scheduler(config, log)
        return None

    def pytest_unconfigure(self, config) -> None:
        if self.local is not None:
            self.local.stop(STOP_GRACE_S)


def share_scheduler(config, log):
    """xdist's load scheduler, except that worker k of n gets items k, k + n, ... all at once."""
    from xdist.scheduler import LoadScheduling

    class ShareScheduling(LoadScheduling):
        def schedule(self) -> None:
            if self.collection is not None:  # a replacement worker after a crash: hand out what is left
                return super().schedule()
            if not self._check_nodes_have_same_collection():
                self.log("**Different tests collected, aborting run**")
                return
            self.collection = list(next(iter(self.node2collection.values())))
            self.pending[:] = []
            self.maxschedchunk = self.maxschedchunk or len(self.collection)
            nodes = sorted(self.nodes, key=lambda node: int(node.workerinput["workerid"][2:]))
            for index, node in enumerate(nodes):
                share = list(range(index, len(self.collection), len(nodes)))
                if share:
                    self.node2pending[node].extend(share)
                    node.send_runtest_some(share)
            for node in nodes:
                node.shutdown()

    return ShareScheduling(config, log)
