"""`apibank-bench`: data, summary, scoring of saved answers, manifests, and benchmark runs."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from .paths import DataMissing


def _add_selection(parser: argparse.ArgumentParser, default_limit: int | None = None) -> None:
    parser.add_argument("--level", default="all", help="all (the eval manifest), 1, 2 or 3 (curated lists)")
    parser.add_argument("--limit", type=int, default=default_limit, help="at most N tasks")
    parser.add_argument("--offset", type=int, default=0, help="skip the first K tasks")
    parser.add_argument("--only", nargs="+", metavar="ID", help="only these task IDs")
    parser.add_argument("--apibank-root", default=None, help="API-Bank data root (default $APIBANK_ROOT or vendor/api-bank)")


def cmd_data(args) -> int:
    from . import data

    if args.data_command == "fetch":
        return data.main_fetch(args.source)
    return data.main_verify(args.root)


def summary(level="all", limit=None, offset=0, only=None, root=None) -> dict:
    """The data check and gold-call replay, without a model (the reference's `--summary`)."""
    from .manifests import load_selection
    from .scoring import Scorer

    tasks = load_selection(level, limit, offset, only, root)
    scorer = Scorer(root)
    replays = [scorer.gold_replay(task) for task in tasks]
    failures = [{"id": task.combined_id, "stage": score.stage, "error": score.error}
                for task, score in zip(tasks, replays) if not score.correct]
    return {
        "level": str(level),
        "root": str(scorer.root),
        "num_samples": len(tasks),
        "unique_ids": len({task.combined_id for task in tasks}),
        "level_counts": dict(Counter(task.level for task in tasks)),
        "api_counts": dict(Counter(task.gold.api_name for task in tasks)),
        "gold_replay_correct": sum(score.correct for score in replays),
        "gold_replay_failures": failures,
    }


def cmd_summary(args) -> int:
    report = summary(args.level, args.limit, args.offset, args.only, args.apibank_root)
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print(f"data root: {report['root']}")
    print(f"tasks: {report['num_samples']}  by level: {report['level_counts']}")
    print(f"gold calls replaying correctly: {report['gold_replay_correct']} / {report['num_samples']}")
    for name, count in sorted(report["api_counts"].items()):
        print(f"  {name:28s} {count}")
    for failure in report["gold_replay_failures"]:
        print(f"  FAIL {failure['id']} [{failure['stage']}] {failure['error']}")
    return 0


def cmd_tasks(args) -> int:
    from .tasks import LEVELS, load_level

    counts = {level: len(load_level(level, args.apibank_root)) for level in LEVELS}
    for level, count in counts.items():
        print(f"level {level}: {count} tasks")
    print(f"total: {sum(counts.values())} tasks")
    return 0


def cmd_score(args) -> int:
    from .results import score_predictions_file

    report = score_predictions_file(Path(args.predictions), Path(args.out_dir), level=args.level,
                                    toolsearcher_scorer=args.toolsearcher_scorer, root=args.apibank_root)
    print(f"scored {report['total']} answers: {report['correct']} correct "
          f"({report['accuracy']:.1%}); wrote {Path(args.out_dir) / 'results.jsonl'}")
    return 0


def cmd_manifests(args) -> int:
    from . import manifests
    from .scoring import Scorer

    if args.manifests_command == "build":
        built = manifests.build(Scorer(args.apibank_root), Path(args.out))
        for level, manifest in built.items():
            print(f"level {level}: {len(manifest['ids'])} IDs; excluded {manifest['excluded_summary']}")
        print(f"wrote {args.out}")
        return 0
    result = manifests.splits(args.train, args.validation, args.seed)
    print(json.dumps(result, indent=1))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="apibank-bench", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    data = sub.add_parser("data", help="get or check the pinned API-Bank data")
    data_sub = data.add_subparsers(dest="data_command", required=True)
    fetch = data_sub.add_parser("fetch", help="fill vendor/api-bank/ (from a local copy, or download the pinned archives)")
    fetch.add_argument("--from", dest="source", default=None, help="a local API-Bank root laid out like upstream")
    verify = data_sub.add_parser("verify", help="check every locked file; names each missing or altered one")
    verify.add_argument("root", nargs="?", default=None, help="data root to check (default vendor/api-bank)")
    data.set_defaults(func=cmd_data)

    tasks = sub.add_parser("tasks", help="check the data and count the tasks per level")
    tasks.add_argument("--apibank-root", default=None)
    tasks.set_defaults(func=cmd_tasks)

    summ = sub.add_parser("summary", help="data check and gold-call replay, no model")
    _add_selection(summ)
    summ.add_argument("--json", action="store_true", help="print the report as JSON")
    summ.set_defaults(func=cmd_summary)

    score = sub.add_parser("score", help="score saved answers (JSONL lines: {id, prediction})")
    score.add_argument("predictions")
    score.add_argument("--out-dir", required=True)
    score.add_argument("--level", default=None, help="level for unprefixed IDs")
    score.add_argument("--toolsearcher-scorer", default=None, choices=["official", "upstream", "keyword"])
    score.add_argument("--apibank-root", default=None)
    score.set_defaults(func=cmd_score)

    man = sub.add_parser("manifests", help="build the curated lists and the pool, or draw splits")
    man_sub = man.add_subparsers(dest="manifests_command", required=True)
    build = man_sub.add_parser("build", help="write the per-level curated lists and the pool")
    build.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "manifests"))
    build.add_argument("--apibank-root", default=None)
    split = man_sub.add_parser("split", help="seeded train/validation IDs from the pool minus the eval set")
    split.add_argument("--train", type=int, required=True)
    split.add_argument("--validation", type=int, default=0)
    split.add_argument("--seed", type=int, default=0)
    man.set_defaults(func=cmd_manifests)

    from .run import add_run_parsers

    add_run_parsers(sub)

    from .optimize import command as optimize_command

    optimize = sub.add_parser("optimize", help="optimize a topology's role prompts (GEPA, MIPROv2, MASPO)")
    optimize_command.add_arguments(optimize)
    optimize.set_defaults(func=optimize_command.main)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except DataMissing as exc:
        print(f"apibank-bench: {exc}", file=sys.stderr)
        return 2
    except (FileNotFoundError, ValueError, KeyError) as exc:
        print(f"apibank-bench: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("apibank-bench: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
