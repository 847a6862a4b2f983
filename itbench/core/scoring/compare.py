"""Paired comparison of two agents on the scenarios both ran: the mean per-scenario difference of
pass@1 with a paired t interval, and Student's t distribution it needs (exact, no tables).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Hashable, Mapping
from typing import TypeVar

from itbench.core.models.report import SMALL_SAMPLE_SCENARIOS, PairwiseComparison

K = TypeVar("K", bound=Hashable)

CONFIDENCE = 0.95
"""Confidence level of every interval the reports give."""


def student_t_cdf(t: float, df: int) -> float:
    """P(T <= t) for Student's t distribution with integer degrees of freedom.

    Closed form for integer `df` (Abramowitz and Stegun 26.7.3 and 26.7.4): with
    `theta = atan(t / sqrt(df))`, `A = P(|T| < |t|)` is a finite series in `cos(theta)`,
    and the CDF is `(1 + A) / 2` for `t >= 0`, `(1 - A) / 2` below.

    Args:
        t: The point.
        df: Degrees of freedom (>= 1).

    Raises:
        ValueError: `df` is below 1.
    """
    if df < 1:
        raise ValueError(f"Student's t needs df >= 1, got {df}")
    theta = math.atan(abs(t) / math.sqrt(df))
    sin, cos2 = math.sin(theta), math.cos(theta) ** 2
    if df % 2 == 1:
        series, term = 0.0, math.cos(theta)
        for j in range(1, (df - 1) // 2 + 1):
            series += term
            term *= cos2 * (2 * j) / (2 * j + 1)
        a = 2 / math.pi * (theta + sin * series) if df > 1 else 2 / math.pi * theta
    else:
        series, term = 0.0, 1.0
        for j in range(1, df // 2 + 1):
            series += term
            term *= cos2 * (2 * j - 1) / (2 * j)
        a = sin * series
    a = min(max(a, 0.0), 1.0)
    return (1 + a) / 2 if t >= 0 else (1 - a) / 2


@functools.cache
def t_quantile(p: float, df: int) -> float:
    """The p-quantile of Student's t with `df` degrees of freedom (bisection on the exact CDF).

    Args:
        p: Probability in (0, 1).
        df: Degrees of freedom (>= 1).

    Raises:
        ValueError: `p` is outside (0, 1) or `df` below 1.
    """
    if not 0 < p < 1:
        raise ValueError(f"a quantile needs 0 < p < 1, got {p}")
    if p < 0.5:
        return -t_quantile(1 - p, df)
    low, high = 0.0, 1.0
    while student_t_cdf(high, df) < p:
        high *= 2
    for _ in range(100):
        mid = (low + high) / 2
        if student_t_cdf(mid, df) < p:
            low = mid
        else:
            high = mid
        if high - low < 1e-12:
            break
    return (low + high) / 2


def paired_comparison(
    task: str,
    label: str,
    a: str,
    b: str,
    rates_a: Mapping[K, float],
    rates_b: Mapping[K, float],
) -> PairwiseComparison:
    """pass@1 of A minus that of B, paired over the scenarios both have.

    Formula: with `d_s = p_A(s) - p_B(s)` over the m common scenarios, the difference is
    `mean(d)`, its standard error `stdev(d) / sqrt(m)`, and the 95 % interval
    `mean(d) ± t(0.975, m - 1) * stderr`, clipped to [-1, 1] (none with fewer than two
    scenarios).

    Args:
        task: The task key.
        label: What its pass@1 measures.
        a: Name of side A.
        b: Name of side B.
        rates_a: A's pass@1 per scenario (counted trials only).
        rates_b: B's pass@1 per scenario.
    """
    common = [key for key in rates_a if key in rates_b]
    m = len(common)
    if m == 0:
        return PairwiseComparison(task=task, label=label, a=a, b=b, scenarios=0)
    diffs = [rates_a[key] - rates_b[key] for key in common]
    mean = math.fsum(diffs) / m
    stderr = ci_low = ci_high = None
    if m > 1:
        var = math.fsum((d - mean) ** 2 for d in diffs) / (m - 1)
        stderr = math.sqrt(var) / math.sqrt(m)
        half = t_quantile((1 + CONFIDENCE) / 2, m - 1) * stderr
        # A difference of two rates lies in [-1, 1]; the interval is clipped to it.
        ci_low, ci_high = max(mean - half, -1.0), min(mean + half, 1.0)
    return PairwiseComparison(
        task=task,
        label=label,
        a=a,
        b=b,
        scenarios=m,
        mean_a=math.fsum(rates_a[key] for key in common) / m,
        mean_b=math.fsum(rates_b[key] for key in common) / m,
        difference=mean,
        stderr=stderr,
        ci_low=ci_low,
        ci_high=ci_high,
        confidence=CONFIDENCE,
        small_sample=ci_low is not None and m < SMALL_SAMPLE_SCENARIOS,
        a_better=sum(1 for d in diffs if d > 0),
        b_better=sum(1 for d in diffs if d < 0),
        ties=sum(1 for d in diffs if d == 0),
    )
