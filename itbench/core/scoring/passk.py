"""pass@k, the unbiased estimator of Chen et al. (2021), in exact integer arithmetic."""

from __future__ import annotations

from fractions import Fraction
from math import comb


def pass_at_k(n: int, c: int, k: int) -> Fraction:
    """Probability that at least one of k trials drawn from n passes, given c of n passed.

    Formula: `1 - C(n - c, k) / C(n, k)`, exact.

    Args:
        n: Trials of the scenario (n >= 1).
        c: Trials that passed (0 <= c <= n).
        k: Trials drawn (1 <= k <= n).

    Raises:
        ValueError: The arguments are out of range.
    """
    if n < 1 or not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 1 <= k <= n and 0 <= c <= n; got n={n}, c={c}, k={k}")
    return 1 - Fraction(comb(n - c, k), comb(n, k))


def pass_at_k_float(n: int, c: int, k: int) -> float:
    """`pass_at_k` as a float (a probability in [0, 1])."""
    return float(pass_at_k(n, c, k))
