# The benchmark's pytest plugins: options (--apibank-*), instance parametrization, results files;
# and the regression gate (--apibank-baseline), which sits above them on the paired comparison.
pytest_plugins = ["apibank_bench.plugin", "apibank_bench.reports.gate"]
