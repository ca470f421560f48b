"""The statistics against scipy on generated inputs (hypothesis): Wilson's interval, the exact McNemar
test, pass@k, and the minimum detectable difference never above the discordance, with exact power."""

from __future__ import annotations

from math import prod

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sp

from apibank_bench.runs.stats import mcnemar_exact, mcnemar_power, min_detectable_difference, pass_at_k, wilson

EXAMPLES = settings(max_examples=300, deadline=None)


@st.composite
def successes(draw, most: int = 2000):
    n = draw(st.integers(1, most))
    return draw(st.integers(0, n)), n


@EXAMPLES
@given(successes())
def test_wilson_equals_scipys_wilson_interval(counts):
    k, n = counts
    expected = sp.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert wilson(k, n) == pytest.approx((expected.low, expected.high), abs=1e-12)


@EXAMPLES
@given(st.integers(0, 400), st.integers(0, 400))
def test_mcnemar_equals_scipys_exact_binomial_test(b, c):
    expected = 1.0 if b + c == 0 else sp.binomtest(b, b + c, 0.5).pvalue
    assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-9, abs=1e-300)


@EXAMPLES
@given(st.integers(1, 60).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))))
def test_pass_at_k_is_one_minus_the_chance_that_k_draws_miss_every_correct_sample(args):
    n, c, k = args
    # Codex's product form (Chen et al. 2021), computed independently of the binomial coefficients
    miss_all = prod(1 - k / i for i in range(n - c + 1, n + 1))
    assert pass_at_k(n, c, k) == pytest.approx(1 - miss_all, abs=1e-9)


def _power_with_scipy(n: int, psi: float, delta: float, alpha: float = 0.05) -> float:
    """Exact power of the two-sided exact McNemar test: D discordant pairs ~ Binomial(n, psi), the lost ones
    among them ~ Binomial(D, (psi + delta) / (2 psi)), rejected where scipy's binomtest p <= alpha."""
    power = 0.0
    for d in range(1, n + 1):
        p_d = sp.binom.pmf(d, n, psi)
        if p_d < 1e-15:
            continue
        rejected = [b for b in range(d + 1) if sp.binomtest(b, d, 0.5).pvalue <= alpha]
        power += p_d * sum(sp.binom.pmf(b, d, (psi + delta) / (2 * psi)) for b in rejected)
    return power


@settings(max_examples=20, deadline=None)
@given(st.integers(10, 80).flatmap(lambda n: st.tuples(st.just(n), st.integers(1, n))))
def test_the_minimum_detectable_difference_is_within_the_discordance_and_has_80_percent_power(design):
    n, discordant_pairs = design
    psi = discordant_pairs / n
    delta = min_detectable_difference(n, discordant_pairs)
    if delta is None:  # said plainly: not even every discordant pair one way is detected 80 % of the time
        assert _power_with_scipy(n, psi, psi) < 0.8
        return
    assert 0 < delta <= psi + 1e-12
    assert mcnemar_power(n, psi, delta) == pytest.approx(_power_with_scipy(n, psi, delta), abs=1e-9)
    assert _power_with_scipy(n, psi, delta) >= 0.8 - 1e-6
