"""`apibank-bench sweep --out DIR [run flags]`: a grid of runs, one results folder per cell, one table.

A comma-separated value of a run flag is a grid axis, e.g. `--topology independent,decentralized
--team-size 2,4,8,10 --seed 0,1,2`. Not axes: the list settings `--base-url` and `--only` (their
commas separate items), switches and `--extra-body`. Every combination is run, also where an axis
changes nothing (team size for `single`: said before the sweep runs); with the cache on such repeats
make no model calls. Each cell is `apibank-bench run --out-dir DIR/<axis=value,...>` in its own
process (log: run.log in the cell), one after another here or, with `--executor slurm`, as one Slurm
array job (`--slurm-*` set its resources); one progress line shows the cells done, running (with
their rows written) and queued, and an ETA. Rerunning the same sweep skips complete cells, leaves cells whose job is still
queued or running alone (DIR/jobs.json records each cell's job) and resumes or resubmits the others
(no --resume needed). `--no-wait` returns once the cells are submitted; `--status` shows each cell's
results and job; the same command again (or `--tabulate`) collects.
Then DIR/sweep.csv and DIR/sweep.md hold accuracy with its 95% Wilson interval, n and errors per cell
and level, tokens and wall time per cell; with a seed axis, DIR/sweep_seeds.csv and sweep.md add the
mean ± sd of accuracy over the seeds; with an --agent-kind chat,sdk axis, DIR/sweep_modes.csv and sweep.md add
the model x mode table (each chat cell against the sdk cell of its setup, paired). Build the HTML report with
`apibank-bench report DIR --out DIR/report`.

Exit codes: 0 every cell is complete (with --no-wait: every unfinished cell is submitted or already
queued or running); 1 some cell is incomplete (errors, or not run: rerun to resume); 2 bad usage
(every cell's settings are checked before any cell runs) or the executor refused; 130 interrupted.
"""

from __future__ import annotations

import sys

from apibank_bench.core import settings
from apibank_bench.core.exit_codes import ExitCode


def register(sub) -> None:
    parser = sub.add_parser("sweep", help="a grid of runs (comma-separated flag values are axes) and one table",
                            description=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--out", required=True, metavar="DIR", help="the sweep folder: one results folder per cell")
    actions = parser.add_mutually_exclusive_group()
    actions.add_argument("--no-wait", action="store_true",
                         help="return once the cells are submitted (a batch executor); collect later")
    actions.add_argument("--status", action="store_true", help="show each cell's results and job; submit nothing")
    actions.add_argument("--tabulate", action="store_true", help="write the tables from the cells' folders; "
                         "submit nothing")
    settings.add_command_flags(parser, "sweep")
    parser.set_defaults(func=run)


def run(args) -> int:
    from apibank_bench.reports.sweep_table import write_tables
    from apibank_bench.runs.cost import price_table
    from apibank_bench.sweeps.cell_job import status
    from apibank_bench.sweeps.dispatch import run_sweep, sweep_status
    from apibank_bench.sweeps.grid import SweepError
    from apibank_bench.sweeps.ledger import Ledger

    given = {setting.name: getattr(args, setting.name, None) for setting in settings.RUN_SETTINGS}
    interrupted = False
    try:
        sweep = settings.resolve_sweep(lambda s: getattr(args, s.name, None))
        if args.status or args.tabulate:
            axes, cells = sweep_status(given, args.out, sweep)
        else:
            axes, cells, interrupted = run_sweep(given, args.out, settings.value_of(args, "workers"), sweep, wait=not args.no_wait)
    except (SweepError, ValueError) as exc:
        print(f"apibank-bench sweep: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    if args.status:
        records = Ledger(args.out).read()
        for index, cell in enumerate(cells, start=1):
            print(f"sweep: cell {index}/{len(cells)} [{cell.label}] {status(cell)}{job_text(records.get(cell.path.name))}")
    else:
        print(write_tables(args.out, axes, cells, price_table(settings.value_of(args, "price") or (),
                                                             settings.value_of(args, "price_file"))),
              end="")
    if interrupted:
        return ExitCode.INTERRUPTED
    held = [cell for cell in cells if cell.job]
    if args.no_wait and all(cell.job or status(cell) == "complete" for cell in cells):
        print(f"sweep: {len(held)} cells queued or running; `--status` follows them, the same command collects")
        return ExitCode.OK
    unfinished = [cell for cell in cells if status(cell) != "complete"]
    if unfinished:
        print(f"sweep: {len(unfinished)} of {len(cells)} cells incomplete"
              + (f" ({len(held)} still queued or running)" if held else "")
              + "; rerun the same command to resume them")
        return ExitCode.INCOMPLETE
    return ExitCode.OK


def job_text(entry: dict | None) -> str:
    """The last job of a cell, as `--status` shows it."""
    if not entry or not entry.get("job_id"):
        return ""
    return (f"; last job {entry['job_id']} ({entry.get('executor')}): {str(entry.get('state')).lower()}, "
            f"{entry.get('submissions', 0)} submission(s)")
