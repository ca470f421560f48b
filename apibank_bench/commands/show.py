"""`apibank-bench show ID [--out-dir D]`: one instance of a run in the terminal."""

from __future__ import annotations

import sys
from pathlib import Path


def register(sub) -> None:
    parser = sub.add_parser("show", help="one instance of a run: the dialogue, every agent turn, the decision, "
                                         "the scored and the gold call")
    parser.add_argument("id", metavar="ID",
                        help="a task ID as in results.jsonl (the `level-N::` prefix may be left out)")
    parser.add_argument("--out-dir", default=None,
                        help="the run's results folder (default: the one folder under results/apibank holding ID)")
    parser.add_argument("--epoch", type=int, default=0, help="which epoch of a run of several (default 0)")
    parser.add_argument("--prompt-chars", type=int, default=None,
                        help="characters shown from the end of each agent's prompt (default 400; 0 = all)")
    parser.add_argument("--root", "--apibank-root", dest="apibank_root", default=None,
                        help="API-Bank data root, for the dialogue (default $APIBANK_ROOT or vendor/api-bank)")
    parser.set_defaults(func=run)


def run(args) -> int:
    from apibank_bench.reports.instance import PROMPT_CHARS, load_instance, sections, to_text

    try:
        instance = load_instance(args.id, Path(args.out_dir) if args.out_dir else None, args.epoch)
    except (LookupError, FileNotFoundError) as exc:
        print(f"apibank-bench show: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 2
    chars = PROMPT_CHARS if args.prompt_chars is None else args.prompt_chars
    print(to_text(sections(instance, chars, args.apibank_root)), end="")
    return 0
