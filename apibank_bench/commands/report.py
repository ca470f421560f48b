"""`apibank-bench report`: a static HTML report of results folders or a sweep."""

from __future__ import annotations

import sys
from pathlib import Path

from apibank_bench.core import settings
from apibank_bench.core.exit_codes import ExitCode


def register(sub) -> None:
    parser = sub.add_parser("report", help="a static HTML report of results folders or a sweep")
    parser.add_argument("dirs", nargs="+", metavar="DIR", help="results folders, or folders of them (a sweep)")
    parser.add_argument("--out", required=True, help="folder for index.html and the copied traces")
    settings.add_command_flags(parser, "report")
    parser.set_defaults(func=run)


def missing_runs(dirs: list[str]) -> list[str]:
    """Why each given folder that is not a run (nor a folder of runs) cannot be reported: none is passed over."""
    from apibank_bench.runs.results import SUMMARY

    problems = []
    for directory in map(Path, dirs):
        if not directory.is_dir():
            problems.append(f"{directory} does not exist")
        elif not (directory / SUMMARY).is_file() and next(directory.rglob(SUMMARY), None) is None:
            problems.append(f"{directory} holds no run (no {SUMMARY} in it or under it)")
    return problems


def run(args) -> int:
    from apibank_bench.reports.html import build_report
    from apibank_bench.runs.cost import price_table

    problems = missing_runs(args.dirs)
    if problems:
        print(f"apibank-bench report: refused: {'; '.join(problems)}", file=sys.stderr)
        return ExitCode.USAGE
    try:
        values = settings.command_values(args, "report")
        index = build_report(args.dirs, Path(args.out), seed=values.seed,
                             prices=price_table(values.price, values.price_file))
    except (FileNotFoundError, ValueError) as exc:
        print(f"apibank-bench report: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    print(f"wrote {index}")
    return ExitCode.OK
