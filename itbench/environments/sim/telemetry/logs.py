"""Container logs: the log book `kubectl logs` and Loki read, and the lines each service
writes in its own language's format."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from itbench.core.shop import SERVICE_BY_NAME
from itbench.environments.sim.logql import LogLine
from itbench.environments.sim.traffic import OpStats

MAX_LINES_PER_STREAM = 2000
"""Log lines kept per pod stream (older lines are dropped, like a rotated container log)."""


class LogBook:
    """Container logs: every pod's (for `kubectl logs`), and the streams Loki holds (a LogStore
    for the LogQL engine): the lines the instrumented services ship over OTLP."""

    def __init__(self) -> None:
        """Create an empty log book."""
        self._streams: dict[str, tuple[dict[str, str] | None, list[LogLine]]] = {}

    def write(self, pod: str, loki: dict[str, str] | None, t: float, line: str) -> None:
        """Append a line to a pod's log (and to Loki under `loki` labels when given)."""
        self.append(pod, loki, LogLine(t, line))

    def append(self, pod: str, loki: dict[str, str] | None, entry: LogLine) -> None:
        """Append a log entry (one whose text is written when first read, too), as `write`."""
        stream = self._streams.get(pod)
        if stream is None:
            stream = (loki, [])
            self._streams[pod] = stream
        lines = stream[1]
        lines.append(entry)
        if len(lines) > MAX_LINES_PER_STREAM:
            del lines[: len(lines) - MAX_LINES_PER_STREAM]

    def has(self, pod: str) -> bool:
        """Whether a pod's log has a line (its Loki labels are those of its first line)."""
        return pod in self._streams

    def streams(self) -> Iterable[tuple[dict[str, str], Sequence[LogLine]]]:
        """Every stream Loki holds: its labels and its lines in time order."""
        return [
            (dict(labels), list(lines))
            for labels, lines in self._streams.values()
            if labels is not None
        ]

    def entries(self, pod: str) -> list[LogLine]:
        """Every kept entry of a pod's log, in time order (a served twin filters them by time
        for `kubectl logs --since` and follows them for `-f`)."""
        entry = self._streams.get(pod)
        return list(entry[1]) if entry is not None else []

    def tail(self, pod: str, n: int) -> list[str]:
        """The last n lines of a pod's log."""
        entry = self._streams.get(pod)
        if entry is None:
            return []
        return [x.line for x in entry[1][-n:]] if n > 0 else []


_SECONDS: dict[int, str] = {}
"""`%Y-%m-%dT%H:%M:%S` of whole epoch seconds (UTC), as log lines are written in order."""


def _iso(t: float) -> str:
    """`t` in UTC to the millisecond, as `datetime.fromtimestamp(t, UTC)` with `%f` cut to
    three digits writes it: microseconds rounded half to even, then truncated."""
    whole = math.floor(t)
    micros = round((t - whole) * 1e6)
    if micros >= 1_000_000:
        whole += 1
        micros -= 1_000_000
    prefix = _SECONDS.get(whole)
    if prefix is None:
        if len(_SECONDS) >= 100_000:
            _SECONDS.clear()
        prefix = datetime.fromtimestamp(whole, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
        _SECONDS[whole] = prefix
    return f"{prefix}.{micros // 1000:03d}Z"


_STYLE = {
    "Go": "json",
    ".NET": "dotnet",
    "Java": "java",
    "Kotlin": "java",
    "TypeScript": "node",
    "JavaScript": "node",
    "Python": "python",
    "Ruby": "ruby",
    "Rust": "rust",
    "PHP": "php",
    "C++": "plain",
    "Envoy": "envoy",
    "nginx": "envoy",
}


def _format(svc: str, level: str, message: str, t: float) -> str:
    spec = SERVICE_BY_NAME.get(svc)
    style = _STYLE.get(spec.language if spec else "", "plain")
    ts = _iso(t)
    if style == "json":
        return f'{{"time":"{ts}","level":"{level.upper()}","msg":"{message}","service":"{svc}"}}'
    if style == "dotnet":
        return f"{level[:4].lower()}: {svc}[0]\n      {message}".replace("\n      ", " ")
    if style == "java":
        return f"{ts} - {level.upper()} [grpc-default-executor-1] {svc} - {message}"
    if style == "node":
        lvl = 50 if level == "error" else 30
        return f'{{"level":{lvl},"time":"{ts}","service":"{svc}","msg":"{message}"}}'
    if style == "python":
        return f"{ts} {level.upper()} [{svc}] {message}"
    if style == "ruby":
        return f"{level[0].upper()}, [{ts}] {level.upper()} -- {svc}: {message}"
    if style == "rust":
        return f"{ts} {level.upper()} {svc}: {message}"
    if style == "php":
        return f"[{ts}] {svc}.{level.upper()}: {message}"
    if style == "envoy":
        return f'[{ts}] "{message}"'
    return f"[{ts}] [{level}] {svc}: {message}"


def _startup_line(svc: str) -> str:
    spec = SERVICE_BY_NAME.get(svc)
    port = spec.port if spec else None
    return f"{svc} started; listening on port {port}" if port else f"{svc} started"


def info_line(at: float, svc: str, op: str, stats: OpStats, t: float) -> LogLine:
    """An operation's info line at `at`, formatted (by `info_text`) when first read: most never
    are. It keeps the plain values it is formatted from."""
    return LogLine.deferred(at, info_text, (svc, op, stats.rate, stats.latency.median_ms, t))


def info_text(svc: str, op: str, rate: float, median_ms: float, t: float) -> str:
    """The text of an operation's info line."""
    message = f"{op} served at {rate:.2f}/s, median {median_ms:.0f} ms"
    return _format(svc, "info", message, t - 7)


def _error_line(svc: str, op: str, cause: str, t: float) -> str:
    return _format(svc, "error", f"{op} failed: {cause}", t - 5)
