"""`apibank-bench sweep --out DIR [run flags]`: a grid of runs, one results folder per cell, one table.

A comma-separated value of a run flag is a grid axis, e.g. `--topology independent,decentralized
--team-size 2,4,8,10 --seed 0,1,2`. Not axes: the list settings `--base-url` and `--only` (their
commas separate items), switches and `--extra-body`. Every combination is run, also where an axis
changes nothing (team size for `single`); with the cache on such repeats make no model calls.
Each cell is `apibank-bench run --out-dir DIR/<axis=value,...>` in its own process (log: run.log in
the cell). Rerunning the same sweep skips complete cells and resumes the others (no --resume needed).
Then DIR/sweep.csv and DIR/sweep.md hold accuracy with its 95% Wilson interval, n and errors per cell
and level, tokens and wall time per cell; with a seed axis, DIR/sweep_seeds.csv and sweep.md add the
mean ± sd of accuracy over the seeds. Build the HTML report with `apibank-bench report DIR --out DIR/report`.

Exit codes: 0 every cell is complete; 1 some cell is incomplete (errors, or not run: rerun to
resume); 2 bad usage (every cell's settings are checked before any cell runs); 130 interrupted.
"""

from __future__ import annotations

import sys

from apibank_bench.commands import INCOMPLETE
from apibank_bench.core import settings


def register(sub) -> None:
    parser = sub.add_parser("sweep", help="a grid of runs (comma-separated flag values are axes) and one table",
                            description=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--out", required=True, metavar="DIR", help="the sweep folder: one results folder per cell")
    settings.add_command_flags(parser, "sweep")
    parser.set_defaults(func=run)


def run(args) -> int:
    from apibank_bench.reports.sweep_table import write_tables
    from apibank_bench.runs.sweep import SweepError, run_sweep, status

    given = {setting.name: getattr(args, setting.name, None) for setting in settings.RUN_SETTINGS}
    try:
        axes, cells, interrupted = run_sweep(given, args.out, settings.value_of(args, "workers"))
    except SweepError as exc:
        print(f"apibank-bench sweep: {exc}", file=sys.stderr)
        return 2
    print(write_tables(args.out, axes, cells), end="")
    if interrupted:
        return 130
    unfinished = [cell for cell in cells if status(cell) != "complete"]
    if unfinished:
        print(f"sweep: {len(unfinished)} of {len(cells)} cells incomplete; rerun the same command to resume them")
        return INCOMPLETE
    return 0
