"""The benchmark as a test module that ships with the package: `pytest --pyargs apibank_bench.bench`
runs API-Bank from any folder, with the plugin's options (`-n auto`, `-k level3`, `--lf`,
`--apibank-baseline`, `--json-report`). The checkout's `bench_tests/` is a thin module that imports it.
"""

from pathlib import Path

BENCH_MODULE = __name__  #: `pytest --pyargs apibank_bench.bench`
BENCH_DIR = Path(__file__).resolve().parent
