"""`--executor local` (the default): the cells one after another, each in a child process of this one."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from apibank_bench.sweeps.cell_job import CellJob
from apibank_bench.sweeps.executors import EXECUTORS, Recorded
from apibank_bench.sweeps.ledger import ENDED, process_alive, this_process


@EXECUTORS.register("local", "the cells one after another on this machine")
class LocalExecutor:
    name = "local"
    waits = False  #: `submit` returns when the cells have run: nothing to wait for

    def __init__(self, options: Any, out: Path) -> None:
        self.options = options

    def submit(self, jobs: Sequence[CellJob], recorded: Recorded) -> None:
        job_id = this_process()  # the sweep itself runs the cell: it is the job
        for job in jobs:
            recorded(job, job_id, "RUNNING")
            code = job()
            recorded(job, job_id, f"{ENDED} exit {code}")

    def active(self, job_ids: Sequence[str]) -> dict[str, str]:
        return {job_id: "RUNNING" for job_id in job_ids if process_alive(job_id)}
