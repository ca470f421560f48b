# The benchmark's pytest plugin: options (--apibank-*), instance parametrization, results files.
pytest_plugins = ["apibank_bench.plugin"]
