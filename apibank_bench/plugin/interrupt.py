"""SIGTERM stops a run as Ctrl-C does: pytest's interrupt path, so what finished is kept, the summary and
the closing table are written, the embedded server is stopped, and the requests in flight are abandoned
(the model fixture's teardown), in a second or two whatever the server is doing.

Unhandled, SIGTERM would kill the process on the spot (no summary, no closing table), and a `SystemExit`
(what the embedded server's own handler raises) is an internal error to pytest. The handler acts once:
a second SIGTERM changes nothing (SIGKILL still ends the process).

Under xdist, the controller hands a SIGTERM on to its workers (`kill PID` or a container's stop signals the
controller alone), so they stop at once too, not 5 s later when execnet's teardown interrupts them. A
terminal's Ctrl-C reaches every process of the run already. The embedded server has a session of its own
and is stopped by the controller.
"""

from __future__ import annotations

import os
import signal
import threading

from typing import Any

import pytest


def install(config: pytest.Config, workers: list[int]) -> None:
    """Turn SIGTERM into KeyboardInterrupt for this session, unless someone else handles it already.
    `workers`: the process ids of the controller's xdist workers, filled as they come up."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return
    def interrupt(signum: int, frame: Any) -> None:
        signal.signal(signum, signal.SIG_IGN)  # once: the interrupt's own cleanup must not be interrupted
        for pid in workers:
            try:
                os.kill(pid, signum)
            except OSError:  # gone already
                pass
        raise KeyboardInterrupt(f"stopped by {signal.Signals(signum).name}")

    signal.signal(signal.SIGTERM, interrupt)
    def restore() -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

    config.add_cleanup(restore)
