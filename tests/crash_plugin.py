"""A pytest plugin for one test: the xdist worker running the instance named by APIBANK_CRASH_ON dies on the spot."""

import os

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):  # before the instance's result is recorded
    victim = os.environ.get("APIBANK_CRASH_ON")
    callspec = getattr(item, "callspec", None)
    if victim and hasattr(item.config, "workerinput") and callspec and callspec.params.get("apibank_task_id") == victim:
        os._exit(1)
