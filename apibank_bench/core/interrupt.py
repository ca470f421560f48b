"""Signals deferred around a write that must be whole: `deferred()`.

An interrupt (Ctrl-C, or SIGTERM turned into one by the plugin) arriving inside the block acts when it ends.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def deferred() -> Iterator[None]:
    """Ctrl-C or SIGTERM arriving inside the block acts when it ends: a results line, its prediction and its
    trace are written whole, or not at all (an interrupt between them would leave a row without its trace,
    which `--resume` takes as finished). Only the main thread receives Python's signal handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous: dict[int, Any] = {sig: signal.signal(sig, lambda signum, frame: caught.append(signum))
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if caught:
            handler = previous[caught[0]]
            if callable(handler):
                handler(caught[0], None)  # KeyboardInterrupt, now
            elif handler == signal.SIG_DFL:
                os.kill(os.getpid(), caught[0])
