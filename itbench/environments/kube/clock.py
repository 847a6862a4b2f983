"""A cluster's clock, and PromQL durations on a clock that runs faster than Prometheus'.

A live cluster's clock is the wall clock. A served twin's runs `speed` times faster (its kubeconfig
says so, `itbench.environments.served.server`): objects, events, logs and traces carry its time,
while the real Prometheus beside it samples on the wall clock. Times crossing to or from that
Prometheus are mapped, and the durations in queries and alert rules are divided by the speed, so
that `rate(x[2m])` means two minutes of the cluster's time on either side.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

WALL_CLOCK: Callable[[], float] = time.time


@dataclass(frozen=True)
class ClusterClock:
    """Maps between a cluster's time and the wall clock.

    Attributes:
        speed: Cluster seconds per wall second (1 for a live cluster).
        cluster_origin: A cluster time (epoch seconds)...
        wall_origin: ...and the wall time it coincided with.
        wall: The wall clock (epoch seconds).
    """

    speed: float = 1.0
    cluster_origin: float = 0.0
    wall_origin: float = 0.0
    wall: Callable[[], float] = field(default=WALL_CLOCK, compare=False)

    def __post_init__(self) -> None:
        if not self.speed > 0:
            raise ValueError(f"a clock's speed must be positive, got {self.speed}")

    def now(self) -> float:
        """The cluster's time now (epoch seconds)."""
        return self.to_cluster(self.wall())

    def to_cluster(self, wall: float) -> float:
        """The cluster time at a wall time."""
        return self.cluster_origin + (wall - self.wall_origin) * self.speed

    def to_wall(self, cluster: float) -> float:
        """The wall time at a cluster time."""
        return self.wall_origin + (cluster - self.cluster_origin) / self.speed

    def wall_seconds(self, cluster_seconds: float) -> float:
        """Wall seconds that pass while the cluster's clock moves by cluster_seconds."""
        return cluster_seconds / self.speed


_UNIT_SECONDS = {
    "ms": 0.001,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
    "w": 604800.0,
    "y": 31536000.0,
}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)")
_OFFSET = re.compile(r"(\boffset\s+)(-?)((?:\d+(?:\.\d+)?(?:ms|s|m|h|d|w|y))+)", re.IGNORECASE)


def duration_seconds(text: str) -> float:
    """Seconds in a Prometheus duration (`1h30m`, `500ms`).

    Raises:
        ValueError: Not a duration.
    """
    pos, total = 0, 0.0
    for m in _DURATION.finditer(text):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
        pos = m.end()
    if pos != len(text) or not text:
        raise ValueError(f"not a Prometheus duration: {text!r}")
    return total


def format_duration(seconds: float) -> str:
    """A Prometheus duration for seconds, to the millisecond (`4s`, `1500ms`; at least `1ms`)."""
    millis = max(round(seconds * 1000), 1)
    if millis % 1000 == 0:
        return f"{millis // 1000}s"
    return f"{millis}ms"


def scale_duration(text: str, factor: float) -> str:
    """A duration divided by factor (`2m`, 30 -> `4s`)."""
    if factor == 1:
        return text
    return format_duration(duration_seconds(text) / factor)


def _scale_bracket(inner: str, factor: float) -> str:
    # [5m], [5m:30s] and [5m:] (subqueries); anything else is left as written.
    head, colon, step = inner.partition(":")
    try:
        out = scale_duration(head.strip(), factor)
        if colon:
            out += ":" + (scale_duration(step.strip(), factor) if step.strip() else "")
    except ValueError:
        return inner
    return out


def scale_promql(expr: str, factor: float) -> str:
    """A PromQL expression whose range selectors, subqueries and offsets are divided by factor.

    String literals are left alone; `@` timestamps are not mapped.
    """
    if factor == 1:
        return expr
    out: list[str] = []
    i = 0
    n = len(expr)
    code_start = 0

    def flush(upto: int) -> None:
        segment = expr[code_start:upto]
        segment = _OFFSET.sub(
            lambda m: m.group(1) + m.group(2) + scale_duration(m.group(3), factor), segment
        )
        out.append(segment)

    while i < n:
        char = expr[i]
        if char in "\"'`":
            flush(i)
            end = i + 1
            while end < n and expr[end] != char:
                end += 2 if expr[end] == "\\" and char != "`" else 1
            out.append(expr[i : end + 1])
            i = end + 1
            code_start = i
            continue
        if char == "[":
            close = expr.find("]", i)
            if close == -1:
                break
            flush(i)
            out.append("[" + _scale_bracket(expr[i + 1 : close], factor) + "]")
            i = close + 1
            code_start = i
            continue
        i += 1
    flush(n)
    return "".join(out)
