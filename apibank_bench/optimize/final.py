"""final.json: seed vs optimized prompts on the same eval instances, with an exact paired test."""

from __future__ import annotations

from apibank_bench.runs.results import read_rows, summarize
from apibank_bench.runs.row import ResultRow
from apibank_bench.runs.stats import mcnemar_exact


def _brief(summary: dict) -> dict:
    return {"accuracy": summary["accuracy"], "correct": summary["correct"], "total": summary["total"],
            "by_level": summary["by_level"], "failures_by_stage": summary["failures_by_stage"]}


def compare(seed_results: list[ResultRow], optimized_results: list[ResultRow]) -> dict:
    """Both runs' accuracy overall and per level, the instances that changed, and the paired test."""
    seed = {row.id: row.is_correct for row in seed_results}
    optimized = {row.id: row.is_correct for row in optimized_results}
    if list(seed) != list(optimized):
        raise ValueError("final: the seed and optimized runs did not cover the same instances")
    improved = [task_id for task_id in seed if optimized[task_id] and not seed[task_id]]
    regressed = [task_id for task_id in seed if seed[task_id] and not optimized[task_id]]
    before, after = summarize(seed_results), summarize(optimized_results)
    return {
        "instances": len(seed),
        "seed": _brief(before),
        "optimized": _brief(after),
        "delta_pp": round(100 * (after["accuracy"] - before["accuracy"]), 4),
        "improved": improved,
        "regressed": regressed,
        "paired_test": {"test": "exact McNemar (two-sided binomial test on the discordant instances)",
                        "improved": len(improved), "regressed": len(regressed),
                        "p_value": mcnemar_exact(len(improved), len(regressed))},
    }


def compare_folders(seed_dir, optimized_dir) -> dict:
    return compare(read_rows(seed_dir), read_rows(optimized_dir))
