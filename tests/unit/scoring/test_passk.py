"""pass@k against brute-force enumeration of every k-subset."""

from __future__ import annotations

from fractions import Fraction
from itertools import combinations

import pytest

from itbench.core.scoring.passk import pass_at_k, pass_at_k_float


def brute_force(n: int, c: int, k: int) -> Fraction:
    trials = [True] * c + [False] * (n - c)
    subsets = list(combinations(range(n), k))
    hits = sum(1 for s in subsets if any(trials[i] for i in s))
    return Fraction(hits, len(subsets))


def test_pass_at_k_equals_brute_force_for_every_n_up_to_ten() -> None:
    checked = 0
    for n in range(1, 11):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert pass_at_k(n, c, k) == brute_force(n, c, k), (n, c, k)
                checked += 1
    assert checked == sum((n + 1) * n for n in range(1, 11))


def test_pass_at_1_is_the_pass_share() -> None:
    assert pass_at_k(10, 3, 1) == Fraction(3, 10)
    assert pass_at_k_float(4, 1, 2) == 0.5


@pytest.mark.parametrize(("n", "c", "k"), [(0, 0, 1), (3, 4, 1), (3, 1, 0), (3, 1, 4), (3, -1, 1)])
def test_out_of_range_arguments_are_rejected(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError, match="pass@k needs"):
        pass_at_k(n, c, k)
