import pytest

from apibank_bench.core.paths import require_root
from apibank_bench.core.settings import value_from_environment


@pytest.fixture(scope="session")
def apibank_root():
    """The data root the suite would use (vendor/api-bank or $APIBANK_ROOT)."""
    return require_root(value_from_environment("root"))
