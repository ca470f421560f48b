"""The curated lists and the pool, built by replaying gold calls with the scorer; the gold-replay check.

The curated lists are the reference's: per level, the first tasks in sorted file/sample order whose
gold call replays correctly, skipping tasks that need APIs which cannot be scored deterministically
(Level 1 also skips ToolSearcher).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from apibank_bench.core.paths import MANIFEST_DIR
from apibank_bench.data.manifests import POOL_MANIFEST, curated_name, load_selection
from apibank_bench.data.tasks import LEVELS, Task, load_level, split_combined_id
from apibank_bench.scoring.scorer import Scorer

CURATED_LIMITS = {"1": 100, "2": 100, "3": 245}
_NONDETERMINISTIC = {"SearchEngine", "Translate"}
SKIP_APIS = {"1": _NONDETERMINISTIC | {"ToolSearcher"}, "2": _NONDETERMINISTIC, "3": _NONDETERMINISTIC}

def _required_apis(task: Task) -> set[str]:
    return {*task.api_names, task.gold.api_name, *(turn.api_name for turn in task.prior_api_turns)}


def curate_level(level: str, scorer: Scorer, limit: int | None = None) -> dict:
    """The reference's curated list for one level, with what was excluded and why."""
    limit = CURATED_LIMITS[level] if limit is None else limit
    selected: list[str] = []
    excluded: Counter[str] = Counter()
    examples: dict[str, list[str]] = {}
    for task in load_level(level, scorer.root):
        reason: str | None
        if _required_apis(task) & SKIP_APIS[level]:
            reason = "special_dependency_api"
        else:
            replay = scorer.gold_replay(task)
            reason = None if replay.correct else replay.stage
        if reason:
            excluded[reason] += 1
            examples.setdefault(reason, []).append(task.id)
            continue
        selected.append(task.id)
        if len(selected) >= limit:
            break
    return {
        "selection": f"first replay-valid Level-{level} API-call tasks in sorted file/sample order",
        "limit": limit,
        "ids": selected,
        "excluded_summary": dict(excluded),
        "excluded_examples": {reason: ids[:10] for reason, ids in examples.items()},
    }


def build(scorer: Scorer, directory: Path = MANIFEST_DIR) -> dict[str, dict]:
    """Write the three curated lists and the pool (their union, level-prefixed)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    built = {}
    pool: list[str] = []
    for level in LEVELS:
        manifest = curate_level(level, scorer)
        built[level] = manifest
        pool.extend(f"level-{level}::{task_id}" for task_id in manifest["ids"])
        _write(directory / curated_name(level), manifest)
    counts = Counter(split_combined_id(task_id)[0] for task_id in pool)
    _write(directory / POOL_MANIFEST, {"selection": "union of the per-level curated lists",
                                       "level_counts": dict(counts), "ids": pool})
    return built


def _write(path: Path, payload: dict) -> None:
    path.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")


def gold_replay_report(level="all", limit=None, offset=0, only=None, root=None) -> dict:
    """The data check and gold-call replay, without a model (the reference's `--summary`)."""
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
