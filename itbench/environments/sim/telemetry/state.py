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
    _changed,
    _count_before,
    _put,
    _sorted,
)
from itbench.environments.sim.traffic import TrafficState


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
    _span_handles: dict[tuple[tuple[str, str], ...], list[SimSeries]] = field(default_factory=dict)
    _client_keys: dict[str, set[tuple[tuple[str, str], ...]]] = field(default_factory=dict)
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
    # A pod's fixed kube-state series (ready and phase), and a container's (restarts, ready,
    # running), by their label tuples.
    _pod_handles: dict[tuple[tuple[str, str], ...], list[SimSeries]] = field(default_factory=dict)
    _container_handles: dict[tuple[tuple[str, str], ...], list[SimSeries]] = field(
        default_factory=dict
    )
    _cgroup_handles: dict[tuple[str, ...], list[SimSeries]] = field(default_factory=dict)
    """cAdvisor's two series of each cgroup, by (cgroup, container, id, image, pod)."""
    _containers: dict[tuple[str, int], list[float]] = field(default_factory=dict)
    """Per (pod, container serial): the pod's CPU seconds, CFS periods and throttled periods
    when the container started, then the container's own working set, CPU seconds, periods and
    throttled periods at its last scrape (once it has exited, its cgroup keeps the counts and
    holds no memory)."""
    _pod_counters: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    """The pod's CPU seconds, CFS periods and throttled periods at the last scrape, by pod."""
    _span_instances: dict[tuple[tuple[str, str], ...], str | None] = field(default_factory=dict)
    """The exporter instance of each label set in `_span_handles`, in the same order."""
    _pending_server: dict[tuple[tuple[str, str], ...], list[float]] = field(default_factory=dict)
    """Server-span increments counted since the last export, by series labels."""
    _pending_client: dict[tuple[tuple[str, str], ...], float] = field(default_factory=dict)
    """Client-span call increments counted since the last export, by series key."""
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
    _span_label_cache: dict[
        tuple[tuple[str, str], ...], dict[tuple[object, ...], tuple[tuple[str, str], ...]]
    ] = field(default_factory=dict)
    """Span series' labels (sorted, so `__name__` can go in front) by the collector's scrape
    labels, then by emitting pod and span."""
    _resource_handles: dict[tuple[object, ...], list[tuple[SimSeries, float]]] = field(
        default_factory=dict
    )
    """A container's resource series and amounts, by its labels and quantities as written."""

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

    def _add(
        self, key: tuple[tuple[str, str], ...], t: float, inc: float, restarted: bool = False
    ) -> None:
        s = self._series(key)
        if s.timestamps and s.timestamps[-1] == t:
            s.values[-1] += inc  # two writers of one series in a scrape: one sample, both counts
            if inc:
                _changed(s, t)
            return
        s.timestamps.append(t)
        value = _count_before(s.values, restarted) + inc
        if not s.values or value != s.values[-1]:
            _changed(s, t)
        s.values.append(value)
        note_sample(s, len(s.values) - 1, value)
