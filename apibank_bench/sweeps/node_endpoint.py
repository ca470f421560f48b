"""A cell's own endpoint: a command that starts a server where the cell runs and prints its URL.

`--endpoint-command CMD` (a sweep setting) is run by each cell, in a shell on the
node the cell landed on, before the cell's `run`: it starts an OpenAI-compatible
server and prints the server's base URL (the first line of its standard output
that starts with `http://` or `https://`), then keeps running. The cell's run uses
that URL as its `--base-url`; when the run ends, the command's whole process group
is stopped (SIGTERM, then SIGKILL). `$APIBANK_FREE_PORT` holds a port that was free
on the node a moment before, for a server that needs one. The command's output
goes to the cell's `endpoint.log`; the URL is tried (`GET /models`) until it answers
or `--endpoint-wait` seconds have passed since the command started.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

LOG = "endpoint.log"


class EndpointStartError(RuntimeError):
    """The command ended, printed no URL, or its server never answered."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _answers(url: str) -> bool:
    import urllib.error
    import urllib.request

    try:
        urllib.request.urlopen(url.rstrip("/") + "/models", timeout=5).close()
    except urllib.error.HTTPError:
        return True  # it answered
    except (urllib.error.URLError, OSError):
        return False
    return True


def _stop(process: subprocess.Popen) -> None:
    for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(grace)
            return
        except subprocess.TimeoutExpired:
            continue


def _ended(process: subprocess.Popen[str]) -> int | None:
    """Its exit code once its output has closed: the pipe closes a moment before the exit is reaped."""
    try:
        return process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        return None  # it closed its output and lives on


@contextmanager
def node_endpoint(command: str, folder: Path, wait_s: float) -> Iterator[str]:
    """Start `command`, yield the URL it prints once it answers; stop it (its process group) afterwards."""
    folder.mkdir(parents=True, exist_ok=True)
    log = open(folder / LOG, "a", encoding="utf-8")
    log.write(f"$ {command}\n")
    log.flush()
    process = subprocess.Popen(command, shell=True, stdout=subprocess.PIPE, stderr=log, text=True,
                               start_new_session=True,  # its own process group: stopped as a whole
                               env={**os.environ, "APIBANK_FREE_PORT": str(free_port())})
    output = process.stdout
    assert output is not None  # stdout=PIPE
    found: list[str] = []
    seen = threading.Event()

    def read() -> None:  # the command's output, to the log; the first URL line is the answer
        for line in output:
            log.write(line)
            log.flush()
            if not found and line.strip().startswith(("http://", "https://")):
                found.append(line.strip())
                seen.set()
        seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + wait_s
        seen.wait(wait_s)
        if not found:
            ended = _ended(process) if seen.is_set() else process.poll()  # set without a URL: its output closed
            raise EndpointStartError(f"the endpoint command {'exited ' + str(ended) if ended is not None else 'printed no URL'}"
                                     f" (see {folder / LOG})")
        url = found[0]
        while not _answers(url):
            if process.poll() is not None:
                raise EndpointStartError(f"the endpoint command exited {process.returncode} before {url} answered")
            if time.monotonic() > deadline:
                raise EndpointStartError(f"{url} did not answer within {wait_s:.0f} s")
            time.sleep(1.0)
        yield url
    finally:
        _stop(process)
        reader.join(5)
        log.close()
