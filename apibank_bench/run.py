"""`apibank-bench run` and `merge`: the reference's runner interface over the pytest suite."""

from __future__ import annotations


def add_run_parsers(sub) -> None:
    """Registered once the pytest suite exists (see bench_tests/)."""
