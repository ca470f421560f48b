from pathlib import Path

import pytest
from openai_stub import OpenAIStub

from apibank_bench.core.paths import require_root
from apibank_bench.core.settings import value_from_environment
from apibank_bench.runs.setting_rules import hand_down

hand_down()  # the suite is a composition root, as the CLI and the plugin are

TESTS = Path(__file__).resolve().parent
#: The project's own deprecations (a deprecated flag or variable): asserted where they are tested (pytest.warns);
#: a test that uses one by mistake fails on its warning instead of printing it. Only for this suite's tests: a
#: benchmark run under pytest still warns.
OWN_DEPRECATIONS = "error:(--(apibank-)?max-consecutive-errors|APIBANK_\\w+) is deprecated:DeprecationWarning"


def pytest_collection_modifyitems(items):
    for item in items:
        if TESTS in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.filterwarnings(OWN_DEPRECATIONS))


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
