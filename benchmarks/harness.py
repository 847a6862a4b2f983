"""Shared measuring tools for benchmarks: figures with targets, timing, peak memory."""

from __future__ import annotations

import math
import resource
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Figure:
    """One measured figure and, optionally, its target."""

    name: str
    value: float
    unit: str
    target: float | None = None
    comparison: str = "<"

    def verdict(self) -> str:
        """ok, MISSED, or '' when there is no target."""
        if self.target is None:
            return ""
        met = self.value < self.target if self.comparison == "<" else self.value > self.target
        return "ok" if met else "MISSED"

    def as_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {**asdict(self), "verdict": self.verdict()}


def median_seconds(fn: Callable[[], object], repeat: int = 7, warmup: int = 1) -> float:
    """Median wall time of fn over `repeat` calls after `warmup` calls."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def peak_children_rss_mb() -> float:
    """Peak resident memory of the largest waited-for child process, in MB."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0


def reference_seconds(repeat: int = 5) -> float:
    """How fast the machine runs Python right now: the best wall time of a fixed loop of
    dictionary stores, the interpreter work that dominates a trial.

    A shared VM's speed drifts by a fifth or more within minutes; this figure, taken beside a
    measurement, says which phase the measurement met (lower is faster).
    """
    best = math.inf
    for _ in range(repeat):
        start = time.perf_counter()
        table: dict[int, int] = {}
        for i in range(1_000_000):
            table[i & 1023] = i
        best = min(best, time.perf_counter() - start)
    return best
