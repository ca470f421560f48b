"""An endpoint command for tests: starts the scripted OpenAI-protocol server, prints its URL, runs until stopped.

    python tests/stub_endpoint.py PIDS_FILE   # appends its process ID to PIDS_FILE
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from openai_stub import OpenAIStub  # noqa: E402
from helpers import mixed  # noqa: E402

stopped = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stopped.set())
with OpenAIStub(default=mixed) as stub, open(sys.argv[1], "a") as pids:
    pids.write(f"{os.getpid()}\n")
    pids.flush()
    print("starting the stub", flush=True)  # a line that is not the URL
    print(stub.url, flush=True)
    stopped.wait()
