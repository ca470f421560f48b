"""`apibank-bench report`: a static HTML report of results folders or a sweep."""

from __future__ import annotations

import sys
from pathlib import Path

from apibank_bench.core import settings


def register(sub) -> None:
    parser = sub.add_parser("report", help="a static HTML report of results folders or a sweep")
    parser.add_argument("dirs", nargs="+", metavar="DIR", help="results folders, or folders of them (a sweep)")
    parser.add_argument("--out", required=True, help="folder for index.html and the copied traces")
    settings.add_command_flags(parser, "report")
    parser.set_defaults(func=run)


def run(args) -> int:
    from apibank_bench.reports.html import build_report
    from apibank_bench.runs.cost import price_table

    try:
        values = settings.command_values(args, "report")
        index = build_report(args.dirs, Path(args.out), seed=values.seed,
                             prices=price_table(values.price, values.price_file))
    except (FileNotFoundError, ValueError) as exc:
        print(f"apibank-bench report: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {index}")
    return 0
