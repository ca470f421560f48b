"""Epochs: every instance solved K times (`--apibank-epochs K`), each epoch with its own sampling seeds.

A run of K epochs has one *case* per (instance, epoch): one pytest case, one results row (with
its `epoch`), one trace. Cases run epoch by epoch, each epoch in manifest order; resume and
shards work per case. With one epoch (the default) a case is its instance, under its own ID.
Epoch e's requests carry the protocol's seeds moved by `EPOCH_SEED_STRIDE * e` (see
agents.chat_agent), so epoch 0 sends exactly what a run without epochs sends.

What summary.json says about the repeats (`epoch_summary`, per level and overall): the mean
accuracy over all (instance, epoch) rows with an interval clustered by instance (an instance's
epochs are not independent draws), the unbiased pass@k for every k <= K, majority-of-K accuracy
(the share of instances right in more than half of their epochs), each instance's number of
correct epochs and `flip_rate` (the share of instances right in some epochs and wrong in others).
Error rows count as attempts that are not correct, as everywhere in the summary.

The headline of such a run (runs.summary.accuracy) counts instances, not rows: n is the number of
instances, and its interval is Wilson's on the effective number of instances.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from statistics import fmean, stdev
from typing import Iterable

from apibank_bench.runs.row import ResultRow
from apibank_bench.runs.stats import clustered_interval, pass_at_k

_CASE = re.compile(r"(?P<id>.+)-epoch(?P<epoch>\d+)")


def case_id(task_id: str, epoch: int, epochs: int) -> str:
    """The pytest ID of one (instance, epoch): the instance's ID alone when the run has one epoch."""
    return task_id if epochs == 1 else f"{task_id}-epoch{epoch}"


def split_case(case: str) -> tuple[str, int]:
    """(task ID, epoch) of a case ID."""
    match = _CASE.fullmatch(case)
    return (match["id"], int(match["epoch"])) if match else (case, 0)


def case_ids(task_ids: Iterable[str], epochs: int) -> list[str]:
    """Every case of a run in the order it runs: epoch by epoch, each in the given (manifest) order."""
    task_ids = list(task_ids)
    return [case_id(task_id, epoch, epochs) for epoch in range(epochs) for task_id in task_ids]


def run_cases(task_ids: Iterable[str], epochs: int, shard: tuple[int, int] | None = None) -> list[str]:
    """A run's cases (`case_ids`); a shard `(i, n)` takes every n-th case from the i-th, so with one
    epoch every n-th instance."""
    cases = case_ids(task_ids, epochs)
    if shard:
        index, count = shard
        cases = cases[index - 1::count]
    return cases


def row_key(line: dict) -> tuple[str, int]:
    """What identifies a line of results.jsonl or predictions.jsonl: its instance and epoch (lines written
    before epochs: epoch 0). A typed row's is `ResultRow.key`."""
    return line["id"], int(line.get("epoch") or 0)


def correct_epochs(rows: list[ResultRow]) -> dict[str, list[int]]:
    """Per instance: [correct epochs, epochs with a row]."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for row in rows:
        counts[row.id][0] += row.is_correct
        counts[row.id][1] += 1
    return dict(counts)


def epoch_summary(rows: list[ResultRow]) -> dict:
    """The repeats part of summary.json for a group of rows (see the module docstring)."""
    counts = correct_epochs(rows)
    correct = [c for c, _ in counts.values()]
    attempts = [n for _, n in counts.values()]
    epochs = max(attempts, default=0)
    low, high = clustered_interval(correct, attempts)
    pass_at = {}
    for k in range(1, epochs + 1):
        eligible = [(n, c) for c, n in zip(correct, attempts) if n >= k]
        pass_at[str(k)] = fmean(pass_at_k(n, c, k) for n, c in eligible)
    per_epoch: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for row in rows:
        per_epoch[row.key[1]][0] += row.is_correct
        per_epoch[row.key[1]][1] += 1
    by_epoch = {str(e): c / n for e, (c, n) in sorted(per_epoch.items())}
    return {
        "epochs": epochs, "instances": len(counts), "attempts": sum(attempts),
        "accuracy_by_epoch": by_epoch,
        "sd_over_epochs": stdev(by_epoch.values()) if len(by_epoch) > 1 else None,
        "mean_accuracy": sum(correct) / sum(attempts) if attempts else 0.0,
        "clustered_95": [low, high],
        "pass_at_k": pass_at,
        "majority_accuracy": fmean(c > n / 2 for c, n in zip(correct, attempts)) if attempts else 0.0,
        "flip_rate": fmean(0 < c < n for c, n in zip(correct, attempts)) if attempts else 0.0,
        "instances_by_correct_epochs": {str(k): v for k, v in sorted(Counter(correct).items())},
    }
