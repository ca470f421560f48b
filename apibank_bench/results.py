"""Result files of a run: `predictions.jsonl`, `results.jsonl`, `traces/`, `summary.json`.

Lines are appended the moment an instance finishes (an interrupted run keeps
everything it did) and the files are put back in manifest order, without
duplicates, when the run ends or is resumed.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any, Iterable

from .scoring import Score, Scorer
from .tasks import Task, get_task

RESULTS = "results.jsonl"
PREDICTIONS = "predictions.jsonl"
SUMMARY = "summary.json"
TRACES = "traces"


def to_json(value: Any) -> str:
    # Parsed arguments may hold sets or tuples (any Python literal parses); keep them readable.
    return json.dumps(value, ensure_ascii=False, default=lambda obj: sorted(obj, key=repr)
                      if isinstance(obj, (set, frozenset)) else str(obj))


def records(task: Task, answer: str | None, score: Score, extra: dict | None = None) -> tuple[dict, dict]:
    """The predictions.jsonl and results.jsonl lines of one instance."""
    prediction = {"id": task.combined_id, "prediction": answer, "predicted_call": score.predicted_call}
    result = {
        "id": task.combined_id,
        "level": task.level,
        "correct": score.correct,
        "stage": score.stage,
        "error": score.error,
        "predicted_call": score.predicted_call,
        "gold_call": task.gold_call,
        **(extra or {}),
    }
    return prediction, result


class RunFiles:
    """The out dir of one run. Only one process (the pytest controller) writes it."""

    def __init__(self, out_dir: Path, resume: bool = False) -> None:
        self.out_dir = Path(out_dir)
        self._lock = threading.Lock()
        if not resume:
            for name in (RESULTS, PREDICTIONS, SUMMARY):
                (self.out_dir / name).unlink(missing_ok=True)
            traces = self.out_dir / TRACES
            if traces.is_dir():
                for path in traces.glob("*.json"):
                    path.unlink()
        (self.out_dir / TRACES).mkdir(parents=True, exist_ok=True)

    def finished_ids(self) -> set[str]:
        return {line["id"] for line in read_jsonl(self.out_dir / RESULTS)}

    def append(self, prediction: dict, result: dict, trace: dict | None = None) -> None:
        with self._lock:
            for name, line in ((PREDICTIONS, prediction), (RESULTS, result)):
                with open(self.out_dir / name, "a", encoding="utf-8") as handle:
                    handle.write(to_json(line) + "\n")
                    handle.flush()
                    os.fsync(handle.fileno())
            if trace is not None:
                write_atomic(self.out_dir / TRACES / trace_name(result["id"]), to_json(trace))

    def finalize(self, order: Iterable[str], config: dict | None = None, wall_time_s: float | None = None) -> dict:
        """Sort both JSONL files into manifest order (last line per ID wins) and write summary.json."""
        with self._lock:
            order = list(order)
            for name in (PREDICTIONS, RESULTS):
                put_in_order(self.out_dir / name, order)
            wanted = set(order)
            results = [line for line in read_jsonl(self.out_dir / RESULTS) if line["id"] in wanted]
            summary = summarize(results, config, wall_time_s, selected=len(order), trace_dir=self.out_dir / TRACES)
            write_atomic(self.out_dir / SUMMARY, json.dumps(summary, indent=1, ensure_ascii=False))
            return summary


def trace_name(task_id: str) -> str:
    """A file name for a task ID (IDs contain `::`)."""
    return task_id.replace("::", "__").replace("/", "_") + ".json"


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def read_jsonl(path: Path) -> list[dict]:
    """Lines of a JSONL file; a torn last line (a killed writer) is ignored."""
    if not Path(path).is_file():
        return []
    lines = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            try:
                lines.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return lines


def put_in_order(path: Path, order: list[str]) -> None:
    lines = {line["id"]: line for line in read_jsonl(path)}
    rank = {task_id: index for index, task_id in enumerate(order)}
    ordered = sorted(lines.values(), key=lambda line: (rank.get(line["id"], len(rank)), line["id"]))
    if path.exists() or ordered:
        write_atomic(path, "".join(to_json(line) + "\n" for line in ordered))


def summarize(results: list[dict], config: dict | None = None, wall_time_s: float | None = None,
              selected: int | None = None, trace_dir: Path | None = None) -> dict:
    """summary.json (see summary.summarize_rows); `not_run`: selected instances with no line at all."""
    from .summary import read_traces, summarize_rows

    summary = summarize_rows(results, read_traces(trace_dir))
    if selected is not None:
        summary["selected"] = selected
        summary["not_run"] = max(selected - len(results), 0)
    summary["complete"] = not summary["errors"] and not summary.get("not_run")
    if wall_time_s is not None:
        summary["wall_time_s"] = round(wall_time_s, 3)
    if config:
        summary["config"] = config
    return summary


def score_predictions_file(predictions: Path, out_dir: Path, level: str | None = None,
                           toolsearcher_scorer: str | None = None, root=None) -> dict:
    """`apibank-bench score`: score saved raw answers into out_dir/results.jsonl."""
    scorer = Scorer(root, toolsearcher_scorer)
    files = RunFiles(out_dir)
    order = []
    for line in read_jsonl(predictions):
        task = get_task(str(line["id"]), level=level, root=scorer.root)
        answer = line.get("prediction")
        prediction, result = records(task, answer, scorer.score(task, answer))
        files.append(prediction, result)
        order.append(task.combined_id)
    return files.finalize(order, config={"source": str(predictions), "toolsearcher_scorer": toolsearcher_scorer})
