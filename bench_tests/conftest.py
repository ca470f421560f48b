"""Fixtures of the benchmark: the data root, the scorer and the model are per session;
the topology is built per test."""

from __future__ import annotations

import pytest

from apibank_bench.agents import build_solver
from apibank_bench.agents.models import EndpointUnreachable, model_client
from apibank_bench.pytest_plugin import local_base_url, run_config
from apibank_bench.paths import DataMissing, require_root
from apibank_bench.scoring import Scorer
from apibank_bench.tasks import get_task


@pytest.fixture(scope="session")
def apibank_config(pytestconfig):
    return run_config(pytestconfig)


@pytest.fixture(scope="session")
def apibank_root(apibank_config):
    try:
        return require_root(apibank_config.root)
    except DataMissing as exc:
        pytest.exit(str(exc), returncode=4)


@pytest.fixture(scope="session")
def apibank_scorer(apibank_config, apibank_root):
    return Scorer(apibank_root, apibank_config.toolsearcher_scorer)


@pytest.fixture(scope="session")
def apibank_model(apibank_config, pytestconfig):
    """The shared chat client (None for the gold self-check); starts the embedded model if needed."""
    try:
        return model_client(apibank_config, lambda: local_base_url(pytestconfig))
    except (EndpointUnreachable, ValueError) as exc:
        pytest.exit(f"apibank: {exc}", returncode=3)


@pytest.fixture
def apibank_task(apibank_task_id, apibank_root):
    return get_task(apibank_task_id, root=apibank_root)


@pytest.fixture
def apibank_solver(apibank_config, apibank_model):
    """The topology for this test, a small graph over the shared agent pieces."""
    return build_solver(apibank_config, apibank_model)
