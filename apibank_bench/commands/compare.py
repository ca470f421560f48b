"""`apibank-bench compare`: paired statistics between results folders."""

from __future__ import annotations

import json
import sys

from apibank_bench.core import settings
from apibank_bench.core.exit_codes import ExitCode


def register(sub) -> None:
    parser = sub.add_parser("compare", help="paired statistics between results folders (the first is the baseline)")
    parser.add_argument("runs", nargs="+", metavar="RUN_DIR", help="results folders; the first is the baseline")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    parser.add_argument("--fail-if-worse", type=float, default=None, metavar="ALPHA",
                        help="exit 1 when a run is worse than the baseline on the paired instances with an exact "
                             "McNemar p below ALPHA (a CI gate)")
    settings.add_command_flags(parser, "compare")
    parser.set_defaults(func=run)


def run(args) -> int:
    from apibank_bench.reports.compare import compare, format_table, regressions
    from apibank_bench.reports.pairs import RunMismatch

    if args.fail_if_worse is not None and not 0 < args.fail_if_worse < 1:
        print("apibank-bench compare: --fail-if-worse takes a significance level between 0 and 1", file=sys.stderr)
        return ExitCode.USAGE
    values = settings.command_values(args, "compare")
    try:
        result = compare(args.runs, seed=values.seed, force=values.force)
    except (RunMismatch, FileNotFoundError, ValueError) as exc:
        print(f"apibank-bench compare: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    for warning in result["warnings"]:
        print(f"apibank-bench compare: WARNING: runs are not comparable: {warning}", file=sys.stderr)
    print(json.dumps(result, indent=1) if args.json else format_table(result), end="\n" if args.json else "")
    worse = regressions(result, args.fail_if_worse) if args.fail_if_worse is not None else []
    for line in worse:
        print(f"apibank-bench compare: {line}", file=sys.stderr)
    return 1 if worse else ExitCode.OK  # 1 as pytest's "tests failed": compare is a check, not a run
