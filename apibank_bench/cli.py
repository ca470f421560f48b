"""`apibank-bench`: data, tasks and manifests, scoring saved answers, and benchmark runs."""

from __future__ import annotations

import argparse
import sys

from apibank_bench.commands import compare, data, manifests, optimize, report, run, score, show, sweep
from apibank_bench.core import settings
from apibank_bench.core.paths import DataMissing

#: The subcommands, in the order `--help` lists them.
COMMANDS = (run, sweep, show, compare, report, optimize, data, manifests, score)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="apibank-bench", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with settings.command_voice():  # messages name this command's flags (`--resume`, not `--apibank-resume`)
            return args.func(args)
    except (DataMissing, FileNotFoundError, ValueError, KeyError) as exc:
        print(f"apibank-bench: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("apibank-bench: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
