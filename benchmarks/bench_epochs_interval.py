"""Coverage of the headline interval of a run of several epochs, by simulation.

A run of G instances x K epochs: each instance's chance of being right is drawn from
Beta(mean * c, (1 - mean) * c) (small c: an instance is mostly always right or always wrong, so its
epochs agree), and its K epochs are draws at that chance. The share of simulated runs whose 95 %
interval holds the true accuracy `mean`, for the headline's interval (Wilson on the effective number
of instances, runs.stats.clustered_wilson), the normal clustered interval of the epochs table
(runs.stats.clustered_interval), and a Wilson interval that counts every (instance, epoch) row as
independent (what the headline showed before: it covered 0.70-0.90 of the time).

    python benchmarks/bench_epochs_interval.py [--runs 4000]
"""

from __future__ import annotations

import argparse

import numpy as np

from apibank_bench.runs.stats import clustered_interval, clustered_wilson, wilson

CASES = [(20, 4, 0.5, 1.0), (20, 4, 0.5, 0.3), (20, 4, 0.7, 1.0), (20, 4, 0.9, 1.0), (20, 4, 0.5, 100.0),
         (50, 3, 0.6, 1.0), (100, 5, 0.4, 0.5), (10, 8, 0.5, 1.0)]
INTERVALS = {"headline (Wilson, effective n)": clustered_wilson, "clustered normal": clustered_interval,
             "Wilson over rows": lambda correct, attempts: wilson(sum(correct), sum(attempts))}


def coverage(interval, instances: int, epochs: int, mean: float, concentration: float, runs: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    chances = rng.beta(mean * concentration, (1 - mean) * concentration, size=(runs, instances))
    hits = 0
    for counts in rng.binomial(epochs, chances):
        low, high = interval(counts.tolist(), [epochs] * instances)
        hits += low <= mean <= high
    return hits / runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4000, help="simulated runs per case")
    args = parser.parse_args()
    print(f"{'instances':>9} {'epochs':>6} {'mean':>5} {'c':>6}  " + "  ".join(f"{name:>30}" for name in INTERVALS))
    for instances, epochs, mean, concentration in CASES:
        shares = [coverage(interval, instances, epochs, mean, concentration, args.runs, seed=1)
                  for interval in INTERVALS.values()]
        print(f"{instances:>9} {epochs:>6} {mean:>5} {concentration:>6}  " + "  ".join(f"{s:>30.3f}" for s in shares))


if __name__ == "__main__":
    main()
