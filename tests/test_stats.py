"""The statistics against scipy and published values on fixed inputs."""

import numpy as np
import pytest
from scipy import stats as sp

from apibank_bench.runs.stats import discordant, mcnemar_exact, paired_bootstrap, wilson

# Newcombe (1998), Statistics in Medicine 17:857-872, Table I, method 3 (Wilson score, no correction).
NEWCOMBE = [((81, 263), (0.2553, 0.3662)), ((15, 148), (0.0624, 0.1605)),
            ((0, 20), (0.0, 0.1611)), ((1, 29), (0.0061, 0.1718))]


@pytest.mark.parametrize(("counts", "published"), NEWCOMBE)
def test_wilson_matches_published_values(counts, published):
    assert [round(x, 4) for x in wilson(*counts)] == list(published)


@pytest.mark.parametrize(("k", "n"), [(0, 1), (1, 1), (3, 7), (33, 33), (17, 34), (50, 100), (99, 100), (0, 445)])
def test_wilson_matches_scipy(k, n):
    expected = sp.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert wilson(k, n) == pytest.approx((expected.low, expected.high), abs=1e-12)


def test_wilson_of_a_perfect_eval_run():
    assert [round(x, 3) for x in wilson(100, 100)] == [0.963, 1.0]


def test_wilson_edge_cases():
    assert wilson(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        wilson(5, 4)


@pytest.mark.parametrize(("b", "c"), [(0, 0), (0, 1), (0, 6), (6, 0), (3, 9), (10, 10), (11, 10), (1, 25), (40, 57)])
def test_mcnemar_matches_scipy_binomial_test(b, c):
    expected = 1.0 if b + c == 0 else sp.binomtest(b, b + c, 0.5, alternative="two-sided").pvalue
    assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-12)


def test_mcnemar_by_hand():
    assert mcnemar_exact(0, 6) == 2 / 64  # both tails of Binomial(6, 1/2) at 0 and 6
    assert mcnemar_exact(5, 5) == 1.0


def test_discordant_counts():
    assert discordant([1, 1, 0, 0, 1], [1, 0, 1, 1, 0]) == (2, 2)
    assert discordant([True, False], [True, True]) == (0, 1)
    with pytest.raises(ValueError):
        discordant([1], [1, 0])


def _outcomes(seed=7, n=100):
    rng = np.random.default_rng(seed)
    baseline = rng.random(n) < 0.55
    other = np.where(rng.random(n) < 0.8, baseline, ~baseline)
    return baseline.tolist(), other.tolist()


def test_bootstrap_is_seeded_and_reproducible():
    baseline, other = _outcomes()
    assert paired_bootstrap(baseline, other, seed=3) == paired_bootstrap(baseline, other, seed=3)
    assert paired_bootstrap(baseline, other, seed=3) != paired_bootstrap(baseline, other, seed=4)


def test_bootstrap_equals_a_direct_numpy_computation():
    baseline, other = _outcomes()
    a, o = np.array(baseline, float), np.array(other, float)
    rng = np.random.default_rng(11)
    draws = rng.integers(0, len(a), size=(10_000, len(a)))
    differences = o[draws].mean(axis=1) - a[draws].mean(axis=1)
    expected = np.percentile(differences, [2.5, 97.5])
    assert paired_bootstrap(baseline, other, seed=11) == pytest.approx(tuple(expected), abs=1e-12)


def test_bootstrap_agrees_with_scipy_paired_percentile_bootstrap():
    # Different random draws, same estimator: the intervals agree to Monte Carlo error.
    baseline, other = _outcomes(n=200)
    a, o = np.array(baseline, float), np.array(other, float)
    result = sp.bootstrap((o, a), lambda x, y, axis=-1: x.mean(axis=axis) - y.mean(axis=axis), paired=True,
                          vectorized=True, n_resamples=20_000, method="percentile", random_state=0)
    ours = paired_bootstrap(baseline, other, seed=0, resamples=20_000)
    interval = result.confidence_interval
    assert ours == pytest.approx((interval.low, interval.high), abs=0.01)
    assert ours[0] < o.mean() - a.mean() < ours[1]


def test_bootstrap_of_identical_runs_is_a_point():
    baseline = [True, False, True, True]
    assert paired_bootstrap(baseline, baseline) == (0.0, 0.0)
    assert paired_bootstrap([], []) == (0.0, 0.0)


def test_min_detectable_difference_has_about_80_percent_exact_power():
    import math as _math

    from apibank_bench.runs.stats import mcnemar_exact, min_detectable_difference

    n, discordant_pairs = 100, 20
    delta = min_detectable_difference(n, discordant_pairs)
    psi = discordant_pairs / n
    # The exact McNemar test's power at that difference, by summing over every (b, c) outcome.
    p_lost, p_won = (psi + delta) / 2, (psi - delta) / 2
    power = 0.0
    for b in range(n + 1):
        for c in range(n + 1 - b):
            if mcnemar_exact(b, c) < 0.05:
                ways = _math.comb(n, b) * _math.comb(n - b, c)
                power += ways * p_lost ** b * p_won ** c * (1 - psi) ** (n - b - c)
    assert 0.7 < power < 0.9, (delta, power)
    assert min_detectable_difference(400, 80) < delta  # four times the instances: about half the difference
    assert min_detectable_difference(100, 0) is None


def test_ratio_bootstrap_brackets_the_ratio():
    from apibank_bench.runs.stats import ratio_bootstrap

    tokens, correct = [100, 120, 90, 300, 110] * 4, [1, 1, 0, 1, 1] * 4
    low, high = ratio_bootstrap(tokens, correct)
    assert low < sum(tokens) / sum(correct) < high
    assert ratio_bootstrap([5, 5], [1, 1]) == (5.0, 5.0)
    assert ratio_bootstrap([5, 5], [0, 0]) is None
