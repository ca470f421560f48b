"""Task ID lists: the 100-task eval manifest, the per-level curated lists, the pool, and splits.

The curated lists are the reference's: per level, the first tasks in sorted
file/sample order whose gold call replays correctly, skipping tasks that need
APIs which cannot be scored deterministically (Level 1 also skips ToolSearcher).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Iterable

from .paths import MANIFEST_DIR
from .scoring import Scorer
from .tasks import LEVELS, Task, get_task, load_level, split_combined_id

EVAL_MANIFEST = "apibank_eval_ids.json"
POOL_MANIFEST = "apibank_pool_ids.json"
CURATED_LIMITS = {"1": 100, "2": 100, "3": 245}
_NONDETERMINISTIC = {"SearchEngine", "Translate"}
SKIP_APIS = {"1": _NONDETERMINISTIC | {"ToolSearcher"}, "2": _NONDETERMINISTIC, "3": _NONDETERMINISTIC}
LEVEL_CHOICES = ("all", *LEVELS)


def curated_name(level: str) -> str:
    return f"apibank_level{level}_curated.json"


def normalize_level(level: str | int | None) -> str:
    key = str(level if level is not None else "all").strip().lower().removeprefix("level").lstrip("-_")
    key = key or "all"
    if key not in LEVEL_CHOICES:
        raise ValueError(f"unknown level {level!r}; expected one of {', '.join(LEVEL_CHOICES)}")
    return key


def read_manifest(name: str, directory: Path = MANIFEST_DIR) -> dict:
    path = Path(directory) / name
    if not path.is_file():
        raise FileNotFoundError(f"manifest {path} not found; run `apibank-bench manifests build`")
    return json.loads(path.read_text(encoding="utf-8"))


def _required_apis(task: Task) -> set[str]:
    return {*task.api_names, task.gold.api_name, *(turn.api_name for turn in task.prior_api_turns)}


def curate_level(level: str, scorer: Scorer, limit: int | None = None) -> dict:
    """The reference's curated list for one level, with what was excluded and why."""
    limit = CURATED_LIMITS[level] if limit is None else limit
    selected: list[str] = []
    excluded: Counter[str] = Counter()
    examples: dict[str, list[str]] = {}
    for task in load_level(level, scorer.root):
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


def manifest_ids(level: str | int | None = "all", directory: Path = MANIFEST_DIR) -> list[str]:
    """All IDs a level's run draws from: the eval manifest for `all`, else the curated list."""
    level = normalize_level(level)
    if level == "all":
        return list(read_manifest(EVAL_MANIFEST, directory)["ids"])
    return [f"level-{level}::{task_id}" for task_id in read_manifest(curated_name(level), directory)["ids"]]


def select(level: str | int | None = "all", limit: int | None = None, offset: int = 0,
           only: Iterable[str] | None = None, directory: Path = MANIFEST_DIR) -> list[str]:
    """Combined IDs for a run, in manifest order. `only` matches combined or source IDs."""
    ids = manifest_ids(level, directory)
    if only:
        wanted = set(only)
        unknown = wanted - set(ids) - {split_combined_id(task_id)[1] for task_id in ids}
        if unknown:
            raise ValueError(f"not in the {normalize_level(level)} manifest: {', '.join(sorted(unknown))}")
        ids = [task_id for task_id in ids if task_id in wanted or split_combined_id(task_id)[1] in wanted]
    ids = ids[max(offset, 0):]
    return ids if limit is None else ids[:limit]


def load_selection(level="all", limit=None, offset=0, only=None, root=None,
                   directory: Path = MANIFEST_DIR) -> list[Task]:
    return [get_task(task_id, root=root) for task_id in select(level, limit, offset, only, directory)]


def splits(train: int, validation: int, seed: int = 0, directory: Path = MANIFEST_DIR) -> dict[str, list[str]]:
    """Seeded train/validation IDs for optimizers: the pool minus the eval set, balanced across levels.

    Each level's remaining IDs are shuffled with `seed`; the splits then take one
    ID from each level in turn, so the levels stay balanced while they last.
    """
    pool = read_manifest(POOL_MANIFEST, directory)["ids"]
    held_out = set(read_manifest(EVAL_MANIFEST, directory)["ids"])
    rng = random.Random(seed)
    queues = []
    for level in LEVELS:
        ids = [task_id for task_id in pool if split_combined_id(task_id)[0] == level and task_id not in held_out]
        rng.shuffle(ids)
        queues.append(ids)
    interleaved = []
    while any(queues):
        for queue in queues:
            if queue:
                interleaved.append(queue.pop(0))
    if train + validation > len(interleaved):
        raise ValueError(f"only {len(interleaved)} non-eval pool tasks; asked for {train} + {validation}")
    return {"train": interleaved[:train], "validation": interleaved[train:train + validation]}


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
