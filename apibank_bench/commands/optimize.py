"""`apibank-bench optimize`: prompt optimizers (GEPA, MIPROv2, MASPO) over a topology's role prompts.

The command line of one optimize job (the job itself is `optimize/job.py`): `--method` picks the
optimizer, `--topology/--model/--seed` the experiment-grid cell (all settings of the table); each
method's HYPERPARAMETERS become flags, added only when `optimize` runs (building them imports every
method module), so building the CLI stays fast.
"""

from __future__ import annotations

import argparse
import sys

from apibank_bench.core import settings
from apibank_bench.core.exit_codes import ExitCode
from apibank_bench.optimize import methods

#: Instances solved at once when --concurrency is not given.
DEFAULT_CONCURRENCY = 8


def register(sub) -> None:
    parser = sub.add_parser("optimize", help="optimize a topology's role prompts on training tasks, then compare "
                                             "seed and optimized prompts on the eval set")
    add_arguments(parser)
    parser.set_defaults(func=main)


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The job's own output folder, and its settings from the table (`method`, the grid cell, the splits...)."""
    parser.add_argument("--out", required=True, help="the run's folder")
    settings.add_command_flags(parser, "optimize")


def add_detail_flags(parser: argparse.ArgumentParser) -> None:
    """Each method's HYPERPARAMETERS as flags, default None (the method's own default then applies).
    Building them imports every method module, so the CLI adds them only when `optimize` runs.

    A name two methods share is one flag; a name a common flag already uses
    (e.g. `rounds`) becomes `--<method>-<name>`.
    """
    group = parser.add_argument_group("method hyperparameters")
    common = set(parser._option_string_actions)
    added: set[str] = set()
    for method, module in methods.available().items():
        for name, (kind, default, text) in getattr(module, "HYPERPARAMETERS", {}).items():
            option, dest = _flag(name), "hp_" + name
            if option in common:
                option, dest = _flag(f"{method}_{name}"), f"hp_{method}_{name}"
            if option in added:
                continue
            added.add(option)
            if kind is bool:
                group.add_argument(option, dest=dest, action=argparse.BooleanOptionalAction, default=None,
                                   help=f"{text} (default {default})")
            else:
                group.add_argument(option, dest=dest, type=kind, default=None, metavar=name.upper(),
                                   help=f"{text} (default {default})")


def _fail(message: str) -> int:
    print(f"apibank-bench optimize: {message}", file=sys.stderr)
    return ExitCode.USAGE


def main(args: argparse.Namespace) -> int:
    for name, value in vars(settings.command_values(args, "optimize")).items():
        setattr(args, name, value)  # the resolved settings (flag, else environment, else default)
    if args.method is None:
        return _fail("--method is required (one of " + ", ".join(methods.METHODS.names()) + ")")
    from apibank_bench.optimize import grid
    from apibank_bench.optimize.roles import OPTIMIZABLE

    if args.topology not in OPTIMIZABLE:
        return _fail(f"--topology {args.topology}: optimize covers {', '.join(OPTIMIZABLE)}")
    args.concurrency = args.concurrency or DEFAULT_CONCURRENCY
    module = methods.load(args.method)
    cell = grid.cell(args.method, args.topology, args.model, args.seed, grid.model_aliases(args.model_aliases))
    refusal = grid.check_cell(cell, args.allow_any_cell)
    if refusal:
        return _fail(refusal)
    from apibank_bench.agents.topologies import spec_of

    refusal = spec_of(args.topology).team_size_error(args.team_size, "--team-size")
    if refusal:
        return _fail(refusal)
    from apibank_bench.llm.probe import EndpointUnreachable
    from apibank_bench.llm import ModelError
    from apibank_bench.optimize.job import JobError, run

    try:
        return run(args, module, cell)
    except (JobError, EndpointUnreachable) as exc:
        return _fail(str(exc))
    except ModelError as exc:  # the optimizer model failed (an agent's failure is recorded, not raised)
        return _fail(f"the optimizer model failed: {exc}; --resume continues from the finished phases")
