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
    return _wilson(correct / n, n, z)


def _wilson(p: float, n: float, z: float) -> tuple[float, float]:
    """The Wilson interval of a proportion p observed on n (possibly effective, fractional) trials."""
    z2 = z * z
    denominator = 1 + z2 / n
    center = (p + z2 / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denominator
    return max(0.0, center - half), min(1.0, center + half)


def effective_instances(correct: Sequence[int], attempts: Sequence[int]) -> float:
    """How many independent attempts the clustered attempts are worth: n_eff = p(1 - p) / var, with var
    the cluster-robust variance of `clustered_interval` (Kish's effective sample size).

    It is kept within [clusters, attempts]: an instance's epochs can at most agree completely (worth one
    attempt each instance) and are taken to be worth at most independent draws. When the variance
    says nothing (every attempt right, or every one wrong, or fewer than two clusters) the
    conservative end, the number of clusters, is taken.
    """
    clusters, total = len(correct), sum(attempts)
    if clusters < 2 or total == 0:
        return float(clusters)
    p = sum(correct) / total
    spread = clusters / (clusters - 1) * sum((c - p * n) ** 2 for c, n in zip(correct, attempts)) / total ** 2
    if p in (0.0, 1.0):
        return float(clusters)
    if spread == 0:
        return float(total)
    return min(float(total), max(float(clusters), p * (1 - p) / spread))


def clustered_wilson(correct: Sequence[int], attempts: Sequence[int], z: float = Z_95) -> tuple[float, float]:
    """The Wilson interval of the accuracy over clustered attempts (each instance's epochs), taken on
    the effective number of instances (`effective_instances`) instead of the number of attempts
    (Korn and Graubard's design-effect adjustment). One attempt per instance: exactly `wilson`.

    An instance's epochs are not independent draws: a Wilson interval over all (instance, epoch)
    attempts is too narrow (it covered 0.70-0.90 of the time in simulation, see
    benchmarks/epochs_interval_coverage.py); this one stays inside [0, 1] and is not zero-width at
    0 % or 100 %, where the normal `clustered_interval` is.
    """
    total = sum(attempts)
    if not correct or total == 0:
        return 0.0, 1.0
    return _wilson(sum(correct) / total, effective_instances(correct, attempts), z)


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


def mcnemar_power(n: int, psi: float, delta: float, alpha: float = 0.05) -> float:
    """The exact power of the two-sided exact McNemar test (`mcnemar_exact`) at level alpha on n paired
    instances, when a pair is discordant with probability psi and the accuracy difference is delta:
    each pair is lost with probability (psi + delta) / 2 and won with (psi - delta) / 2.

    The number of discordant pairs D is Binomial(n, psi); given D, the test rejects when the smaller
    count is at most the critical k_D. Terms with P(D) below 1e-15 of the largest are skipped.
    """
    if not 0 <= delta <= psi <= 1:
        raise ValueError(f"power needs 0 <= delta <= psi <= 1, got delta={delta} psi={psi}")
    if psi == 0:
        return 0.0
    lost = (psi + delta) / (2 * psi)  # given a discordant pair, the chance it falls the losing way
    power = 0.0
    for d in range(1, n + 1):
        weight = _binomial_pmf(d, n, psi)
        if weight < 1e-18:
            continue
        k = _critical(d, alpha)
        if k < 0:
            continue
        power += weight * (_binomial_cdf(k, d, lost) + _binomial_cdf(k, d, 1 - lost))  # k < d / 2: disjoint tails
    return min(1.0, power)


def _binomial_pmf(k: int, n: int, p: float) -> float:
    if p <= 0 or p >= 1:
        return float(k == (n if p >= 1 else 0))
    return math.exp(math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
                    + k * math.log(p) + (n - k) * math.log1p(-p))


def _binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), summing the terms by their ratio from P(X = 0)."""
    if p <= 0 or p >= 1:
        return 1.0 if p <= 0 else float(k >= n)
    term = math.exp(n * math.log1p(-p))
    total, odds = term, p / (1 - p)
    for i in range(k):
        term *= (n - i) / (i + 1) * odds
        total += term
    return min(1.0, total)


_CRITICAL: dict[tuple[int, float], int] = {}


def _critical(discordant_pairs: int, alpha: float) -> int:
    """The largest k with mcnemar_exact(k, d - k) < alpha (-1: no split of d pairs is significant)."""
    key = (discordant_pairs, alpha)
    if key not in _CRITICAL:
        k = -1
        while k + 1 <= discordant_pairs // 2 and mcnemar_exact(k + 1, discordant_pairs - k - 1) < alpha:
            k += 1
        _CRITICAL[key] = k
    return _CRITICAL[key]


def min_detectable_difference(n: int, discordant_pairs: int, alpha: float = 0.05, power: float = 0.8) -> float | None:
    """The smallest accuracy difference the exact McNemar test at level alpha detects with the given
    power (`mcnemar_power`) on n paired instances, taking the discordance rate psi = discordant
    pairs / n as observed.

    A difference can never exceed the discordance, so the search ends at psi. None when even a
    difference of psi (every discordant pair the same way) is detected with less than that power:
    then no difference is detectable (always so without discordant pairs).
    """
    if n <= 0 or discordant_pairs <= 0:
        return None
    psi = discordant_pairs / n
    if mcnemar_power(n, psi, psi, alpha) < power:
        return None
    low, high = 0.0, psi  # power(low) < power <= power(high); the power grows with the difference
    for _ in range(30):  # to psi / 2^30: far below the 0.1 % shown
        middle = (low + high) / 2
        low, high = (middle, high) if mcnemar_power(n, psi, middle, alpha) < power else (low, middle)
    return high


def ratio_bootstrap(numerators: Sequence[float], denominators: Sequence[float], seed: int = 0,
                    resamples: int = BOOTSTRAP_RESAMPLES,
                    confidence: float = 0.95) -> tuple[float, float | None] | None:
    """Percentile bootstrap interval of sum(numerators) / sum(denominators), resampling the pairs
    (one per instance: its tokens and its correct answers).

    A resample with no denominator (nothing correct) has an infinite ratio: it is kept, not dropped,
    so when more than the upper tail of the resamples have nothing correct the upper bound is
    unbounded, None. None for the whole interval when nothing at all is correct (no ratio)."""
    import numpy as np

    top = np.asarray(numerators, dtype=float)
    bottom = np.asarray(denominators, dtype=float)
    if top.size == 0 or not bottom.sum():
        return None
    draws = np.random.default_rng(seed).integers(0, top.size, size=(resamples, top.size))
    sums = bottom[draws].sum(axis=1)
    ratios = np.full(resamples, np.inf)
    np.divide(top[draws].sum(axis=1), sums, out=ratios, where=sums > 0)
    ratios.sort()
    tail = (1 - confidence) / 2 * 100
    # inf - inf is nan in numpy's interpolation: read each percentile only where it is finite.
    low, high = (np.percentile(ratios, q) if np.isfinite(ratios[math.ceil(q / 100 * (resamples - 1))]) else np.inf
                 for q in (tail, 100 - tail))
    return float(low), float(high) if np.isfinite(high) else None
