"""`apibank-bench optimize`: the command line of one optimize job (the job itself is in `job`).

`--method` picks the optimizer, `--topology/--model/--seed` the experiment-grid
cell; each method's HYPERPARAMETERS become flags. The module imports nothing
heavy, so building the CLI stays fast.
"""

from __future__ import annotations

import argparse
import sys

from apibank_bench.core.settings import BY_NAME, TEAM_SIZES
from apibank_bench.optimize import grid, methods
from apibank_bench.optimize.roles import OPTIMIZABLE as TOPOLOGIES

MESSAGE_FORMATS = BY_NAME["message_format"].choices


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--method", required=True, choices=list(methods.METHODS))
    parser.add_argument("--dataset", default="apibank", choices=["apibank"],
                        help="accepted for the reference's command line (API-Bank is the only dataset)")
    parser.add_argument("--topology", required=True, choices=TOPOLOGIES)
    parser.add_argument("--model", default=None,
                        help="a grid alias (qwen, llama) or a model name; none = the embedded smoke model")
    parser.add_argument("--model-alias", action="append", default=[], metavar="NAME=MODEL",
                        help="override a grid alias (also APIBANK_MODEL_ALIASES=qwen=Org/Model,...)")
    parser.add_argument("--seed", type=int, default=0, help="splits, the method's randomness and sampling")
    parser.add_argument("--out", required=True, help="the run's folder")
    parser.add_argument("--train", type=int, default=50, help="training tasks (level-balanced, from the pool)")
    parser.add_argument("--validation", type=int, default=50, help="validation tasks")
    parser.add_argument("--budget", type=int, default=None, help="the method's budget (see README; default per method)")
    parser.add_argument("--team-size", type=int, default=4, help=f"team size N in {TEAM_SIZES}")
    parser.add_argument("--rounds", type=int, default=2, help="debate rounds (decentralized)")
    parser.add_argument("--message-format", default="freeform", choices=MESSAGE_FORMATS)
    parser.add_argument("--base-url", nargs="+", default=None, help="task model endpoint(s); none = embedded")
    parser.add_argument("--optimizer-model", default=None,
                        help="reflection/proposal/judge model (alias or name; default: the task model)")
    parser.add_argument("--optimizer-base-url", nargs="+", default=None,
                        help="its endpoint(s) (default: the task model's)")
    parser.add_argument("--eval-limit", type=int, default=100, help="eval instances in the final comparison")
    parser.add_argument("--workers", type=int, default=8, help="instances solved concurrently")
    parser.add_argument("--resume", action="store_true", help="continue a killed run in --out")
    parser.add_argument("--allow-any-cell", action="store_true", help="run a cell outside the experiment grid")
    parser.add_argument("--constrained", action=argparse.BooleanOptionalAction, default=None,
                        help="grammar-constrained decoding (default: on for the embedded model only)")
    parser.add_argument("--no-cache", action="store_true", help="turn the response cache off")
    parser.add_argument("--root", "--apibank-root", dest="apibank_root", default=None, help="API-Bank data root")
    _add_hyperparameters(parser)


def _add_hyperparameters(parser: argparse.ArgumentParser) -> None:
    """Each method's HYPERPARAMETERS as flags, default None (the method's own default then applies).

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
    return 2


def main(args: argparse.Namespace) -> int:
    module = methods.load(args.method)
    cell = grid.cell(args.method, args.topology, args.model, args.seed, grid.model_aliases(args.model_alias))
    refusal = grid.check_cell(cell, args.allow_any_cell)
    if refusal:
        return _fail(refusal)
    if args.topology != "single" and args.team_size not in TEAM_SIZES:
        return _fail(f"--team-size must be one of {TEAM_SIZES}, got {args.team_size}")
    from apibank_bench.agents.models import EndpointUnreachable
    from apibank_bench.llm import ModelError
    from apibank_bench.optimize.job import JobError, run

    try:
        return run(args, module, cell)
    except (JobError, EndpointUnreachable) as exc:
        return _fail(str(exc))
    except ModelError as exc:  # the optimizer model failed (an agent's failure is recorded, not raised)
        return _fail(f"the optimizer model failed: {exc}; --resume continues from the finished phases")
