"""In-memory time series: the storage the simulator scrapes into and the PromQL engine reads from.

A series is a label set (including ``__name__``) with ascending timestamps in epoch seconds.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

_STALE_BITS = 0x7FF0000000000002

STALE_NAN: float = struct.unpack("<d", struct.pack("<Q", _STALE_BITS))[0]
"""Prometheus' staleness marker: a NaN with a particular bit pattern that ends a series."""


def is_stale(value: float) -> bool:
    """Whether a sample value is the staleness marker (not merely NaN)."""
    return value != value and struct.unpack("<Q", struct.pack("<d", value))[0] == _STALE_BITS


@dataclass
class Series:
    """One time series: its labels and its samples in ascending time order.

    Attributes:
        labels: Label names to values, including ``__name__``.
        timestamps: Sample times in epoch seconds, ascending.
        values: Sample values, one per timestamp.
    """

    labels: dict[str, str]
    timestamps: list[float] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    last_nan: int | None = None
    """Index of the last NaN sample (-1: none), kept by a store that notes every sample it
    writes (`note_sample`); None when nobody keeps it (the PromQL engine then scans)."""
    last_drop: int | None = None
    """Index of the last sample below the one before it (-1: none), kept like `last_nan`."""

    def __init__(
        self,
        labels: dict[str, str],
        timestamps: list[float] | None = None,
        values: list[float] | None = None,
        last_nan: int | None = None,
        last_drop: int | None = None,
    ) -> None:
        """A series (written out: see "Compiled build" in docs/architecture.md)."""
        self.labels = labels
        self.timestamps = [] if timestamps is None else timestamps
        self.values = [] if values is None else values
        self.last_nan = last_nan
        self.last_drop = last_drop


def note_sample(series: Series, index: int, value: float) -> None:
    """Keep a tracked series' irregularity marks up to date for the sample just written at
    `index` (appended, or replacing the last one: marks are only ever moved forward, so a
    replaced value can leave a mark that no longer holds, which costs the engine its exact slow
    path, never a wrong answer)."""
    if value != value:
        series.last_nan = index
    elif index and value < series.values[index - 1]:
        series.last_drop = index


class SeriesStore(Protocol):
    """Anything that can hand series to the PromQL engine."""

    def select(self, name: str | None) -> Iterable[Series]:
        """Series whose ``__name__`` is ``name``; every series when ``name`` is None."""
        ...


class MemorySeriesStore:
    """A series store in memory, keyed by the frozen label set, indexed by metric name."""

    def __init__(self) -> None:
        """Create an empty store."""
        self._series: dict[frozenset[tuple[str, str]], Series] = {}
        self._by_name: dict[str, list[Series]] = {}

    def __len__(self) -> int:
        """Number of distinct series."""
        return len(self._series)

    def append(self, labels: Mapping[str, str], t: float, value: float) -> None:
        """Append one sample to the series with these labels, creating the series if needed.

        A sample at the same time as the series' last sample replaces it.

        Args:
            labels: The full label set, including ``__name__``.
            t: Sample time in epoch seconds; not earlier than the series' last sample.
            value: Sample value.

        Raises:
            ValueError: When ``labels`` has no ``__name__`` or ``t`` goes back in time.
        """
        key = frozenset(labels.items())
        series = self._series.get(key)
        if series is None:
            name = labels.get("__name__")
            if not name:
                raise ValueError(f"series {dict(labels)} has no __name__ label")
            series = Series(labels=dict(labels), last_nan=-1, last_drop=-1)
            self._series[key] = series
            self._by_name.setdefault(name, []).append(series)
        timestamps = series.timestamps
        if timestamps:
            last = timestamps[-1]
            if t < last:
                raise ValueError(
                    f"out-of-order sample for {series.labels}: t={t} is before the last "
                    f"sample at t={last}"
                )
            if t == last:
                series.values[-1] = value
                note_sample(series, len(series.values) - 1, value)
                return
        timestamps.append(t)
        series.values.append(value)
        note_sample(series, len(series.values) - 1, value)

    def mark_stale(self, labels: Mapping[str, str], t: float) -> None:
        """End a series at ``t``, as Prometheus does when a target or series disappears.

        Queries at or after ``t`` no longer see the series' earlier samples through the lookback
        window. Nothing happens when the series does not exist or is already stale.

        Args:
            labels: The full label set, including ``__name__``.
            t: Time of the marker in epoch seconds.
        """
        series = self._series.get(frozenset(labels.items()))
        if series is None or (series.values and is_stale(series.values[-1])):
            return
        self.append(labels, t, STALE_NAN)

    def select(self, name: str | None) -> Iterable[Series]:
        """Series named ``name``, or every series when ``name`` is None.

        Args:
            name: A metric name, or None for all series.

        Returns:
            The matching series, in insertion order.
        """
        if name is None:
            return list(self._series.values())
        return list(self._by_name.get(name, ()))
