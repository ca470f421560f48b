"""`apibank-bench`: data, tasks and manifests, scoring saved answers, and benchmark runs.

Every command module imports what it uses when it runs, so building the parser is cheap;
flags that cost imports to build (optimize's per-method hyperparameters) are added only
for the command being run.
"""

from __future__ import annotations

import argparse
import sys

from apibank_bench.commands import compare, data, manifests, optimize, report, run, score, show, sweep
from apibank_bench.core import settings
from apibank_bench.core.exit_codes import ExitCode
from apibank_bench.core.paths import DataMissing
from apibank_bench.runs.setting_rules import hand_down

#: The subcommands, in the order `--help` lists them.
COMMANDS = (run, sweep, show, compare, report, optimize, data, manifests, score)


def chosen_command(argv: list[str]) -> str | None:
    """The subcommand an argument list names (the top-level parser takes no option but -h)."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Every command's parser; `command` given: detail flags only for that one (None: for all)."""
    parser = argparse.ArgumentParser(prog="apibank-bench", description=__doc__.split("\n\n", 1)[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for module in COMMANDS:
        before = set(sub.choices)
        module.register(sub)
        details = getattr(module, "add_detail_flags", None)
        for name in set(sub.choices) - before:
            if details is not None and command in (None, name):
                details(sub.choices[name])
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    hand_down()  # the composition root: core's settings get the higher layers' choices and rules
    try:
        args = build_parser(chosen_command(argv) or "").parse_args(argv)
        with settings.command_voice():  # messages name this command's flags (`--resume`, not `--apibank-resume`)
            return args.func(args)
    except (DataMissing, FileNotFoundError, ValueError, KeyError) as exc:
        print(f"apibank-bench: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    except KeyboardInterrupt:
        print("apibank-bench: interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
