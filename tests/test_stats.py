"""The statistics against scipy and published values on fixed inputs."""

import numpy as np
import pytest
from scipy import stats as sp

from apibank_bench.runs.stats import Z_95, discordant, mcnemar_exact, paired_bootstrap, wilson

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


# -- the minimum detectable difference against an exact power computation with scipy ------------

def _scipy_power(n: int, psi: float, delta: float, alpha: float = 0.05) -> float:
    """The exact McNemar test's power, independently: D ~ Binomial(n, psi) discordant pairs, and given D
    the lost pairs ~ Binomial(D, (psi + delta) / (2 psi)); the test rejects where scipy's exact binomial
    test gives p < alpha."""
    power = 0.0
    for d in range(1, n + 1):
        weight = sp.binom.pmf(d, n, psi)
        if weight < 1e-15:
            continue
        lost = np.arange(d + 1)
        # scipy's binomtest(b, d, 0.5).pvalue for every b at once: twice the smaller tail, at most 1
        p_values = np.minimum(1.0, 2 * np.minimum(sp.binom.cdf(lost, d, 0.5), sp.binom.sf(lost - 1, d, 0.5)))
        power += weight * sp.binom.pmf(lost[p_values < alpha], d, (psi + delta) / (2 * psi)).sum()
    return power


def test_mcnemar_power_matches_scipy():
    from apibank_bench.runs.stats import mcnemar_power

    for n, psi, delta in [(100, 0.03, 0.03), (100, 0.2, 0.1), (60, 0.25, 0.0), (40, 0.5, 0.3), (150, 0.1, 0.07)]:
        assert mcnemar_power(n, psi, delta) == pytest.approx(_scipy_power(n, psi, delta), abs=1e-9), (n, psi, delta)


@pytest.mark.parametrize(("n", "discordant_pairs"), [(100, 3), (100, 8), (100, 9), (100, 12), (100, 20), (60, 30),
                                                     (20, 10), (200, 15), (40, 40)])
def test_min_detectable_difference_is_the_smallest_difference_with_80_percent_exact_power(n, discordant_pairs):
    from apibank_bench.runs.stats import min_detectable_difference

    psi = discordant_pairs / n
    delta = min_detectable_difference(n, discordant_pairs)
    if delta is None:  # none detectable: even every discordant pair one way has less than 80 % power
        assert _scipy_power(n, psi, psi) < 0.8
        return
    assert 0 < delta <= psi  # a difference can never exceed the discordance
    assert _scipy_power(n, psi, delta) >= 0.8 - 1e-6
    assert _scipy_power(n, psi, delta * 0.99) < 0.8  # and it is the smallest such difference


def test_few_discordant_pairs_detect_no_difference():
    from apibank_bench.runs.stats import mcnemar_power, min_detectable_difference

    # The case: 3 discordant pairs of 100. The largest possible difference is 3 points, and
    # the exact test finds it 8 % of the time: no difference is detectable at 80 % power.
    assert min_detectable_difference(100, 3) is None
    assert mcnemar_power(100, 0.03, 0.03) == pytest.approx(0.0808, abs=1e-4)
    assert min_detectable_difference(100, 0) is None and min_detectable_difference(0, 0) is None


# -- the tokens-per-correct interval at its edge -------------------------------------------------

def test_ratio_bootstrap_keeps_resamples_with_nothing_correct_as_unbounded():
    from apibank_bench.runs.stats import ratio_bootstrap

    tokens, correct = [500 + 10 * i for i in range(100)], [0] * 100
    correct[7] = 1  # one correct answer in 100: a third of the resamples hold none
    low, high = ratio_bootstrap(tokens, correct)
    assert high is None  # an honest upper bound: unbounded
    draws = np.random.default_rng(0).integers(0, 100, size=(10_000, 100))
    sums = np.asarray(correct)[draws].sum(axis=1)
    ratios = np.where(sums > 0, np.asarray(tokens)[draws].sum(axis=1) / np.maximum(sums, 1), np.inf)
    assert low == pytest.approx(float(np.quantile(ratios, 0.025)), rel=1e-12)  # the empty resamples stay in
    assert (sums == 0).mean() > 0.025


def test_ratio_bootstrap_with_a_few_empty_resamples_is_bounded_and_counts_them():
    from apibank_bench.runs.stats import ratio_bootstrap

    tokens, correct = [100] * 30, [1] * 6 + [0] * 24
    low, high = ratio_bootstrap(tokens, correct)
    draws = np.random.default_rng(0).integers(0, 30, size=(10_000, 30))
    sums = np.asarray(correct)[draws].sum(axis=1)
    ratios = np.where(sums > 0, 100 * 30 / np.maximum(sums, 1), np.inf)  # every instance costs 100 tokens
    assert 0 < (sums == 0).mean() < 0.025  # a few resamples hold nothing correct: kept, as infinite ratios
    assert (low, high) == pytest.approx(tuple(np.quantile(ratios, [0.025, 0.975])), rel=1e-12)


# -- the headline interval of a run of several epochs --------------------------------------------

def test_clustered_wilson_with_one_attempt_per_instance_is_wilson():
    from apibank_bench.runs.stats import clustered_wilson

    rng = np.random.default_rng(3)
    for n in (1, 2, 5, 20, 100):
        outcomes = (rng.random(n) < rng.random()).astype(int).tolist()
        assert clustered_wilson(outcomes, [1] * n) == pytest.approx(wilson(sum(outcomes), n), abs=1e-12)


