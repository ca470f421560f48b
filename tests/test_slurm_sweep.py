"""`sweep --executor slurm` on a real Slurm: a single-node cluster started from the distribution's packages.

The module starts munged, slurmctld and slurmd on this machine (`scripts/slurm-single-node`,
everything under a temporary folder, no cgroups) and submits sweeps through submitit as a user
would. Where Slurm is not installed or cannot start here, the tests are skipped with the reason.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from apibank_bench import cli
from apibank_bench.reports.sweep_table import SWEEP_CSV
from apibank_bench.sweeps import dispatch
from apibank_bench.sweeps.executors.slurm import SlurmExecutor
from apibank_bench.sweeps.ledger import LEDGER

from openai_stub import OpenAIStub
from helpers import mixed, SWEEP_CELLS as CELLS, SWEEP_GRID as GRID

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "slurm-single-node"
#: Waiting on Slurm (not a timing assertion): a cluster that never runs a job fails the test instead of hanging it.
PATIENCE_S = 300.0


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    missing = [tool for tool in ("munged", "slurmctld", "slurmd", "sbatch", "squeue") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"Slurm is not installed here (no {', '.join(missing)}; apt-get install slurm-wlm munge)")
    if os.geteuid() != 0:
        pytest.skip("a single-node Slurm here needs root (slurmd starts the jobs)")
    state = tmp_path_factory.mktemp("slurm")
    started = time.monotonic()
    answer = subprocess.run([str(SCRIPT), "start", str(state)], capture_output=True, text=True)
    if answer.returncode != 0:
        subprocess.run([str(SCRIPT), "stop", str(state)], capture_output=True)
        pytest.skip(f"Slurm could not start here: {(answer.stderr or answer.stdout).strip()[-500:]}")
    print(f"\nsingle-node Slurm up in {time.monotonic() - started:.1f} s")
    saved = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(state / "slurm.conf")  # sbatch and squeue (also submitit's) read it
    try:
        yield state
    finally:
        subprocess.run([str(SCRIPT), "stop", str(state)], capture_output=True)
        if saved is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = saved


@pytest.fixture(autouse=True)
def quick_polls(monkeypatch):
    monkeypatch.setattr(dispatch, "POLL_S", 0.5)


def sweep(out: Path, *args: str) -> int:
    return cli.main(["sweep", "--out", str(out), *args])


def table(out: Path) -> list[dict]:
    """sweep.csv without the wall time (the one column where two executors may differ)."""
    rows = list(csv.DictReader((out / SWEEP_CSV).read_text().splitlines()))
    return [{key: value for key, value in row.items() if key != "wall_time_s"} for row in rows]


def answers(cell: Path) -> list[tuple]:
    return [(line["id"], line["correct"], line["stage"], json.dumps(line.get("predicted")))
            for line in map(json.loads, (cell / "results.jsonl").read_text().splitlines())]


def ledger(out: Path) -> dict:
    return json.loads((out / LEDGER).read_text())


def wait_until(condition, what: str) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"Slurm never got there: {what}")
        time.sleep(0.2)


def test_a_sweep_through_slurm_gives_the_tables_of_a_local_sweep(slurm, tmp_path, capsys):
    local, remote = tmp_path / "local", tmp_path / "slurm"
    with OpenAIStub(default=mixed) as stub:
        args = (*GRID, "--model", "stub", "--base-url", stub.url, "--limit", "4", "--no-cache", "--max-retries", "0",
                "--api-key", "sk-secret-of-the-test")
        started = time.monotonic()
        assert sweep(local, *args) == 0
        took_here = time.monotonic() - started
        started = time.monotonic()
        assert sweep(remote, *args, "--executor", "slurm", "--slurm-time", "10", "--slurm-cpus", "1") == 0
        took = time.monotonic() - started
    printed = capsys.readouterr().out
    with capsys.disabled():
        print(f"\n2 x 2 sweep: {took:.1f} s through Slurm, {took_here:.1f} s with the local executor")
    assert printed.count("submitted as slurm job") == 4 and printed.count("ended: accuracy") == 4
    assert printed.count("sweep: 4/4 cells done (4 complete, 0 incomplete)") == 2  # each sweep's last line
    assert table(remote) == table(local)
    for name in CELLS:
        assert answers(remote / name) == answers(local / name)
        entry = ledger(remote)[name]
        assert (entry["executor"], entry["submissions"]) == ("slurm", 1) and entry["state"].startswith("ENDED")
        assert "_" in entry["job_id"]  # an array task: one array job for the cells
    assert len({entry["job_id"].split("_")[0] for entry in ledger(remote).values()}) == 1
    job_files = [path for path in (remote / ".slurm").rglob("*") if path.is_file()]
    assert job_files and not any(b"sk-secret-of-the-test" in path.read_bytes() for path in job_files)
    assert sweep(remote, *args, "--executor", "slurm") == 0  # finished: nothing is submitted again
    assert capsys.readouterr().out.count("complete, skipped") == 4


def test_a_killed_cell_is_resubmitted_by_the_rerun_and_a_queued_one_is_not(slurm, tmp_path, capsys):
    out = tmp_path / "sweep"
    engine = SlurmExecutor(None, out)
    with OpenAIStub(default=mixed, hold=1.0) as stub:  # each cell takes a while, so one can be killed running
        args = (*GRID, "--model", "stub", "--base-url", stub.url, "--limit", "4", "--no-cache", "--max-retries", "0",
                "--executor", "slurm", "--slurm-time", "10", "--slurm-cpus", "1")
        assert sweep(out, *args, "--no-wait") == 0
        first = capsys.readouterr().out
        assert first.count("submitted as slurm job") == 4
        jobs = {name: entry["job_id"] for name, entry in ledger(out).items()}
        assert sweep(out, *args, "--no-wait") == 0  # queued or running: not submitted twice
        assert capsys.readouterr().out.count("not submitted again") == 4
        assert {name: entry["submissions"] for name, entry in ledger(out).items()} == dict.fromkeys(CELLS, 1)

        victim = CELLS[1]
        wait_until(lambda: engine.active([jobs[victim]]).get(jobs[victim]) == "RUNNING", f"{victim} running")
        subprocess.run(["scancel", jobs[victim]], check=True)
        wait_until(lambda: jobs[victim] not in engine.active([jobs[victim]]), f"{victim} cancelled")

        assert sweep(out, *args, "--status") == 1
        status = capsys.readouterr().out
        assert f"[{victim.replace(',', ', ')}] " in status

        assert sweep(out, *args) == 0  # resubmits the killed cell, waits for every cell, collects
        rerun = capsys.readouterr().out
    assert rerun.count("submitted as slurm job") == 1
    records = ledger(out)
    assert records[victim]["submissions"] == 2 and records[victim]["job_id"] != jobs[victim]
    assert all(records[name]["submissions"] == 1 for name in CELLS if name != victim)
    assert all(row["status"] == "complete" for row in table(out))
