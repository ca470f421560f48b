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
    """Turn SIGTERM into KeyboardInterrupt for this session, unless someone else handles it already, and let
    Ctrl-C (SIGINT) act once: the interrupt's own wind-down (the rows kept, summary.json and the closing table
    written, xdist's workers told to stop) is not cut short by a second Ctrl-C, which is said and otherwise
    ignored. `workers`: the process ids of the controller's xdist workers, filled as they come up."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
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
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _first_ctrl_c(config))

        def restore_int() -> None:
            signal.signal(signal.SIGINT, signal.default_int_handler)

        config.add_cleanup(restore_int)


def _first_ctrl_c(config: pytest.Config) -> Any:
    """SIGINT's handler: the first raises KeyboardInterrupt (pytest's interrupt path); later ones, while the run
    winds down, are said once and ignored (a terminal's Ctrl-C reaches every process of the run: each of xdist's
    workers winds down too, so the controller can still tell them to stop). SIGKILL, or Ctrl-\\ (SIGQUIT),
    still ends the process at once."""
    said: list[int] = []

    def handler(signum: int, frame: Any) -> None:
        if not said:
            said.append(signum)
            raise KeyboardInterrupt
        if len(said) == 1 and not hasattr(config, "workerinput"):
            said.append(signum)
            _say(config, "\napibank: stopping: writing what finished (summary.json, the closing table); "
                         "Ctrl-\\ quits at once")

    return handler


def _say(config: pytest.Config, text: str) -> None:
    """A line on the terminal, past pytest's output capture (which holds fd 1 and 2 while tests run)."""
    import contextlib

    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is None:
        return
    try:
        with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
            reporter.ensure_newline()
            reporter.write_line(text, yellow=True)
    except Exception:  # noqa: BLE001 - a line of courtesy never stops the wind-down
        pass
