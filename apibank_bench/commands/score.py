"""`apibank-bench score`: score saved answers into a results folder."""

from __future__ import annotations

from pathlib import Path

from apibank_bench.core import settings


def register(sub) -> None:
    score = sub.add_parser("score", help="score saved answers (JSONL lines: {id, prediction})")
    score.add_argument("predictions")
    settings.add_command_flags(score, "score")
    score.set_defaults(func=run)


def run(args) -> int:
    from apibank_bench.apis.search.model import use_cache_root
    from apibank_bench.runs.results import score_predictions_file

    values = settings.command_values(args, "score")
    if values.out_dir is None:
        raise ValueError("score: --out-dir is required (the results folder to write)")
    use_cache_root(values.cache_dir)
    level = None if values.level == "all" else values.level  # "all": IDs carry their level, or any level
    report = score_predictions_file(Path(args.predictions), Path(values.out_dir), level=level,
                                    toolsearcher_scorer=values.toolsearcher_scorer, root=values.root)
    print(f"scored {report['total']} answers: {report['correct']} correct "
          f"({report['accuracy']:.1%}); wrote {Path(values.out_dir) / 'results.jsonl'}")
    return 0
