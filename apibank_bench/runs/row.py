"""What a results.jsonl row says of its instance: an error (no answer) or a correct answer."""

from __future__ import annotations

from apibank_bench.scoring.stage import Stage


def is_error(row: dict) -> bool:
    """An infrastructure failure (endpoint, timeout, crash): not an answer, never correct."""
    return row.get("stage") == Stage.ERROR


def is_correct(row: dict) -> bool:
    return bool(row.get("correct")) and not is_error(row)
