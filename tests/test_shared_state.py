"""Many processes writing one response cache and one sweep folder at once lose nothing and tear nothing.

The writers are separate interpreters (as xdist workers, sweep cells and other nodes
on a shared file system are), started together; while they write, the test reads
the same files and never sees half of one.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from apibank_bench.llm.cache import ResponseCache, request_key
from apibank_bench.sweeps.ledger import LEDGER, Ledger

WRITERS, EACH = 6, 40
ROOT = Path(__file__).resolve().parents[1]

CACHE_WRITER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from apibank_bench.llm.cache import ResponseCache, request_key
    folder, me, each, go = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
    while not go.exists():
        time.sleep(0.01)
    cache = ResponseCache(folder)
    for i in range(each):
        for owner in (me, "shared"):  # a key of its own, and one every writer writes
            key = request_key({"writer": owner, "i": i})
            cache.put(key, {"text": f"answer {owner} {i} " + "x" * 5000, "prompt_tokens": i, "completion_tokens": 1})
""")

LEDGER_WRITER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from apibank_bench.sweeps.ledger import Ledger
    from apibank_bench.core.files import write_atomic
    folder, me, each, go = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
    while not go.exists():
        time.sleep(0.01)
    ledger = Ledger(folder)
    for i in range(each):
        cell = f"cell={me}-{i}"
        ledger.record(cell, "slurm", f"{me}_{i}", "PENDING", submitted=True)
        ledger.record(cell, "slurm", f"{me}_{i}", "RUNNING")
        write_atomic(folder / "sweep.md", f"writer {me} table {i}\\n" + "row\\n" * 2000)
""")


def start_writers(script: str, folder: Path, go: Path) -> list[subprocess.Popen]:
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return [subprocess.Popen([sys.executable, "-c", script, str(folder), str(me), str(EACH), str(go)], env=environ)
            for me in range(WRITERS)]


def watch(writers: list[subprocess.Popen], look) -> int:
    """Call `look()` until every writer has exited; how many looks found something to check."""
    looks = 0
    while any(writer.poll() is None for writer in writers):
        looks += look()
    assert [writer.wait() for writer in writers] == [0] * WRITERS
    return looks


def test_concurrent_writers_of_one_cache_leave_every_entry_whole(tmp_path):
    folder, go = tmp_path / "responses", tmp_path / "go"
    writers = start_writers(CACHE_WRITER, folder, go)
    go.touch()

    def look() -> int:
        seen = 0
        for path in folder.glob("*/*.json"):
            try:
                entry = json.loads(path.read_text())
            except FileNotFoundError:
                continue
            assert entry["key"] == path.stem and entry["text"].startswith("answer ")  # never half a file
            seen += 1
        return bool(seen)

    assert watch(writers, look) > 0
    cache = ResponseCache(folder)
    for i in range(EACH):
        for owner in [*range(WRITERS), "shared"]:
            entry = cache.get(request_key({"writer": owner, "i": i}))
            assert entry is not None and entry["text"].startswith(f"answer {owner} {i} ")
    files = list(folder.glob("*/*"))
    assert len(files) == EACH * (WRITERS + 1)  # no temporary file left behind


def test_concurrent_writers_of_one_sweep_folder_lose_no_job_record(tmp_path):
    folder, go = tmp_path / "sweep", tmp_path / "go"
    folder.mkdir()
    writers = start_writers(LEDGER_WRITER, folder, go)
    go.touch()

    def look() -> int:
        seen = 0
        for name in (LEDGER, "sweep.md"):
            try:
                text = (folder / name).read_text()
            except FileNotFoundError:
                continue
            if name == LEDGER:
                json.loads(text)  # whole
            else:
                assert text.startswith("writer ") and text.count("row\n") == 2000
            seen += 1
        return bool(seen)

    assert watch(writers, look) > 0
    records = Ledger(folder).read()
    assert len(records) == WRITERS * EACH
    for me in range(WRITERS):
        for i in range(EACH):
            entry = records[f"cell={me}-{i}"]
            assert (entry["job_id"], entry["state"], entry["submissions"]) == (f"{me}_{i}", "RUNNING", 1)
    assert sorted(path.name for path in folder.iterdir()) == ["jobs.json", "jobs.lock", "sweep.md"]


def test_a_cell_is_held_by_a_live_job_or_claim_and_let_go_when_its_process_has_gone(tmp_path):
    from apibank_bench.core.settings import resolve_sweep
    from apibank_bench.sweeps.dispatch import held_jobs

    host = socket.gethostname()
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    now = time.time()
    records = {
        "gone": {"executor": "local", "job_id": f"{host}:{ended.pid}", "state": "RUNNING", "at": now},
        "running": {"executor": "local", "job_id": f"{host}:{os.getppid()}", "state": "RUNNING", "at": now},
        "claimed": {"executor": "slurm", "job_id": "elsewhere:1", "state": "SUBMITTING", "at": now},
        "abandoned": {"executor": "slurm", "job_id": "elsewhere:1", "state": "SUBMITTING", "at": now - 3600},
        "finished": {"executor": "local", "job_id": f"{host}:{os.getppid()}", "state": "ENDED exit 0", "at": now},
        "mine": {"executor": "local", "job_id": f"{host}:{os.getpid()}", "state": "RUNNING", "at": now},
    }
    assert held_jobs(records, resolve_sweep(), tmp_path) == {
        "running": f"RUNNING {host}:{os.getppid()}", "claimed": "SUBMITTING elsewhere:1"}
