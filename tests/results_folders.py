"""Real results folders for the compare and report tests, built with `apibank-bench score`."""

from __future__ import annotations

import json
from pathlib import Path

from apibank_bench.cli import main as cli_main
from apibank_bench.data.manifests import load_selection


def eval_tasks(root) -> list:
    return load_selection("all", None, 0, None, root)


def score_folder(tmp: Path, name: str, tasks: list, wrong: set[int]) -> Path:
    """Score a predictions file: the gold call for each task, a wrong answer at the indices in `wrong`."""
    lines = []
    for index, task in enumerate(tasks):
        answer = task.gold_call
        if index in wrong:
            answer = "[NoSuchApi(x=1)]" if index % 2 else "I cannot help with that."
        lines.append(json.dumps({"id": task.combined_id, "prediction": answer}))
    predictions = tmp / f"{name}.jsonl"
    predictions.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp / name
    assert cli_main(["score", str(predictions), "--out-dir", str(out)]) == 0
    return out
