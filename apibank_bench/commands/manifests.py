"""`apibank-bench tasks|summary|manifests`: the tasks, the gold-replay check, the manifests and splits."""

from __future__ import annotations

import json
from pathlib import Path

from apibank_bench.core import settings


def register(sub) -> None:
    tasks = sub.add_parser("tasks", help="check the data and count the tasks per level")
    settings.add_command_flags(tasks, "tasks")
    tasks.set_defaults(func=run_tasks)

    summary = sub.add_parser("summary", help="data check and gold-call replay, no model")
    summary.add_argument("--json", action="store_true", help="print the report as JSON")
    settings.add_command_flags(summary, "summary")
    summary.set_defaults(func=run_summary)

    man = sub.add_parser("manifests", help="build the curated lists and the pool, or draw splits")
    man_sub = man.add_subparsers(dest="manifests_command", required=True)
    build = man_sub.add_parser("build", help="write the per-level curated lists and the pool")
    build.add_argument("--out", default=None, help="default: the project's manifests/")
    settings.add_command_flags(build, "manifests", skip=("train", "validation", "seed"))
    split = man_sub.add_parser("split", help="seeded train/validation IDs from the pool minus the eval set")
    settings.add_command_flags(split, "manifests", skip=("root",))
    man.set_defaults(func=run_manifests)


def run_tasks(args) -> int:
    from apibank_bench.data.tasks import LEVELS, load_level

    values = settings.command_values(args, "tasks")
    counts = {level: len(load_level(level, values.root)) for level in LEVELS}
    for level, count in counts.items():
        print(f"level {level}: {count} tasks")
    print(f"total: {sum(counts.values())} tasks")
    return 0


def run_summary(args) -> int:
    from apibank_bench.scoring.curation import gold_replay_report

    values = settings.command_values(args, "summary")
    report = gold_replay_report(values.level, values.limit, values.offset, values.only or None, values.root)
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
    values = settings.command_values(args, "manifests")
    if args.manifests_command == "build":
        from apibank_bench.core.paths import MANIFEST_DIR
        from apibank_bench.scoring import Scorer, curation

        out = Path(args.out) if args.out else MANIFEST_DIR
        built = curation.build(Scorer(values.root), out)
        for level, manifest in built.items():
            print(f"level {level}: {len(manifest['ids'])} IDs; excluded {manifest['excluded_summary']}")
        print(f"wrote {out}")
        return 0
    from apibank_bench.data import manifests

    print(json.dumps(manifests.splits(values.train, values.validation, values.seed), indent=1))
    return 0
