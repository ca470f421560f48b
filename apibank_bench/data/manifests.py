"""Task ID lists: the 100-task eval manifest, the per-level curated lists, the pool, and splits.

Reading and selecting only; building the curated lists needs the scorer (scoring/curation.py).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Iterable

from apibank_bench.core.paths import MANIFEST_DIR
from apibank_bench.data.tasks import LEVELS, Task, get_tasks, split_combined_id

EVAL_MANIFEST = "apibank_eval_ids.json"
POOL_MANIFEST = "apibank_pool_ids.json"
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
            raise ValueError(unknown_ids_message(sorted(unknown), ids, normalize_level(level), directory))
        ids = [task_id for task_id in ids if task_id in wanted or split_combined_id(task_id)[1] in wanted]
    ids = ids[max(offset, 0):]
    return ids if limit is None else ids[:limit]


def unknown_ids_message(unknown: list[str], ids: list[str], level: str, directory: Path) -> str:
    """What to do about `--only` IDs that the selection does not hold: where the valid ones are, near misses."""
    from difflib import get_close_matches

    from apibank_bench.core.settings import flag

    name = EVAL_MANIFEST if level == "all" else curated_name(level)
    where = f"{flag('level')} {level} draws from {Path(directory) / name} ({len(ids)} IDs)"
    near = [match for task_id in unknown for match in get_close_matches(task_id, ids, n=1, cutoff=0.8)]
    hint = f"; did you mean {', '.join(near)}?" if near else ""
    others = "" if level == "all" else f"; {flag('level')} all is the eval manifest {EVAL_MANIFEST}"
    return f"{flag('only')}: not in the selection: {', '.join(unknown)} ({where}{others}){hint}"


def load_selection(level: str | int | None = "all", limit: int | None = None, offset: int = 0,
                   only: Iterable[str] | None = None, root: str | Path | None = None,
                   directory: Path = MANIFEST_DIR) -> list[Task]:
    return get_tasks(select(level, limit, offset, only, directory), root)


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
