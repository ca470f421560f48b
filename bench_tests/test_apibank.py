"""API-Bank as tests: one case per instance; a pass is a correct API call."""

from apibank_bench.pytest_plugin import record
from apibank_bench.runner import solve_and_score


def test_apibank(request, apibank_task, apibank_solver, apibank_scorer):
    outcome = solve_and_score(apibank_task, apibank_solver, apibank_scorer)
    record(request.node, outcome.payload)
    assert outcome.correct, outcome.failure_message
