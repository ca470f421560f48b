"""Where a sweep's cells run: the seam between the sweep and an engine.

An engine is one module in this package that registers a class with `EXECUTORS`
(`sweep --executor NAME`). The class is built with the sweep's settings (the
`sweep` group of the settings table) and the sweep folder, and has two methods:

- `submit(jobs, recorded)`: start these cell jobs and call `recorded(job, job_id, state)`
  for each as soon as the engine has given it an ID. A local engine may run them
  before it returns; a batch engine returns once they are queued.
- `active(job_ids) -> {job_id: state}`: of these IDs, the ones still queued or
  running, with the engine's name for their state.

Everything else is the sweep's (sweeps/dispatch.py, sweeps/ledger.py): which cells to
submit, the job ledger in the sweep folder, waiting and the tables. A cell job
(`sweeps.cell_job.CellJob`) is plain picklable data; calling it where it lands runs the
cell there and writes its results folder, exactly as a local cell does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from apibank_bench.core.registry import Registry, import_submodules

if TYPE_CHECKING:  # a name for the types only: the registry is read to build `--executor`'s choices
    from apibank_bench.sweeps.cell_job import CellJob

#: What `submit` calls for each job as soon as the engine has given it an ID: (job, job ID, state).
Recorded = Callable[["CellJob", str, str], None]

EXECUTORS: Registry = Registry("executor", "--executor", sort=True)  # engines register as their modules are imported


def _load_modules() -> None:
    import_submodules(__name__, __path__)


EXECUTORS.load_with(_load_modules)
