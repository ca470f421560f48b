import pytest
from openai_stub import OpenAIStub

from apibank_bench.core.paths import require_root
from apibank_bench.core.settings import value_from_environment
from apibank_bench.runs.setting_rules import hand_down

hand_down()  # the suite is a composition root, as the CLI and the plugin are


@pytest.fixture(scope="session")
def apibank_root():
    """The data root the suite would use (vendor/api-bank or $APIBANK_ROOT)."""
    return require_root(value_from_environment("root"))


@pytest.fixture
def stub():
    """A local OpenAI-compatible stand-in (tests/openai_stub.py), for one test: set `stub.default` or
    queue replies to script it. Modules that need another lifetime or script build their own server."""
    with OpenAIStub() as server:
        yield server
