"""Cells on their own endpoints: `sweep --endpoint-command` starts a server where each cell runs and stops it after."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from apibank_bench import cli

STUB = Path(__file__).resolve().parent / "stub_endpoint.py"
ARGS = ("--seed", "0,1", "--model", "stub", "--limit", "2", "--no-cache", "--max-retries", "0")


def alive(pid: int) -> bool:
    """Running (a zombie, ended but not yet reaped by whoever inherited it, is not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def test_each_cell_starts_its_own_endpoint_and_stops_it_when_the_cell_ends(tmp_path):
    out, pids = tmp_path / "sweep", tmp_path / "pids"
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(STUB))} {shlex.quote(str(pids))}"
    assert cli.main(["sweep", "--out", str(out), *ARGS, "--endpoint-command", command]) == 0
    started = [int(line) for line in pids.read_text().split()]
    assert len(set(started)) == 2 and not any(alive(pid) for pid in started)  # one per cell, each stopped
    urls = []
    for cell in ("seed=0", "seed=1"):
        summary = json.loads((out / cell / "summary.json").read_text())
        assert summary["complete"] and summary["total"] == 2
        [url] = summary["config"]["run"]["base_url"]
        log = (out / cell / "endpoint.log").read_text()
        assert log.startswith(f"$ {command}\n") and f"{url}\n" in log and "starting the stub" in log
        assert summary["endpoints"][url]["requests"] == 2
        urls.append(url)
    assert urls[0] != urls[1]


def test_an_endpoint_command_that_prints_no_url_fails_its_cell_without_a_run(tmp_path):
    out = tmp_path / "sweep"
    assert cli.main(["sweep", "--out", str(out), *ARGS, "--endpoint-command", "echo no server here"]) == 1
    for cell in ("seed=0", "seed=1"):
        assert not (out / cell / "summary.json").exists()
        assert "the cell's endpoint did not start: the endpoint command exited 0" in (out / cell / "run.log").read_text()
