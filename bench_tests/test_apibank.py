"""API-Bank as tests: one case per instance; a pass is a correct API call."""

import pytest

from apibank_bench.pytest_plugin import record
from apibank_bench.runner import solve_and_score


def test_apibank(request, apibank_task, apibank_solver, apibank_scorer):
    outcome = solve_and_score(apibank_task, apibank_solver, apibank_scorer)
    record(request.node, outcome.payload)
    if not outcome.correct:
        # Short: stage, error, predicted and gold call (no traceback: a wrong answer is not a bug).
        pytest.fail(outcome.failure_message, pytrace=False)
