"""One progress line for a person: rewritten in place on a terminal, a plain line now and then otherwise.

A run, a sweep and an optimizer job each describe where they are in one line
(`render`); this module decides how it reaches the screen. On a terminal the
line is redrawn in place, cut to the terminal's width (a wrapped line could not
be redrawn), and erased before anything else is printed; elsewhere (a log file,
CI) a line is printed at most every `every_s` seconds.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import threading
import time
from typing import Callable, TextIO

ERASE = "\r\x1b[2K"


def is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def terminal_width(stream: TextIO, fallback: int = 80) -> int:
    """The width of the terminal `stream` writes to, asked of the stream itself, each time (a window may be
    resized). Under pytest fd 1 is captured, so asking it (as `shutil.get_terminal_size` does) gives the
    fallback, and a line of that width wraps on a narrower terminal, where it can no longer be redrawn in place."""
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        columns = 0
    return columns or shutil.get_terminal_size((fallback, 20)).columns


def duration(seconds: float) -> str:
    """3725 -> '1h02m', 125 -> '2m05s', 7.4 -> '7s'."""
    seconds = max(int(round(seconds)), 0)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def eta(done: float, total: float, elapsed_s: float) -> str | None:
    """The time left at the rate so far (None until something is done)."""
    if not done or not total or elapsed_s <= 0:
        return None
    return duration((total - done) * elapsed_s / done)


class ProgressLine:
    """Shows `render()`: on every `update`, and every `interval_s` from a background thread once started.

    `live`: redraw one line in place (default: whether `stream` is a terminal).
    """

    def __init__(self, render: Callable[[], str], stream: TextIO | None = None, live: bool | None = None,
                 every_s: float = 10.0, interval_s: float = 1.0) -> None:
        self.render = render
        self.stream = stream if stream is not None else sys.stdout
        self.live = is_terminal(self.stream) if live is None else live
        self.every_s = every_s
        self.interval_s = interval_s if self.live else every_s
        self._shown = False  #: a live line is on the screen
        self._last = time.monotonic()  #: a plain line comes `every_s` after the start, not at once
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def update(self, force: bool = False) -> None:
        with self._lock:
            now = time.monotonic()
            if not self.live and not force and now - self._last < self.every_s:
                return
            self._last = now
            text = self.render()
            if self.live:  # one column short of the width: a line that fills it wraps on some terminals
                self.stream.write(ERASE + text[:max(terminal_width(self.stream) - 1, 20)])
                self._shown = True
            else:
                self.stream.write(text + "\n")
            self.stream.flush()

    def say(self, text: str) -> None:
        """Print a line of its own: above a live line (which is drawn again at once), or as is."""
        with self._lock:
            self.clear()
            self.stream.write(text + "\n")
            self.stream.flush()
            if self.live:
                self.update()

    def clear(self) -> None:
        """Erase a live line (what is printed next starts on a clean line)."""
        with self._lock:
            if self._shown:
                self.stream.write(ERASE)
                self.stream.flush()
                self._shown = False

    def start(self) -> "ProgressLine":
        if self._thread is None:
            self._thread = threading.Thread(target=self._tick, name="progress-line", daemon=True)
            self._thread.start()
            # Never left running into the interpreter's end (a daemon thread is cut off wherever it is then):
            # one whose owner did not stop it is stopped as the interpreter begins to end.
            atexit.register(self._end_thread)
        return self

    def _tick(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.update()

    def stop(self) -> None:
        """Stop the background updates and erase the live line."""
        self._end_thread()
        self.clear()

    def _end_thread(self) -> None:
        atexit.unregister(self._end_thread)
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        self._thread = None
