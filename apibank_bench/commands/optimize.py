"""`apibank-bench optimize`: prompt optimizers (GEPA, MIPROv2, MASPO) over a topology's role prompts."""

from __future__ import annotations


def register(sub) -> None:
    from apibank_bench.optimize import command

    parser = sub.add_parser("optimize", help="optimize a topology's role prompts on training tasks, then compare "
                                             "seed and optimized prompts on the eval set")
    command.add_arguments(parser)
    parser.set_defaults(func=command.main)


def add_detail_flags(parser) -> None:
    """Each method's hyperparameters (importing every method module: only when `optimize` runs)."""
    from apibank_bench.optimize import command

    command.add_hyperparameters(parser)
