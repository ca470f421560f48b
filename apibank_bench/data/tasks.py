"""API-Bank tasks: one dialogue cut just before one API call.

IDs are the reference harness's: Levels 1/2 `FILE.jsonl::S` with S = 2 x (index of
the call among the dialogue's API turns); Level 3 `level-3.json::SAMPLE::API_INDEX`;
combined manifests prefix the level, `level-1::...`.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from apibank_bench.core.frozen import freeze
from apibank_bench.core.memo import load_once
from apibank_bench.core.paths import LEVEL3_FILE, LEVEL_DIRS, require_root

LEVELS = ("1", "2", "3")


def normalize_value(value: Any) -> Any:
    """The reference's argument normalization: a string that looks like a list,
    dict or tuple literal becomes that literal; anything else is unchanged."""
    if isinstance(value, str) and value[:1] in "[{(":
        try:
            return ast.literal_eval(value)
        except Exception:
            return value
    return value


def normalize_params(params: Mapping[str, Any] | None) -> dict[str, Any]:
    return {str(key): normalize_value(value) for key, value in (params or {}).items()}


def render_call(name: str, params: Mapping[str, Any]) -> str:
    """A call in the output contract's form, `[Name(key=repr(value), ...)]`."""
    args = ", ".join(f"{key}={value!r}" for key, value in params.items())
    return f"[{name}({args})]"


@dataclass(frozen=True)
class ApiTurn:
    """One API call of a dialogue: name, (normalized) parameters and recorded result."""

    api_name: str
    params: Mapping[str, Any]
    result: Mapping[str, Any] | None

    @property
    def call(self) -> str:
        return render_call(self.api_name, self.params)


@dataclass(frozen=True)
class Task:
    id: str  #: the source ID, without level prefix
    level: str  #: "1", "2" or "3"
    history: tuple  #: the dialogue before the call: rows {role: User|AI, text} or API rows
    prior_api_turns: tuple[ApiTurn, ...]
    gold: ApiTurn
    api_names: tuple[str, ...]  #: all APIs of the dialogue, sorted

    @property
    def combined_id(self) -> str:
        return f"level-{self.level}::{self.id}"

    @property
    def gold_call(self) -> str:
        return self.gold.call


def _api_turn(row: Mapping[str, Any]) -> ApiTurn:
    return ApiTurn(
        api_name=row["api_name"],
        params=freeze(normalize_params(row.get("param_dict"))),
        result=freeze(row.get("result")),
    )


def _read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _dialogue_tasks(level: str, path: Path) -> list[Task]:
    rows = _read_jsonl(path)
    api_positions = [i for i, row in enumerate(rows) if row.get("role") == "API"]
    api_names = tuple(sorted({rows[i]["api_name"] for i in api_positions}))
    turns = {i: _api_turn(rows[i]) for i in api_positions}
    frozen = [freeze(row) for row in rows]  # once per row: every later task's history shares them
    tasks = []
    for index, position in enumerate(api_positions):
        tasks.append(
            Task(
                id=f"{path.name}::{2 * index}",
                level=level,
                history=tuple(frozen[:position]),
                prior_api_turns=tuple(turns[i] for i in api_positions[:index]),
                gold=turns[position],
                api_names=api_names,
            )
        )
    return tasks


def _level3_tasks(path: Path) -> list[Task]:
    with path.open(encoding="utf-8") as handle:
        samples = json.load(handle)
    tasks = []
    for sample_id, sample in enumerate(samples):
        steps = sample.get("apis") or []
        # A Level-3 step's API row, shaped like a Level-1/2 dialogue row.
        rows = [
            {"role": "API", "api_name": step.get("api_name"),
             "param_dict": normalize_params(step.get("input")), "result": step.get("output")}
            for step in steps
        ]
        turns = [_api_turn(row) for row in rows]
        api_names = tuple(sorted({row["api_name"] for row in rows if row["api_name"]}))
        requirement = freeze({"role": "User", "text": str(sample.get("requirement") or "").strip()})
        frozen = [freeze(row) for row in rows]
        for api_id in range(len(steps)):
            tasks.append(
                Task(
                    id=f"level-3.json::{sample_id}::{api_id}",
                    level="3",
                    history=(requirement, *frozen[:api_id]),
                    prior_api_turns=tuple(turns[:api_id]),
                    gold=turns[api_id],
                    api_names=api_names,
                )
            )
    return tasks


@load_once
def _file_tasks(root: str, level: str, name: str) -> dict[str, Task]:
    """The tasks of one Level-1/2 dialogue file by ID (a task's ID names its file, so a lookup reads one file)."""
    path = Path(root) / LEVEL_DIRS[level] / name
    if Path(name).name != name or path.suffix != ".jsonl" or not path.is_file():  # an ID names a file of the level
        return {}
    return {task.id: task for task in _dialogue_tasks(level, path)}


@load_once
def _load_level(root: str, level: str) -> tuple[Task, ...]:
    base = Path(root)
    if level == "3":
        return tuple(_level3_tasks(base / LEVEL3_FILE))
    tasks: list[Task] = []
    for path in sorted((base / LEVEL_DIRS[level]).glob("*.jsonl")):
        tasks.extend(_file_tasks(root, level, path.name).values())
    return tuple(tasks)


def load_level(level: str, root: str | Path | None = None) -> tuple[Task, ...]:
    """All tasks of one level, in the reference's order (sorted files, then calls)."""
    if str(level) not in LEVELS:
        raise ValueError(f"unknown level {level!r}; expected one of {', '.join(LEVELS)}")
    return _load_level(str(require_root(root)), str(level))


def split_combined_id(task_id: str) -> tuple[str, str]:
    """`level-2::X` -> ("2", "X"); an unprefixed Level-3 ID gives ("3", id); else ("", id)."""
    prefix, sep, rest = task_id.partition("::")
    if sep and prefix.startswith("level-") and prefix[len("level-"):] in LEVELS:
        return prefix[len("level-"):], rest
    if task_id.startswith("level-3.json::"):
        return "3", task_id
    return "", task_id


@load_once
def _level3_index(root: str) -> dict[str, Task]:
    return {task.id: task for task in _load_level(root, "3")}


def _lookup(root: str, level: str, source_id: str) -> Task | None:
    """Only what the ID needs is read: its dialogue file (Levels 1, 2) or Level 3's one file."""
    if level == "3":
        return _level3_index(root).get(source_id)
    if level in LEVEL_DIRS:
        return _file_tasks(root, level, source_id.partition("::")[0]).get(source_id)
    return None


def get_task(task_id: str, level: str | None = None, root: str | Path | None = None) -> Task:
    """Look up a task by combined ID, or by source ID plus level."""
    return _find(task_id, level, str(require_root(root)))


def get_tasks(task_ids: Iterable[str], root: str | Path | None = None) -> list[Task]:
    """Tasks by combined ID, the data root checked once (not once per task)."""
    checked = str(require_root(root))
    return [_find(task_id, None, checked) for task_id in task_ids]


def _find(task_id: str, level: str | None, root: str) -> Task:
    prefixed_level, source_id = split_combined_id(task_id)
    level = prefixed_level or (str(level) if level else "")
    for candidate in [level] if level else LEVELS:
        task = _lookup(root, candidate, source_id)
        if task is not None:
            return task
    raise KeyError(f"no API-Bank task with ID {task_id!r}")
