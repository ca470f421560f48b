"""The sweeps layer: a grid of runs, one ordinary results folder per cell (its tables: reports/sweep_table.py).

A sweep orchestrates many runs: it starts the CLI's `run` as a subprocess per cell, so it sits above
`runs/`, `plugin/` and `optimize/`; of the layers below it reads the settings, a cell's results folder
(`runs/`), its selection (`data/`) and the topologies' team rules (`agents/`), never the pytest plugin.

- `grid`: the axes (a comma-separated value of a run setting) and the cells (every combination);
- `cell_job`: one cell: its settings checked and planned (run, resume or skip), its `run` command
  line, its folder and status, and `CellJob`, the cell as plain data any executor ships;
- `ledger`: the job ledger (`DIR/jobs.json`), which job holds each cell;
- `dispatch`: a sweep's course: claim the unfinished cells, submit them, wait for their jobs;
- `progress`: what a person sees of a sweep (its lines and one progress line);
- `executors/`: where the cells run (here, one after another, or a Slurm array job);
- `node_endpoint`: a cell's own endpoint, started where the cell runs.
"""
