"""The job ledger of a sweep folder (`jobs.json`): which engine job holds each cell, and its state.

Several `sweep` commands (a rerun, `--status`, another machine on the shared file
system) may read and change it at once, so every change is a read-modify-write
under an exclusive lock on `jobs.lock` (POSIX record locks, which NFS carries)
and the file is replaced atomically: no update is lost and no reader sees half a
file. A cell whose recorded job is still queued or running is not submitted
again; while a sweep is submitting, its claim (`SUBMITTING` with the claimant's
host and process) holds the cell. A record's state is what the sweep last saw; the
engine (`active`) has the last word on whether a job still runs.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from apibank_bench.core.files import write_atomic

LEDGER, LOCK = "jobs.json", "jobs.lock"
SUBMITTING = "SUBMITTING"
ENDED = "ENDED"  #: the prefix of the state of a job known to have ended
#: A claim from another host cannot be checked; after this long it is taken as abandoned.
CLAIM_EXPIRES_S = 600.0


def this_process() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def process_alive(host_pid: str) -> bool:
    """Whether `host:pid` is a live process; one on another host counts as alive (it cannot be checked here)."""
    host, _, pid = host_pid.rpartition(":")
    if host != socket.gethostname():
        return True
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


class Ledger:
    def __init__(self, out: Path) -> None:
        self.out = Path(out)

    def read(self) -> dict[str, dict]:
        try:
            data = json.loads((self.out / LEDGER).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        return data if isinstance(data, dict) else {}

    @contextmanager
    def change(self) -> Iterator[dict[str, dict]]:
        """The records, to change in place; written back (atomically) when the block ends, all under the lock."""
        self.out.mkdir(parents=True, exist_ok=True)
        with open(self.out / LOCK, "a+") as lock:
            fcntl.lockf(lock, fcntl.LOCK_EX)
            try:
                records = self.read()
                before = json.dumps(records, sort_keys=True)
                yield records
                if json.dumps(records, sort_keys=True) != before:
                    write_atomic(self.out / LEDGER, json.dumps(records, indent=1, sort_keys=True) + "\n")
            finally:
                fcntl.lockf(lock, fcntl.LOCK_UN)

    def record(self, cell: str, executor: str, job_id: str, state: str, submitted: bool = False) -> None:
        """Set a cell's job and state; `submitted` counts a new submission of the cell."""
        with self.change() as records:
            entry = records.setdefault(cell, {"submissions": 0})
            entry["submissions"] += submitted
            entry.update(executor=executor, job_id=job_id, state=state, at=time.time())


def claim_alive(entry: dict) -> bool:
    """A SUBMITTING claim still holds its cell: its sweep is alive (or, on another host, the claim is recent)."""
    host, _, _ = entry.get("job_id", "").rpartition(":")
    if host != socket.gethostname():
        return time.time() - entry.get("at", 0) < CLAIM_EXPIRES_S
    return process_alive(entry["job_id"])
