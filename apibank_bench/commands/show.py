"""`apibank-bench show ID [--out-dir D]`: one instance of a run in the terminal."""

from __future__ import annotations

import sys
from pathlib import Path

from apibank_bench.core import settings
from apibank_bench.core.exit_codes import ExitCode


def register(sub) -> None:
    parser = sub.add_parser("show", help="one instance of a run: the dialogue, every agent turn, the decision, "
                                         "the scored and the gold call")
    parser.add_argument("id", metavar="ID",
                        help="a task ID as in results.jsonl (the `level-N::` prefix may be left out)")
    parser.add_argument("--epoch", type=int, default=0, help="which epoch of a run of several (default 0)")
    parser.add_argument("--prompt-chars", type=int, default=None,
                        help="characters shown from the end of each agent's prompt (default 400; 0 = all)")
    settings.add_command_flags(parser, "show")
    parser.set_defaults(func=run)


def run(args) -> int:
    from apibank_bench.reports.instance import PROMPT_CHARS, load_instance, sections, to_text

    values = settings.command_values(args, "show")
    try:
        instance = load_instance(args.id, Path(values.out_dir) if values.out_dir else None, args.epoch)
    except (LookupError, FileNotFoundError) as exc:
        print(f"apibank-bench show: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return ExitCode.USAGE
    chars = PROMPT_CHARS if args.prompt_chars is None else args.prompt_chars
    print(to_text(sections(instance, chars, values.root)), end="")
    return ExitCode.OK
