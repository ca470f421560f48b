"""A pytest plugin for one test: the session dies on the spot, as under `kill -9` (no summary, no clean-up),
once the writer has written APIBANK_KILL_AFTER instances; with APIBANK_KILL_TORN set it first leaves half a
line at the end of results.jsonl, as a writer killed mid-line does. With APIBANK_INTERRUPT_AFTER instead, the
session gets a Ctrl-C (SIGINT) then, and winds down as a person's Ctrl-C makes it."""

import os
import signal
from pathlib import Path

import pytest

_written: set[str] = set()


@pytest.hookimpl(trylast=True)  # after the writer has appended the instance's lines
def pytest_runtest_logreport(report):
    after = os.environ.get("APIBANK_KILL_AFTER") or os.environ.get("APIBANK_INTERRUPT_AFTER")
    if after is None or not any(key == "apibank" for key, _ in report.user_properties):
        return
    _written.add(report.nodeid)
    if len(_written) == int(after):
        if os.environ.get("APIBANK_INTERRUPT_AFTER"):
            os.kill(os.getpid(), signal.SIGINT)
            return
        if os.environ.get("APIBANK_KILL_TORN"):
            with open(Path(os.environ["APIBANK_KILL_TORN"]) / "results.jsonl", "ab") as handle:
                handle.write(b'{"id": "level-1::half-writ')
        os._exit(9)
