"""`apibank-bench tasks|summary|manifests`: the tasks, the gold-replay check, the manifests and splits."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def _add_root(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", "--apibank-root", dest="apibank_root", default=None,
                        help="API-Bank data root (default $APIBANK_ROOT or vendor/api-bank)")


def register(sub) -> None:
    tasks = sub.add_parser("tasks", help="check the data and count the tasks per level")
    _add_root(tasks)
    tasks.set_defaults(func=run_tasks)

    summary = sub.add_parser("summary", help="data check and gold-call replay, no model")
    summary.add_argument("--level", default="all", help="all (the eval manifest), 1, 2 or 3 (curated lists)")
    summary.add_argument("--limit", type=int, default=None, help="at most N tasks")
    summary.add_argument("--offset", type=int, default=0, help="skip the first K tasks")
    summary.add_argument("--only", nargs="+", metavar="ID", help="only these task IDs")
    summary.add_argument("--json", action="store_true", help="print the report as JSON")
    _add_root(summary)
    summary.set_defaults(func=run_summary)

    man = sub.add_parser("manifests", help="build the curated lists and the pool, or draw splits")
    man_sub = man.add_subparsers(dest="manifests_command", required=True)
    build = man_sub.add_parser("build", help="write the per-level curated lists and the pool")
    build.add_argument("--out", default=None, help="default: the project's manifests/")
    _add_root(build)
    split = man_sub.add_parser("split", help="seeded train/validation IDs from the pool minus the eval set")
    split.add_argument("--train", type=int, required=True)
    split.add_argument("--validation", type=int, default=0)
    split.add_argument("--seed", type=int, default=0)
    man.set_defaults(func=run_manifests)


def run_tasks(args) -> int:
    from apibank_bench.data.tasks import LEVELS, load_level

    counts = {level: len(load_level(level, args.apibank_root)) for level in LEVELS}
    for level, count in counts.items():
        print(f"level {level}: {count} tasks")
    print(f"total: {sum(counts.values())} tasks")
    return 0


def run_summary(args) -> int:
    from apibank_bench.scoring.curation import gold_replay_report

    report = gold_replay_report(args.level, args.limit, args.offset, args.only, args.apibank_root)
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


def run_manifests(args) -> int:
    from apibank_bench.data import manifests
    from apibank_bench.core.paths import MANIFEST_DIR
    from apibank_bench.scoring import Scorer, curation

    if args.manifests_command == "build":
        out = Path(args.out) if args.out else MANIFEST_DIR
        built = curation.build(Scorer(args.apibank_root), out)
        for level, manifest in built.items():
            print(f"level {level}: {len(manifest['ids'])} IDs; excluded {manifest['excluded_summary']}")
        print(f"wrote {out}")
        return 0
    print(json.dumps(manifests.splits(args.train, args.validation, args.seed), indent=1))
    return 0
