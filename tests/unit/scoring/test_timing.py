"""Time to an event and mean times over successes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from itbench.core.scoring.timing import mean_time, time_to

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_time_to_is_seconds_after_ready_and_never_negative() -> None:
    assert time_to(T0, T0 + timedelta(seconds=72.5)) == 72.5
    assert time_to(T0, T0 - timedelta(seconds=3)) == 0.0


def test_mean_time_skips_unsuccessful_trials_and_counts_successes() -> None:
    assert mean_time([10.0, None, 30.0]) == (20.0, 2)


def test_mean_time_without_success_is_none() -> None:
    assert mean_time([None, None]) == (None, 0)
    assert mean_time([]) == (None, 0)
