"""What the plugin keeps on `config.stash` (the run, for its fixtures) and `item.stash`."""

import pytest

from apibank_bench.runs.benchmark_run import BenchmarkRun

RUN = pytest.StashKey[BenchmarkRun]()  #: the session's run (plugin.bench_session)
RESULT = pytest.StashKey[dict]()  #: an item's results.jsonl line
USER_PROPERTY = "apibank"  #: the key of an instance's lines in a report's user_properties
