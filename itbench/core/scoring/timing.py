"""Timing: seconds from Ready to an event, and the mean times MTTD and MTTR over successes."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime


def time_to(ready_at: datetime, event_at: datetime) -> float:
    """Seconds from the moment the scenario became ready to an event (never negative).

    Args:
        ready_at: When the agent was let in (the triggering alerts were firing).
        event_at: When the event happened (a correct diagnosis, alerts cleared for good).
    """
    return max(0.0, (event_at - ready_at).total_seconds())


def mean_time(seconds: Iterable[float | None]) -> tuple[float | None, int]:
    """Mean time over successful trials, and how many there were.

    MTTD and MTTR in seconds: trials that did not succeed carry None (an infinite time) and are
    left out of the mean; with no success at all the mean is None (infinite).

    Args:
        seconds: One time per trial, None for a trial that did not succeed.

    Returns:
        The mean over the finite times (None when there are none) and their count.
    """
    values = [s for s in seconds if s is not None]
    if not values:
        return None, 0
    return sum(values) / len(values), len(values)
