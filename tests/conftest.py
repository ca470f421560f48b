import pytest

from apibank_bench.core.paths import require_root


@pytest.fixture(scope="session")
def apibank_root():
    """The data root the suite would use (vendor/api-bank or $APIBANK_ROOT)."""
    return require_root()
