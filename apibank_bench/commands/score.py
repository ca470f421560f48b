"""`apibank-bench score`: score saved answers into a results folder."""

from __future__ import annotations

from pathlib import Path


def register(sub) -> None:
    score = sub.add_parser("score", help="score saved answers (JSONL lines: {id, prediction})")
    score.add_argument("predictions")
    score.add_argument("--out-dir", required=True)
    score.add_argument("--level", default=None, help="level for unprefixed IDs")
    score.add_argument("--toolsearcher-scorer", default=None, help="official, upstream or keyword")
    score.add_argument("--root", "--apibank-root", dest="apibank_root", default=None)
    score.set_defaults(func=run)


def run(args) -> int:
    from apibank_bench.runs.results import score_predictions_file

    report = score_predictions_file(Path(args.predictions), Path(args.out_dir), level=args.level,
                                    toolsearcher_scorer=args.toolsearcher_scorer, root=args.apibank_root)
    print(f"scored {report['total']} answers: {report['correct']} correct "
          f"({report['accuracy']:.1%}); wrote {Path(args.out_dir) / 'results.jsonl'}")
    return 0
