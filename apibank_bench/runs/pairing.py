"""The one pairing of two runs' rows, and the paired statistics on it: every paired test goes here.

`compare`, the pytest regression gate (reports) and the optimizer's final.json (optimize) pair the
same way: one row per instance, epoch 0's (the epoch whose seeds a run without epochs uses, so
the exact McNemar test stays valid); the instances both runs hold; and of those only the ones
with an answer in both, since a row that is an infrastructure error in either run is not an
answer (it is left out and counted, never taken for a wrong answer).
"""

from __future__ import annotations

from dataclasses import dataclass

from apibank_bench.runs.row import ResultRow
from apibank_bench.runs.stats import discordant, mcnemar_exact, min_detectable_difference, paired_bootstrap


def first_epoch(rows: list[ResultRow]) -> dict[str, ResultRow]:
    """The rows that take part in a pairing, by instance: epoch 0's (every row of a run without epochs)."""
    return {row.id: row for row in rows if row.key[1] == 0}


@dataclass
class Paired:
    """Two runs' rows matched by instance."""

    base: dict[str, ResultRow]  #: the baseline's rows by instance (epoch 0)
    other: dict[str, ResultRow]  #: the other run's
    shared: list[str]  #: instances both runs hold, in the baseline's order
    paired: list[str]  #: those with an answer in both (error rows left out)
    errors_excluded: dict[str, int]  #: shared instances left out for an error row, per run ("baseline", "run")


def pair_rows(baseline: list[ResultRow], other: list[ResultRow]) -> Paired:
    """Match two runs' rows (see the module docstring)."""
    base, theirs = first_epoch(baseline), first_epoch(other)
    shared = [task_id for task_id in base if task_id in theirs]
    paired = [task_id for task_id in shared if not base[task_id].is_error and not theirs[task_id].is_error]
    errors = {"baseline": sum(base[i].is_error for i in shared), "run": sum(theirs[i].is_error for i in shared)}
    return Paired(base, theirs, shared, paired, errors)


def paired_stats(ids: list[str], base: dict[str, ResultRow], other: dict[str, ResultRow], seed: int) -> dict:
    """On the paired instances `ids`: each run's accuracy, the difference (other - base) with a seeded
    paired-bootstrap 95 % interval, the exact McNemar p-value, the minimum detectable difference
    (None: none detectable at 80 % power), and the instances won and lost by `other`."""
    a = [base[i].is_correct for i in ids]
    o = [other[i].is_correct for i in ids]
    b, c = discordant(a, o)
    n = len(ids)
    acc_a = sum(a) / n if n else 0.0
    acc_o = sum(o) / n if n else 0.0
    low, high = paired_bootstrap(a, o, seed=seed)
    return {"n": n, "accuracy_baseline": acc_a, "accuracy_run": acc_o, "difference": acc_o - acc_a,
            "ci_95": [low, high], "mcnemar_p": mcnemar_exact(b, c),
            "min_detectable_difference": min_detectable_difference(n, b + c),
            "baseline_only_correct": b, "run_only_correct": c,
            "won": [i for i, x, y in zip(ids, a, o) if y and not x],
            "lost": [i for i, x, y in zip(ids, a, o) if x and not y]}
