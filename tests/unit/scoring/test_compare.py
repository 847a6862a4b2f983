"""Student's t distribution (exact for integer degrees of freedom) and the paired comparison of
two agents over their common scenarios."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from itbench.core.scoring.compare import paired_comparison, student_t_cdf, t_quantile

# Two-sided 95 % critical values, t(0.975, df), as printed in standard tables.
TABLE = {1: 12.706, 2: 4.303, 3: 3.182, 5: 2.571, 10: 2.228, 20: 2.086, 30: 2.042, 120: 1.980}


@pytest.mark.parametrize(("df", "critical"), sorted(TABLE.items()))
def test_t_quantile_matches_the_printed_tables(df: int, critical: float) -> None:
    assert t_quantile(0.975, df) == pytest.approx(critical, abs=5e-4)


def test_t_tends_to_the_normal_distribution() -> None:
    assert t_quantile(0.975, 5000) == pytest.approx(1.95996, abs=1e-3)


@given(st.floats(-50, 50), st.integers(1, 60))
def test_t_cdf_is_symmetric_and_a_probability(t: float, df: int) -> None:
    low, high = student_t_cdf(-t, df), student_t_cdf(t, df)
    assert 0.0 <= high <= 1.0
    assert low + high == pytest.approx(1.0, abs=1e-12)


def test_t_cdf_of_one_degree_is_the_cauchy_distribution() -> None:
    for t in (-3.0, -0.5, 0.0, 1.0, 7.0):
        assert student_t_cdf(t, 1) == pytest.approx(0.5 + math.atan(t) / math.pi)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="df >= 1"):
        student_t_cdf(1.0, 0)
    with pytest.raises(ValueError, match="0 < p < 1"):
        t_quantile(1.0, 3)


def test_no_common_scenario_gives_an_empty_comparison() -> None:
    c = paired_comparison("t", "T", "a", "b", {"x": 1.0}, {"y": 0.0})
    assert (c.scenarios, c.difference, c.ci_low) == (0, None, None)


def test_one_common_scenario_gives_a_difference_without_an_interval() -> None:
    c = paired_comparison("t", "T", "a", "b", {"x": 1.0, "z": 0.5}, {"x": 0.25})
    assert (c.scenarios, c.difference, c.stderr, c.ci_low, c.ci_high) == (1, 0.75, None, None, None)
    assert (c.a_better, c.b_better, c.ties) == (1, 0, 0)


def test_the_interval_is_clipped_to_possible_differences() -> None:
    c = paired_comparison("t", "T", "a", "b", {"x": 1.0, "y": 0.0}, {"x": 0.0, "y": 0.0})
    assert c.difference == 0.5
    assert (c.ci_low, c.ci_high) == (-1.0, 1.0)


def test_identical_agents_differ_by_zero() -> None:
    rates = {"x": 0.5, "y": 1.0, "z": 0.0}
    c = paired_comparison("t", "T", "a", "b", rates, dict(rates))
    assert (c.difference, c.ci_low, c.ci_high, c.ties) == (0.0, 0.0, 0.0, 3)
    assert not c.significant
