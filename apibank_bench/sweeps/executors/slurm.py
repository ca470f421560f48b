"""`--executor slurm`: one Slurm array job for the cells, submitted through submitit.

Each array task unpickles one `CellJob` and runs the cell on the node it landed on,
with this interpreter (the cluster's nodes share the file system, so the same path
works there) and this environment (`sbatch` exports it). The resources come from the
`slurm_*` settings; submitit's files (the batch script, each task's log) go to
`<sweep>/.slurm/<job id>/`.

Job states come from `squeue`, which every Slurm answers (`sacct` needs the
accounting database, which small clusters may not run): a job squeue no longer
lists has ended, and its cell's own folder says how.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path
from typing import Any, Sequence

from apibank_bench.core.paths import import_root
from apibank_bench.sweeps.cell_job import CellJob
from apibank_bench.sweeps.executors import EXECUTORS, Recorded

#: squeue states of a job that still holds its cell (it may yet write the cell's folder).
ACTIVE = frozenset({"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED",
                    "RESIZING", "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT", "RESV_DEL_HOLD"})
SLURM_DIR = ".slurm"


class SlurmError(RuntimeError):
    """Slurm refused or could not be asked."""


def sbatch_parameters(options: Any) -> dict[str, Any]:
    """submitit's SlurmExecutor parameters from the `slurm_*` settings (unset ones left to the cluster)."""
    given = {"partition": options.slurm_partition, "time": options.slurm_time,
             "gpus_per_node": options.slurm_gpus, "cpus_per_task": options.slurm_cpus, "mem": options.slurm_mem,
             "array_parallelism": options.slurm_max_running}
    parameters = {name: value for name, value in given.items() if value is not None}
    parameters["job_name"] = "apibank-sweep"
    # this very package on the node, installed or not (the cell's run is found the same way)
    package = shlex.quote(str(import_root()))
    parameters["setup"] = [f'export PYTHONPATH={package}${{PYTHONPATH:+:$PYTHONPATH}}',
                           *([options.slurm_setup] if options.slurm_setup else [])]
    parameters["additional_parameters"] = dict(options.slurm_sbatch)
    return parameters


@EXECUTORS.register("slurm", "one Slurm array job for the cells (submitit)")
class SlurmExecutor:
    name = "slurm"
    waits = True

    def __init__(self, options: Any, out: Path) -> None:
        self.options = options
        self.folder = Path(out).resolve() / SLURM_DIR

    def submit(self, jobs: Sequence[CellJob], recorded: Recorded) -> None:
        import submitit

        executor = submitit.SlurmExecutor(folder=self.folder / "%j")
        executor.update_parameters(**sbatch_parameters(self.options))
        try:
            submitted = executor.map_array(run_job, jobs)
        except (OSError, subprocess.CalledProcessError, submitit.core.utils.FailedJobError) as exc:
            raise SlurmError(f"sbatch failed: {exc}") from None
        for job, handle in zip(jobs, submitted):
            recorded(job, handle.job_id, "PENDING")

    def active(self, job_ids: Sequence[str]) -> dict[str, str]:
        if not job_ids:
            return {}
        arrays = sorted({job_id.split("_")[0] for job_id in job_ids})
        command = ["squeue", "--noheader", "--array", "--states=all", "--format=%i|%T", "--jobs", ",".join(arrays)]
        try:
            answer = subprocess.run(command, capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SlurmError(f"cannot ask Slurm about jobs ({shlex.join(command)}): {exc}") from None
        if answer.returncode != 0:
            if "Invalid job id" in answer.stderr:  # one ID that Slurm has forgotten: the job has ended
                return {}
            raise SlurmError(f"{shlex.join(command)} failed: {answer.stderr.strip()}")
        states = dict(line.split("|", 1) for line in answer.stdout.split() if "|" in line)
        return {job_id: states[job_id] for job_id in job_ids if states.get(job_id) in ACTIVE}


def run_job(job: CellJob) -> int:
    """What an array task runs (a module-level function, so the pickle names it rather than holding it)."""
    return job()
