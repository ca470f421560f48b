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