def test_clustered_wilson_takes_the_effective_number_of_instances():
    from apibank_bench.runs.stats import clustered_interval, clustered_wilson, effective_instances

    # Each instance the same in all 4 epochs: worth one attempt each, 20 not 80.
    assert effective_instances([4] * 10 + [0] * 10, [4] * 20) == 20
    assert clustered_wilson([4] * 10 + [0] * 10, [4] * 20) == pytest.approx(wilson(10, 20))
    # Every attempt right: nothing to estimate a variance from; as wide as 20 instances, not zero-width.
    assert clustered_wilson([4] * 20, [4] * 20) == pytest.approx(wilson(20, 20))
    assert clustered_interval([4] * 20, [4] * 20) == (1.0, 1.0)
    # Epochs as good as independent: worth every attempt (at most).
    assert effective_instances([2] * 20, [4] * 20) == 80
    # In between: Kish's n_eff = p(1 - p) / (the cluster-robust variance).
    correct, attempts = [0, 1, 2, 3, 4, 2, 2, 1, 3, 4], [4] * 10
    p = 22 / 40
    variance = 10 / 9 * sum((c - 4 * p) ** 2 for c in correct) / 40 ** 2
    assert effective_instances(correct, attempts) == pytest.approx(p * (1 - p) / variance)


def _coverage(interval, instances: int, epochs: int, mean: float, concentration: float, runs: int = 1500) -> float:
    """How often `interval(correct, attempts)` holds the true accuracy `mean` when each instance's chance
    of being right is Beta(mean * concentration, (1 - mean) * concentration) and its epochs are draws."""
    rng = np.random.default_rng(11)
    chances = rng.beta(mean * concentration, (1 - mean) * concentration, size=(runs, instances))
    correct = rng.binomial(epochs, chances)
    hits = 0
    for counts in correct:
        low, high = interval(counts.tolist(), [epochs] * instances)
        hits += low <= mean <= high
    return hits / runs


@pytest.mark.parametrize(("mean", "concentration"), [(0.5, 1.0), (0.5, 0.3), (0.7, 1.0)])
def test_the_epochs_interval_covers_95_percent_where_wilson_over_rows_does_not(mean, concentration):
    """20 instances x 4 epochs (the issue's case): a Wilson interval over the 80 rows covers the true
    accuracy far less than 95 % of the time; the headline's interval covers about 95 %."""
    from apibank_bench.runs.stats import clustered_wilson

    over_rows = _coverage(lambda c, a: wilson(sum(c), sum(a)), 20, 4, mean, concentration)
    headline = _coverage(clustered_wilson, 20, 4, mean, concentration)
    assert over_rows < 0.9, over_rows
    assert 0.93 <= headline <= 0.975, headline


def test_the_vectorised_p_values_of_the_power_reference_are_scipys_binomtest():
    for d in (1, 5, 12, 31):
        lost = np.arange(d + 1)
        p_values = np.minimum(1.0, 2 * np.minimum(sp.binom.cdf(lost, d, 0.5), sp.binom.sf(lost - 1, d, 0.5)))
        assert p_values == pytest.approx([sp.binomtest(int(b), d, 0.5).pvalue for b in lost], rel=1e-9)


# -- what the mutation run found untested (benchmarks/mutation_score.py) --------------------------

def test_pass_at_k_against_enumeration_and_its_domain():
    from itertools import combinations

    from apibank_bench.runs.stats import pass_at_k

    for n in range(1, 6):
        for c in range(n + 1):
            for k in range(1, n + 1):
                subsets = list(combinations(range(n), k))
                assert pass_at_k(n, c, k) == pytest.approx(sum(any(i < c for i in s) for s in subsets) / len(subsets))
    for bad in [(3, 1, 0), (3, 1, 4), (3, 4, 1), (3, -1, 1)]:  # each breaks one bound only
        with pytest.raises(ValueError):
            pass_at_k(*bad)


def test_clustered_interval_formula_and_its_edges():
    from apibank_bench.runs.stats import clustered_interval

    correct, attempts = [0, 3, 1, 2], [2, 3, 1, 4]
    p = 6 / 10
    half = Z_95 * (4 / 3 * sum((c - p * n) ** 2 for c, n in zip(correct, attempts))) ** 0.5 / 10
    assert p + half > 1 and clustered_interval(correct, attempts) == pytest.approx((p - half, 1.0), abs=1e-15)
    assert clustered_interval([1, 2], [2, 2]) == pytest.approx((0.75 - Z_95 * 0.25, 1.0))  # clipped at 1
    assert clustered_interval([0, 1], [2, 2]) == pytest.approx((0.0, 0.25 + Z_95 * 0.25))  # clipped at 0
    assert clustered_interval([1], [2]) == (0.0, 1.0) and clustered_interval([0, 0], [0, 0]) == (0.0, 1.0)


def test_effective_instances_with_two_clusters_and_no_attempts():
    from apibank_bench.runs.stats import clustered_wilson, effective_instances

    # p = 3/4, cluster-robust variance 2 * (1/4 + 1/4) / 16 = 1/16: n_eff = (3/16) / (1/16) = 3.
    assert effective_instances([1, 2], [2, 2]) == pytest.approx(3.0)
    assert effective_instances([1], [2]) == 1.0
    assert clustered_wilson([0], [0]) == (0.0, 1.0) and clustered_wilson([], []) == (0.0, 1.0)


def test_the_bootstrap_default_seed_is_0():
    baseline, other = _outcomes()
    assert paired_bootstrap(baseline, other) == paired_bootstrap(baseline, other, seed=0)


def test_mcnemar_power_refuses_a_difference_beyond_the_discordance():
    from apibank_bench.runs.stats import mcnemar_power

    for psi, delta in [(0.2, 0.3), (1.5, 0.5), (0.2, -0.1)]:
        with pytest.raises(ValueError):
            mcnemar_power(50, psi, delta)
    assert mcnemar_power(50, 1.0, 1.0) == 1.0  # every pair discordant and lost: the test always finds it
