"""What the Scraper keeps from scrape to scrape (its inputs, the handles of the series it
writes, the collector's pending counts) and how a written label set becomes a sample."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from itbench.environments.sim.cluster import Cluster
from itbench.environments.sim.objects import Obj
from itbench.environments.sim.series import note_sample
from itbench.environments.sim.telemetry.logs import LogBook
from itbench.environments.sim.telemetry.store import (
    SimSeries,
    TelemetryStore,
    _append_count,
    _changed,
    _put,
    _sorted,
)
from itbench.environments.sim.traffic import TrafficState


class SpanKey:
    """The series of one span (of one emitting pod, kind and status) at one exporter of the
    collector, as the spanmetrics connector counts it. One object per label set, so counts
    pending export are kept by identity rather than by hashing the label set each time."""

    def __init__(self, labels: tuple[tuple[str, str], ...]) -> None:
        self.labels = labels
        """The series' labels in store order (a client span's include `__name__`)."""
        self.instance: str | None = dict(labels).get("instance")
        """The exporter instance that writes it."""
        self.handles: list[SimSeries] | None = None
        """Its series once written: a server span's calls, buckets, count and sum, a client
        span's calls."""


@dataclass
class ScraperState:
    """The state of a `Scraper`, shared by its targets: what it reads and writes, and what it
    remembers between scrapes."""

    cluster: Cluster
    store: TelemetryStore
    logs: LogBook
    rng: random.Random
    history: list[tuple[float, TrafficState]] = field(default_factory=list)
    _carry: dict[tuple[str, ...], float] = field(default_factory=dict)
    _client_keys: dict[str, set[SpanKey]] = field(default_factory=dict)
    """The client spans written so far, by exporter instance."""
    _started_logged: dict[str, float] = field(default_factory=dict)
    _collector_restarts: int = 0
    """Restarts of the collector container found by the last `_collector_target`."""
    _exporter_runs: dict[str, int] = field(default_factory=dict)
    """The collector's restart count at the last span-metrics write, by exporter instance."""
    # Scrapes repeat the same label sets: each written label set (as a writer builds it) maps
    # to its series once, so a scrape neither re-sorts labels nor re-hashes the sorted set.
    _handles: dict[tuple[tuple[str, str], ...], SimSeries] = field(default_factory=dict)
    _ksm_handles: dict[tuple[str, tuple[tuple[str, str], ...]], SimSeries] = field(
        default_factory=dict
    )
    # Handles by the values their labels are made of, so a scrape builds no label sets for the
    # series it wrote before. Every key starts with (pod, uid).
    _pod_handles: dict[tuple[str, str], list[SimSeries]] = field(default_factory=dict)
    """A pod's fixed kube-state series (ready and phase), by (pod, uid)."""
    _container_handles: dict[tuple[str, str, str], list[SimSeries]] = field(default_factory=dict)
    """A container's kube-state series (restarts, ready, running), by (pod, uid, container)."""
    _info_handles: dict[tuple[object, ...], SimSeries] = field(default_factory=dict)
    """A pod's `kube_pod_info` series by the values of its labels."""
    _deployment_handles: dict[str, list[SimSeries]] = field(default_factory=dict)
    """A Deployment's replica series (`_DEPLOYMENT_SERIES`) by its name."""
    _cgroup_handles: dict[tuple[object, ...], list[SimSeries]] = field(default_factory=dict)
    """cAdvisor's two series of each cgroup: a pod's own by (pod, uid), a container's by
    (pod, uid, container serial, container, image)."""
    _cfs_handles: dict[tuple[object, ...], list[SimSeries]] = field(default_factory=dict)
    """A CPU-limited container's CFS periods and throttled periods series, by the key of its
    cgroup's."""
    _containers: dict[tuple[str, int], list[float]] = field(default_factory=dict)
    """Per (pod, container serial): the pod's CPU seconds, CFS periods and throttled periods
    when the container started, then the container's own working set, CPU seconds, periods and
    throttled periods at its last scrape (once it has exited, its cgroup keeps the counts and
    holds no memory)."""
    _pod_counters: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    """The pod's CPU seconds, CFS periods and throttled periods at the last scrape, by pod."""
    _server_spans: list[SpanKey] = field(default_factory=list)
    """The server spans written so far, in the order they were first written."""
    _pending_server: dict[SpanKey, list[float]] = field(default_factory=dict)
    """Server-span increments counted since the last export."""
    _pending_client: dict[SpanKey, float] = field(default_factory=dict)
    """Client-span call increments counted since the last export."""
    _pending_run: tuple[str, int] | None = None
    """The collector (instance, restarts) whose memory holds the pending counts."""
    _uncounted: (
        tuple[
            float,
            TrafficState,
            tuple[tuple[tuple[str, str], ...], int],
            dict[str, list[Obj]],
        ]
        | None
    ) = None
    """Recorded intervals whose spans are not counted yet: their total length, their traffic
    (the same for all of them), the collector (scrape labels, restarts) that received them and
    the pods that served them."""
    _span_keys: dict[tuple[tuple[str, str], ...], dict[tuple[object, ...], SpanKey]] = field(
        default_factory=dict
    )
    """Span series by the collector's scrape labels, then by emitting pod and span."""
    _resource_handles: dict[tuple[object, ...], list[tuple[SimSeries, float]]] = field(
        default_factory=dict
    )
    """A container's resource series and amounts, by (pod, uid, container, node) and its
    quantities as written."""

    # ---- series -----------------------------------------------------------------------------
    def _series(self, key: tuple[tuple[str, str], ...]) -> SimSeries:
        """The series a label set (in any order) is stored under."""
        s = self._handles.get(key)
        if s is None:
            s = self.store.handle(_sorted(key))
            self._handles[key] = s
        return s

    def _set(self, key: tuple[tuple[str, str], ...], t: float, value: float) -> None:
        _put(self._series(key), t, value)

    def _add(self, s: SimSeries, t: float, inc: float, restarted: bool = False) -> None:
        """Add to a counter series at time t (going on from its last count, see
        `_count_before`)."""
        if s.timestamps and s.timestamps[-1] == t:
            s.values[-1] += inc  # two writers of one series in a scrape: one sample, both counts
            if inc:
                _changed(s, t)
            return
        s.timestamps.append(t)
        values = s.values
        n = len(values)
        previous = values[-1] if n else 0.0
        value = _append_count(values, restarted, inc)
        if not n or value != previous:
            _changed(s, t)
        note_sample(s, n, value)
