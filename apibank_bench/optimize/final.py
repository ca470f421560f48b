"""final.json: seed vs optimized prompts on the same eval instances, with an exact paired test.

The pairing and the test are `compare`'s (runs.pairing): one row per instance, and an instance that
is an infrastructure error in either run is left out of the paired test (and counted), not taken
for a wrong answer, so `final.json` and `apibank-bench compare SEED OPTIMIZED` agree.
"""

from __future__ import annotations

from pathlib import Path

from apibank_bench.runs.pairing import pair_rows, paired_stats
from apibank_bench.runs.results import read_rows, summarize
from apibank_bench.runs.row import ResultRow


def _brief(summary: dict) -> dict:
    return {"accuracy": summary["accuracy"], "correct": summary["correct"], "total": summary["total"],
            "by_level": summary["by_level"], "failures_by_stage": summary["failures_by_stage"]}


def compare(seed_results: list[ResultRow], optimized_results: list[ResultRow]) -> dict:
    """Both runs' accuracy overall and per level, the instances that changed, and the paired test."""
    matched = pair_rows(seed_results, optimized_results)
    if list(matched.base) != list(matched.other):
        raise ValueError("final: the seed and optimized runs did not cover the same instances")
    paired = paired_stats(matched.paired, matched.base, matched.other, seed=0)  # its interval is not reported
    before, after = summarize(seed_results), summarize(optimized_results)
    return {
        "instances": len(matched.base),
        "seed": _brief(before),
        "optimized": _brief(after),
        "delta_pp": round(100 * (after["accuracy"] - before["accuracy"]), 4),
        "improved": paired["won"],
        "regressed": paired["lost"],
        "paired_test": {"test": "exact McNemar (two-sided binomial test on the discordant instances), on the "
                                "instances with an answer in both runs (runs.pairing, as `compare`)",
                        "paired": paired["n"], "errors_excluded": matched.errors_excluded,
                        "improved": len(paired["won"]), "regressed": len(paired["lost"]),
                        "p_value": paired["mcnemar_p"]},
    }


def compare_folders(seed_dir: Path, optimized_dir: Path) -> dict:
    return compare(read_rows(seed_dir), read_rows(optimized_dir))
