"""API-Bank as tests, in the checkout: the package's benchmark module (`apibank_bench.bench`), imported.
Any project can hold such a module; a session that collects one is a benchmark run."""

from apibank_bench.bench.test_apibank import test_apibank  # noqa: F401 - collected here
