"""The scraped series: each one a handle the Scraper appends to, kept in a store the PromQL
engine reads, with Prometheus staleness markers and the times each metric name changed."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from math import copysign
from typing import cast

from itbench.environments.sim.series import STALE_NAN, Series, note_sample


class SimSeries(Series):
    """A series of the twin (handles are kept and appended to directly)."""

    stale: bool = False
    """Whether the series ended with a staleness marker and has not been scraped since."""
    group: list[SimSeries] | None = None
    """Series always written together with this one, sharing one timestamps list (see
    `TelemetryStore.share_timestamps`); None when it has its own."""
    changes: list[float]
    """The times at which a series of this one's name got a value other than its last (or its
    first, or a staleness marker): one list per name, shared (see `TelemetryStore.changed`)."""


def _changed(series: SimSeries, t: float) -> None:
    """Note that a series of this name changed at t."""
    changes = series.changes
    if not changes or changes[-1] != t:
        changes.append(t)


class TelemetryStore:
    """The scraped series (a SeriesStore for the PromQL engine) with Prometheus staleness.

    A series missing from a scrape (its pod is gone, its waiting reason cleared) gets a
    staleness marker at that scrape, as Prometheus writes one, so instant selectors stop
    seeing it while range functions still see its earlier samples.
    """

    def __init__(self) -> None:
        """Create an empty store."""
        self._index: dict[tuple[tuple[str, str], ...], SimSeries] = {}
        self._by_name: dict[str, list[SimSeries]] = {}
        self._heads: list[SimSeries] | None = None
        """Every series without a group and the first of every group (None: to be rebuilt)."""
        self._changes: dict[str, list[float]] = {}
        # Per name: how many series it had, those without samples then, and the selection.
        self._selections: dict[str, tuple[int, list[SimSeries], list[SimSeries]]] = {}

    def __len__(self) -> int:
        """Number of series ever scraped."""
        return len(self._index)

    def handle(self, key: tuple[tuple[str, str], ...]) -> SimSeries:
        """The series with these labels (first pair is ("__name__", name)); created on demand."""
        series = self._index.get(key)
        if series is None:
            series = SimSeries(labels=dict(key), last_nan=-1, last_drop=-1)
            series.changes = self._changes.setdefault(key[0][1], [])
            self._index[key] = series
            self._by_name.setdefault(key[0][1], []).append(series)
            self._heads = None
        return series

    def share_timestamps(self, group: list[SimSeries]) -> bool:
        """Let new series that are always written in the same scrapes share one timestamps list
        (a span's calls, buckets, count and sum): one append per scrape instead of one each.

        Returns:
            Whether they share it now (False when one of them already has samples or a group).
        """
        if any(s.timestamps or s.group is not None for s in group) or len(
            set(map(id, group))
        ) < len(group):
            return False
        shared = group[0].timestamps
        for s in group:
            s.timestamps = shared
            s.group = group
        self._heads = None
        return True

    def changed(self, name: str, after: float, until: float) -> bool:
        """Whether a series of a name got a value other than its last (a first one, another
        one or a staleness marker) at a time in (after, until]. Every scrape writes or ends every
        series, so between such changes an instant selector of the name reads the same values.
        """
        changes = self._changes.get(name)
        if not changes:
            return False
        i = bisect_right(changes, after)
        return i < len(changes) and changes[i] <= until

    def has(self, key: tuple[tuple[str, str], ...]) -> bool:
        """Whether a series with exactly these labels was ever scraped."""
        return key in self._index

    def series_named(self, name: str) -> list[SimSeries]:
        """Every series of a name, stale or not."""
        return list(self._by_name.get(name, ()))

    def names(self) -> list[str]:
        """Every metric name, sorted."""
        return sorted(self._by_name)

    def select(self, name: str | None) -> Iterable[Series]:
        """Series of a name (all when None) that have samples.

        A name's selection is the same list object for as long as it is unchanged, so that
        the engine knows it at once (callers must not modify it). A series never loses its
        samples: the selection changes only when a series of the name is made, or one that had
        no samples yet gets its first.
        """
        if name is None:
            return [series for series in self._index.values() if series.timestamps]
        pool = self._by_name.get(name)
        if pool is None:
            return []
        cached = self._selections.get(name)
        if (
            cached is not None
            and cached[0] == len(pool)
            and not any(series.timestamps for series in cached[1])
        ):
            return cached[2]
        selected = [series for series in pool if series.timestamps]
        empty = [series for series in pool if not series.timestamps]
        self._selections[name] = (len(pool), empty, selected)
        return selected

    def mark_stale(self, t: float) -> None:
        """End every series that the scrape at time t did not write (staleness markers)."""
        heads = self._heads
        if heads is None:
            # A group is written as one: its first series stands for all of them.
            heads = [s for s in self._index.values() if s.group is None or s.group[0] is s]
            self._heads = heads
        for series in heads:
            ts = series.timestamps
            if not ts:
                continue
            group = series.group
            if group is not None:
                if ts[-1] == t:
                    for member in group:
                        member.stale = False
                elif not series.stale:
                    ts.append(t)
                    for member in group:
                        member.last_nan = len(member.values)
                        member.values.append(STALE_NAN)
                        member.stale = True
                        _changed(member, t)
                continue
            if ts[-1] == t:
                series.stale = False
            elif not series.stale:
                ts.append(t)
                series.last_nan = len(series.values)
                series.values.append(STALE_NAN)
                series.stale = True
                _changed(series, t)


def _sorted(labels: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """Labels in store order: `__name__` first, then by name."""
    rest = [kv for kv in labels if kv[0] != "__name__"]
    rest.sort()
    if len(rest) == len(labels) - 1 and labels[0][0] == "__name__":
        return (labels[0], *rest)
    return (*[kv for kv in labels if kv[0] == "__name__"], *rest)


def _repeat_last(values: list[float]) -> None:
    """Append a series' last value again as the very same object (indexing a `list[float]`
    unboxes the value on the compiled build, and appending it would box a new float)."""
    held = cast("list[object]", values)
    held.append(held[-1])


def _append_count(values: list[float], restarted: bool, increment: float) -> float:
    """Append a cumulative series' next count, `_count_before` plus an increment, and return it.

    A count that did not move (a zero increment to anything but a negative zero, which adding
    would make positive) is appended as the last sample's own object, so that a counter at rest
    costs a list slot per sample, not a new float.
    """
    if values and not restarted:
        last = values[-1]
        if increment == 0.0 and last == last and (last != 0.0 or copysign(1.0, last) > 0.0):
            _repeat_last(values)
            return last
    value = _count_before(values, restarted) + increment
    values.append(value)
    return value


def _count_before(values: list[float], restarted: bool) -> float:
    """The count a cumulative series goes on from: its last sample; after staleness markers
    (its exporter was not scraped for a while), the last count before them; zero when the
    exporting process restarted."""
    if restarted or not values:
        return 0.0
    last = values[-1]
    if last == last:
        return last
    for value in reversed(values):
        if value == value:
            return value
    return 0.0


def _put(s: SimSeries, t: float, value: float) -> None:
    values = s.values
    if s.timestamps and s.timestamps[-1] == t:
        if value != values[-1]:
            _changed(s, t)
        values[-1] = value  # one sample per series and scrape, as Prometheus keeps it
        note_sample(s, len(values) - 1, value)
        return
    s.timestamps.append(t)
    if values:
        last = values[-1]
        if value == last and (value != 0.0 or copysign(1.0, value) == copysign(1.0, last)):
            # Unchanged (zeros of one sign): the series holds its last float object again, so
            # a steady series (most are) costs a list slot per sample, not a new float.
            _repeat_last(values)
            return
    # The irregularity marks (`note_sample`) and the name's changes, inlined: this runs for
    # most samples.
    if not values or value != values[-1]:
        changes = s.changes
        if not changes or changes[-1] != t:
            changes.append(t)
        if value != value:
            s.last_nan = len(values)
        elif values and value < values[-1]:
            s.last_drop = len(values)
    values.append(value)
