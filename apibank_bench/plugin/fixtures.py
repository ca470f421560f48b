"""The benchmark's fixtures, registered by the plugin (the benchmark's module, apibank_bench.bench, holds only the
test). Per session, the run's parts (runs.parts.RunParts, the run's own): the data root, the scorer, the model,
the topology and the pool that keeps this process's instances in flight. Per test: its instance's result."""

from __future__ import annotations


import pytest

from apibank_bench.core.lasting import freeze_lasting
from apibank_bench.llm.probe import EndpointUnreachable
from apibank_bench.runs.epochs import split_case
from apibank_bench.runs.instances import RunStopped
from apibank_bench.core.exit_codes import ExitCode
from apibank_bench.core.paths import DataMissing, require_root
from apibank_bench.plugin.bench_session import stop_message
from apibank_bench.plugin.keys import RESULT, RUN, USER_PROPERTY
from apibank_bench.plugin.options import my_instances
from apibank_bench.runs.results import capped_json
from apibank_bench.data.tasks import get_task


@pytest.fixture(scope="session")
def apibank_run(pytestconfig):
    """The session's run (runs.benchmark_run.BenchmarkRun): its settings, model client, pool."""
    return pytestconfig.stash[RUN]


@pytest.fixture(scope="session")
def apibank_config(apibank_run):
    return apibank_run.cfg


@pytest.fixture(scope="session")
def apibank_root(apibank_config):
    try:
        return require_root(apibank_config.root)
    except DataMissing as exc:
        pytest.exit(str(exc), returncode=pytest.ExitCode.USAGE_ERROR)


@pytest.fixture(scope="session")
def apibank_scorer(request, apibank_run, apibank_config, apibank_root):
    """The scorer; for a model's answers it starts loading, in the background, the embedding model
    that scoring this process's ToolSearcher instances may need (gold answers never need it). The
    session's end stops that load (`Preload.stop`: what has started is finished, nothing more starts)."""
    scorer = apibank_run.parts.scorer()
    preload = None
    if not apibank_config.is_gold:
        task_ids = dict.fromkeys(split_case(case)[0] for case in my_instances(request.session))
        preload = scorer.preload(get_task(task_id, root=apibank_root) for task_id in task_ids)
    yield scorer
    if preload is not None:
        preload.stop()


@pytest.fixture(scope="session")
def apibank_model(apibank_run):
    """The shared chat client (None for the gold self-check); starts the embedded model if needed. At the
    session's end its requests still in flight are abandoned."""
    try:
        client = apibank_run.parts.models()
    except EndpointUnreachable as exc:
        pytest.exit(f"apibank: {exc}", returncode=ExitCode.UNREACHABLE)
    except ValueError as exc:  # e.g. a --model-role for a role the topology does not have: a usage error
        pytest.exit(f"apibank: {exc}", returncode=pytest.ExitCode.USAGE_ERROR)
    yield client
    if client is not None:  # the session's end, also after Ctrl-C or SIGTERM (plugin.interrupt)
        # A request still in flight now belongs to an instance that gets no row (its test will not run):
        # cut it off rather than wait for the server, which could take minutes (`ChatClient.abandon`).
        client.abandon("the run ended")


@pytest.fixture(scope="session")
def apibank_solver(apibank_run, apibank_model):
    """The run's topology, built once: a small graph over the shared agent pieces."""
    return apibank_run.parts.solver()


@pytest.fixture(scope="session")
def apibank_pool(request, apibank_run, apibank_model, apibank_solver, apibank_scorer):
    """Solves this process's instances, `concurrency` at a time, starting with the first tests'; a dead
    endpoint trips the model layer's breaker, which stops it (no more instances start)."""
    freeze_lasting()  # the model layer, LangGraph, the solver, the APIs: out of later collections' sight
    pool = apibank_run.start_pool(my_instances(request.session))  # over the run's parts: these fixtures' values
    yield pool
    pool.close()


@pytest.fixture
def apibank_result(request, apibank_task_id, apibank_pool):
    """This instance's result. An error (no answer to score) fails the setup, so pytest reports an error."""
    try:
        result = apibank_pool.result(apibank_task_id)
    except RunStopped as exc:  # the circuit breaker (or -x) cancelled it: no row. Each such test is skipped
        # at once ("not run"), rather than pytest stopping at the first, so its count says how many did not run.
        pytest.skip(stop_message(str(exc)))
    record(request.node, result.payload)
    if result.is_error:
        pytest.fail(f"[error] {result.score.error}", pytrace=False)
    return result


def record(item, payload: dict) -> None:
    """Attach one instance's lines to its test report: JSON text, the one form that travels through xdist."""
    item.stash[RESULT] = payload["result"]
    item.user_properties.append((USER_PROPERTY, capped_json(payload)))  # a 10 MB answer travels cut
