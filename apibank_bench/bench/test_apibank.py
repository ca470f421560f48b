"""API-Bank as tests: one case per instance; a pass is a correct API call."""

import pytest


def test_apibank(apibank_result):
    if not apibank_result.correct:
        # Short: stage, error, predicted and gold call (no traceback: a wrong answer is not a bug).
        pytest.fail(apibank_result.failure_message, pytrace=False)
