"""The statistics behind a published number: Wilson intervals, the exact McNemar test, a paired bootstrap.

Accuracy on 100 instances moves by several points on noise alone, and two runs on the same
instances are paired: these functions put an interval on one run and a test on the difference.
"""

from __future__ import annotations

import math
from typing import Sequence

Z_95 = 1.959963984540054  #: the 97.5th percentile of the standard normal distribution
BOOTSTRAP_RESAMPLES = 10_000


def wilson(correct: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval for `correct` successes out of `n` (no continuity correction).

    Unlike the normal approximation it stays inside [0, 1] and is not zero-width at 0 % or 100 %.
    With no instances nothing is known: (0, 1).
    """
    if n <= 0:
        return 0.0, 1.0
    if not 0 <= correct <= n:
        raise ValueError(f"correct={correct} is not within 0..{n}")
    p = correct / n
    z2 = z * z
    denominator = 1 + z2 / n
    center = (p + z2 / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denominator
    return max(0.0, center - half), min(1.0, center + half)


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts b and c.

    Under the null hypothesis each discordant pair is equally likely to fall either way, so
    min(b, c) is Binomial(b + c, 1/2); the p-value doubles its lower tail (capped at 1).
    No discordant pairs: no evidence of a difference, p = 1.
    """
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1))
    return min(1.0, 2 * tail / 2 ** n)


def discordant(baseline: Sequence[bool], other: Sequence[bool]) -> tuple[int, int]:
    """(b, c): instances the baseline got right and the other wrong, and the reverse."""
    if len(baseline) != len(other):
        raise ValueError("paired outcomes must have the same length")
    b = sum(1 for x, y in zip(baseline, other) if x and not y)
    c = sum(1 for x, y in zip(baseline, other) if y and not x)
    return b, c


def paired_bootstrap(baseline: Sequence[bool], other: Sequence[bool], seed: int = 0,
                     resamples: int = BOOTSTRAP_RESAMPLES, confidence: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of accuracy(other) - accuracy(baseline) on paired instances.

    Each resample draws instance indices with replacement (the same indices for both runs, which
    keeps the pairing): with `rng = numpy.random.default_rng(seed)`, one call
    `rng.integers(0, n, size=(resamples, n))` gives all the draws, so a seed fixes the interval.
    """
    import numpy as np  # here, not at the top: every `apibank-bench` command imports this module

    a = np.asarray(baseline, dtype=float)
    o = np.asarray(other, dtype=float)
    if a.shape != o.shape:
        raise ValueError("paired outcomes must have the same length")
    if a.size == 0:
        return 0.0, 0.0
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, a.size, size=(resamples, a.size))
    differences = (o - a)[draws].mean(axis=1)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(differences, [tail, 100 - tail])
    return float(low), float(high)


# -- repeats, power and ratios ---------------------------------------------------------------

def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k of one instance solved n times with c correct: the chance that k of the
    n attempts drawn without replacement hold at least one correct one, 1 - C(n - c, k) / C(n, k)."""
    if not 0 < k <= n or not 0 <= c <= n:
        raise ValueError(f"pass@k needs 0 < k <= n and 0 <= c <= n, got n={n} c={c} k={k}")
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def clustered_interval(correct: Sequence[int], attempts: Sequence[int], z: float = Z_95) -> tuple[float, float]:
    """A normal interval for the accuracy over all attempts when the attempts come in clusters
    (an instance's epochs): the ratio estimator p = sum(correct) / sum(attempts) with the
    cluster-robust variance G / (G - 1) * sum((c_i - p n_i)^2) / (sum n_i)^2 over G clusters.

    With equal cluster sizes this is the mean of the per-instance accuracies plus or minus z
    times their standard error (sample sd / sqrt(G)). Fewer than two clusters: (0, 1).
    """
    clusters = len(correct)
    total = sum(attempts)
    if clusters < 2 or total == 0:
        return 0.0, 1.0
    p = sum(correct) / total
    spread = sum((c - p * n) ** 2 for c, n in zip(correct, attempts))
    half = z * math.sqrt(clusters / (clusters - 1) * spread) / total
    return max(0.0, p - half), min(1.0, p + half)


def min_detectable_difference(n: int, discordant_pairs: int, alpha: float = 0.05, power: float = 0.8) -> float | None:
    """The smallest accuracy difference a paired design of n instances detects with the given power
    (two-sided McNemar at level alpha, normal approximation, Connor 1987), taking the discordance
    rate psi = discordant pairs / n as observed: the delta solving
    delta * sqrt(n) = z(1 - alpha / 2) * sqrt(psi) + z(power) * sqrt(psi - delta^2).
    None without discordant pairs (the observed runs give no noise to scale by)."""
    if n <= 0 or discordant_pairs <= 0:
        return None
    from statistics import NormalDist

    psi = discordant_pairs / n
    z_alpha, z_power = NormalDist().inv_cdf(1 - alpha / 2), NormalDist().inv_cdf(power)
    gap = lambda delta: delta * math.sqrt(n) - z_alpha * math.sqrt(psi) - z_power * math.sqrt(max(psi - delta * delta, 0.0))  # noqa: E731
    low, high = 0.0, math.sqrt(psi)  # gap(low) < 0; a difference can be no larger than the discordance
    if gap(high) < 0:
        return None  # even the largest possible difference would go undetected at this n
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if gap(middle) < 0 else (low, middle)
    return high


def ratio_bootstrap(numerators: Sequence[float], denominators: Sequence[float], seed: int = 0,
                    resamples: int = BOOTSTRAP_RESAMPLES, confidence: float = 0.95) -> tuple[float, float] | None:
    """Percentile bootstrap interval of sum(numerators) / sum(denominators), resampling the pairs
    (one per instance: its tokens and its correct answers). None where a resample can have no
    denominator at all (nothing correct)."""
    import numpy as np

    top = np.asarray(numerators, dtype=float)
    bottom = np.asarray(denominators, dtype=float)
    if top.size == 0 or not bottom.sum():
        return None
    draws = np.random.default_rng(seed).integers(0, top.size, size=(resamples, top.size))
    sums = bottom[draws].sum(axis=1)
    ratios = top[draws].sum(axis=1)[sums > 0] / sums[sums > 0]
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return float(low), float(high)
