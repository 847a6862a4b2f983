"""The twin's telemetry: scraped series, logs and Jaeger traces shaped as the pinned stack stores
them.

Metrics carry the labels of their scrape as kube-prometheus-stack writes them: span metrics and
the kafkametrics receiver's lag from the collector's Prometheus exporter (per emitting pod, with
`exported_job`/`exported_instance`, only while the collector runs), kube-state-metrics (its
target's labels beside the object's), cAdvisor (container IDs; a restarted container's old series
lingers briefly; CFS series only under a CPU limit). Logs are what the collector ships to Loki
over OTLP (instrumented services only, Loki's OTLP labels); `kubectl logs` sees every pod. Traces
are rebuilt on demand from each interval's traffic, deterministically from the seed.
"""

from __future__ import annotations

import math
import random
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from operator import add
from typing import Any, ClassVar

from itbench.core.alert_rules import KAFKA_LAG_METRIC
from itbench.core.shop import (
    COLLECTOR,
    KAFKA_CONSUMERS,
    OPERATIONS,
    ORDERS_TOPIC,
    PROXY,
    SERVICE_BY_NAME,
    Call,
    Operation,
)
from itbench.environments.sim.cluster import Cluster, ContainerRuntime
from itbench.environments.sim.logql import LogLine
from itbench.environments.sim.objects import NODE_NAME, Obj, main_container, parse_cpu, parse_memory
from itbench.environments.sim.registry import image_program
from itbench.environments.sim.series import STALE_NAN, Series, note_sample
from itbench.environments.sim.traffic import EdgeStats, Latency, OpStats, TrafficState
from itbench.stack import chart_pin

BUCKETS_MS = (2, 4, 6, 8, 10, 50, 100, 200, 400, 800, 1000, 1400, 2000, 5000, 10000, 15000)
"""The spanmetrics connector's default explicit histogram buckets, in milliseconds."""
SIGMA = 0.4
"""Log-normal shape of every latency distribution."""
MAX_LINES_PER_STREAM = 2000
"""Log lines kept per pod stream (older lines are dropped, like a rotated container log)."""

_OPS: dict[tuple[str, str], Operation] = {(o.service, o.name): o for o in OPERATIONS}

KSM_TARGET = (
    ("container", "kube-state-metrics"),
    ("endpoint", "http"),
    ("instance", "10.244.0.12:8080"),
    ("job", "kube-state-metrics"),
    ("service", "kube-prometheus-stack-kube-state-metrics"),
)
"""Labels kube-prometheus-stack's scrape of kube-state-metrics adds (honorLabels keeps the
object's own namespace, pod and container)."""
KSM_POD = "kube-prometheus-stack-kube-state-metrics-6c5d7b9f4d-lmx2k"
"""The scrape's `pod` label on kube-state-metrics series that describe no pod."""
KUBELET_TARGET = (
    ("endpoint", "https-metrics"),
    ("instance", "172.18.0.2:10250"),
    ("job", "kubelet"),
    ("metrics_path", "/metrics/cadvisor"),
    ("node", NODE_NAME),
    ("service", "kube-prometheus-stack-kubelet"),
)
"""Labels of kube-prometheus-stack's cAdvisor scrape of the worker's kubelet."""
OLD_CONTAINER_SECONDS = 30.0
"""How long cAdvisor keeps reporting a replaced container's cgroup after a restart."""
SPAN_SCOPE = (("otel_scope_name", "spanmetricsconnector"),)
KAFKA_SCOPE = (
    (
        "otel_scope_name",
        "github.com/open-telemetry/opentelemetry-collector-contrib/receiver/kafkametricsreceiver",
    ),
    ("otel_scope_version", str(chart_pin("opentelemetry-collector")["appVersion"])),
)
SERVICE_NAMESPACE = "otel-demo"
"""The chart's `resource.opentelemetry.io/service.namespace` pod annotation (service.namespace)."""


def _reachable(service: str, operation: str) -> frozenset[str]:
    """Services a trace starting at an operation can touch (calls and Kafka consumers)."""
    out = {service}
    for call in _OPS[(service, operation)].calls:
        if (call.service, call.operation) in _OPS:
            out |= _reachable(call.service, call.operation)
        if call.service == "kafka":
            out |= {c.service for c in KAFKA_CONSUMERS}
    return frozenset(out)


_ROUTE_SERVICES = {name: _reachable(svc, name) for svc, name in _OPS if svc == PROXY}
_SERVER_SPANS: dict[tuple[str, str], tuple[tuple[str, tuple[str, str, str, str]], ...]] = {
    (o.service, o.name): tuple(
        (status, (o.service, o.exported, o.kind, status))
        for status in ("STATUS_CODE_UNSET", "STATUS_CODE_ERROR")
    )
    for o in OPERATIONS
    if o.service in SERVICE_BY_NAME and SERVICE_BY_NAME[o.service].instrumented
}
"""Per server operation of an instrumented service: each span series' status and (service,
exported span name, kind, status), the ok series first."""
_DEPLOYMENT_SERIES = (
    ("kube_deployment_spec_replicas", "replicas"),
    ("kube_deployment_status_replicas", "replicas"),
    ("kube_deployment_status_replicas_ready", "readyReplicas"),
    ("kube_deployment_status_replicas_available", "availableReplicas"),
    ("kube_deployment_status_replicas_unavailable", "unavailableReplicas"),
    ("kube_deployment_status_replicas_updated", "updatedReplicas"),
)

_RESOURCE_FIELDS = (
    ("requests", "cpu", "core", parse_cpu),
    ("requests", "memory", "byte", parse_memory),
    ("limits", "cpu", "core", parse_cpu),
    ("limits", "memory", "byte", parse_memory),
)
_PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
_CONTAINER_SERIES = (
    "kube_pod_container_status_restarts_total",
    "kube_pod_container_status_ready",
    "kube_pod_container_status_running",
)


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
        """Series of a name (all when None) that have samples."""
        pool: Iterable[SimSeries] = (
            self._index.values() if name is None else self._by_name.get(name, ())
        )
        return [series for series in pool if series.timestamps]

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


class LogBook:
    """Container logs: every pod's (for `kubectl logs`), and the streams Loki holds (a LogStore
    for the LogQL engine): the lines the instrumented services ship over OTLP."""

    def __init__(self) -> None:
        """Create an empty log book."""
        self._streams: dict[str, tuple[dict[str, str] | None, list[LogLine]]] = {}

    def write(self, pod: str, loki: dict[str, str] | None, t: float, line: str) -> None:
        """Append a line to a pod's log (and to Loki under `loki` labels when given)."""
        entry = self._streams.get(pod)
        if entry is None:
            entry = (loki, [])
            self._streams[pod] = entry
        lines = entry[1]
        lines.append(LogLine(t, line))
        if len(lines) > MAX_LINES_PER_STREAM:
            del lines[: len(lines) - MAX_LINES_PER_STREAM]

    def streams(self) -> Iterable[tuple[dict[str, str], Sequence[LogLine]]]:
        """Every stream Loki holds: its labels and its lines in time order."""
        return [
            (dict(labels), list(lines))
            for labels, lines in self._streams.values()
            if labels is not None
        ]

    def tail(self, pod: str, n: int) -> list[str]:
        """The last n lines of a pod's log."""
        entry = self._streams.get(pod)
        if entry is None:
            return []
        return [x.line for x in entry[1][-n:]] if n > 0 else []


@dataclass
class Scraper:
    """Turns the cluster and each interval's traffic into series, logs and trace material."""

    cluster: Cluster
    store: TelemetryStore
    logs: LogBook
    rng: random.Random
    history: list[tuple[float, TrafficState]] = field(default_factory=list)
    _carry: dict[tuple[str, ...], float] = field(default_factory=dict)
    # Pure functions of their keys, shared by every twin in the process (read-only values).
    _cdf_cache: ClassVar[dict[tuple[float, float, float], list[float]]] = {}
    _increments: ClassVar[dict[tuple[int, tuple[float, float, float]], list[float]]] = {}
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

    def _count(self, key: tuple[str, ...], expected: float) -> int:
        jitter = 1.0 + (self.rng.random() - 0.5) * 0.1
        value = expected * jitter + self._carry.get(key, 0.0)
        n = int(value)
        self._carry[key] = value - n
        return n

    def _cdf(self, lat: Latency) -> list[float]:
        key = _cdf_key(lat)
        cached = self._cdf_cache.get(key)
        if cached is not None:
            return cached
        out = []
        for le in BUCKETS_MS:
            body = _lognormal_cdf(le, max(key[0], 0.01))
            if key[1] > 0:
                tail = _lognormal_cdf(le, max(key[2], 0.01))
                out.append((1 - key[1]) * body + key[1] * tail)
            else:
                out.append(body)
        if len(self._cdf_cache) < 100_000:
            self._cdf_cache[key] = out
        return out

    def record(self, t: float, dt: float, traffic: TrafficState, telemetry_on: bool) -> None:
        """Record what the shop emits over the interval that just ended, whether or not a
        scrape falls in it: log lines, the spans the collector counts (exported at the next
        scrape) and the material traces are rebuilt from.

        Args:
            t: End of the interval (epoch seconds).
            dt: Interval length.
            traffic: The interval's traffic.
            telemetry_on: Whether logs are written.
        """
        self.history.append((t, traffic))
        collector = self._collector_target()
        uncounted = self._uncounted
        if uncounted is not None and (
            collector is None
            or not uncounted[1].same_as(traffic)
            or uncounted[2] != (collector, self._collector_restarts)
        ):
            self._count_uncounted()
            uncounted = None
        if collector is not None:
            if uncounted is None:
                # Intervals with the same traffic (and so the same pods serving it) are
                # counted together, one draw of the spans over their whole length, when they
                # end or at the next scrape.
                serving = self._serving_pods(
                    {k[0] for k in traffic.ops} | {k[0] for k in traffic.edges}
                )
                self._uncounted = (
                    dt,
                    traffic,
                    (collector, self._collector_restarts),
                    serving,
                )
            else:
                self._uncounted = (uncounted[0] + dt, *uncounted[1:])
        if telemetry_on:
            self._write_logs(t, dt, traffic)

    def scrape(self, t: float) -> None:
        """One scrape of every target at time t: the collector's exporter (span metrics and
        Kafka lag as the last recorded interval left them), kube-state-metrics and cAdvisor;
        series no target wrote get their staleness marker.

        Args:
            t: Scrape time (epoch seconds), the end of the last recorded interval.
        """
        self._count_uncounted()
        collector = self._collector_target()
        if collector is not None:
            self._write_spans(t, collector)
            if self.history and self.history[-1][1].kafka_visible:
                self._kafka(t, self.history[-1][1], collector)
        self._kube_state(t)
        self._cadvisor(t)
        self.store.mark_stale(t)

    def _collector_target(self) -> tuple[tuple[str, str], ...] | None:
        """The scrape labels of the collector's Prometheus exporter (None while it is down)."""
        c = self.cluster
        for pod in c.of_kind("Pod"):
            if _owner(pod).rsplit("-", 1)[0] == COLLECTOR and c.pod_ready(pod):
                statuses = pod["status"].get("containerStatuses") or [{}]
                self._collector_restarts = int(statuses[0].get("restartCount", 0))
                return (
                    ("container", "opentelemetry-collector"),
                    ("endpoint", "metrics"),
                    ("instance", f"{pod['status'].get('podIP', '')}:8888"),
                    ("job", COLLECTOR),
                    ("namespace", c.namespace),
                    ("pod", str(pod["metadata"]["name"])),
                    ("service", COLLECTOR),
                )
        return None

    def _kafka(self, t: float, traffic: TrafficState, target: tuple[tuple[str, str], ...]) -> None:
        for consumer in KAFKA_CONSUMERS:
            lag = float(round(traffic.kafka_lag.get(consumer.group, 0.0)))
            base = (*target, *KAFKA_SCOPE, ("group", consumer.group), ("topic", ORDERS_TOPIC))
            self._set((("__name__", KAFKA_LAG_METRIC), *base), t, lag)
            self._set(
                (("__name__", "kafka_consumer_group_lag_ratio"), *base, ("partition", "0")), t, lag
            )

    def _serving_pods(self, services: set[str]) -> dict[str, list[Obj]]:
        """Per service, its ready pods that run the service's own program (a pause image
        exports no spans), by name."""
        c = self.cluster
        out: dict[str, list[Obj]] = {svc: [] for svc in services}
        for p in c.of_kind("Pod"):
            pods = out.get(_owner(p).rsplit("-", 1)[0])
            if pods is None:
                continue
            svc = _owner(p).rsplit("-", 1)[0]
            if (
                c.pod_ready(p)
                and image_program(str(main_container(p["spec"]).get("image", ""))) == svc
            ):
                pods.append(p)
        return out

    def _count_uncounted(self) -> None:
        """Count the spans of the intervals recorded but not counted yet."""
        uncounted = self._uncounted
        if uncounted is not None:
            self._uncounted = None
            dt, traffic, (target, restarts), serving = uncounted
            self._count_spans(dt, traffic, target, restarts, serving)

    def _count_spans(
        self,
        dt: float,
        traffic: TrafficState,
        target: tuple[tuple[str, str], ...],
        restarts: int,
        serving: dict[str, list[Obj]],
    ) -> None:
        """Add an interval's spans to the counts the collector (its scrape labels and restart
        count) holds for its next export, from the pods that served them."""
        run = (dict(target)["instance"], restarts)
        if self._pending_run != run:
            # Counts held by a collector that has since restarted or been replaced are gone.
            self._pending_server, self._pending_client = {}, {}
            self._pending_run = run
        server = self._pending_server
        label_sets = self._span_label_cache.setdefault(target, {})
        for (svc, name), stats in traffic.ops.items():
            spans = _SERVER_SPANS.get((svc, name))
            pods = serving.get(svc)
            if spans is None or not pods:
                continue
            n = self._count(("srv", svc, name), stats.rate * dt)
            errors = self._count(("err", svc, name), n * stats.error) if stats.error > 0 else 0
            errors = min(errors, n)
            for index, pod in enumerate(pods):
                uid = str(pod["metadata"].get("uid", ""))
                for (status, key), count in zip(
                    spans,
                    (_share(n - errors, len(pods), index), _share(errors, len(pods), index)),
                    strict=True,
                ):
                    labels = label_sets.get((uid, key))
                    if labels is None:
                        labels = _span_labels(target, svc, uid, key[1], key[2], status)
                        label_sets[(uid, key)] = labels
                    if (
                        not count
                        and status == "STATUS_CODE_ERROR"
                        and labels not in server
                        and not self.store.has(
                            (("__name__", "traces_span_metrics_calls_total"), *labels)
                        )
                    ):
                        continue
                    increments = self._increments_for(count, stats.latency)
                    total = server.get(labels)
                    server[labels] = (
                        increments if total is None else list(map(add, total, increments))
                    )
        client = self._pending_client
        for (caller, caller_op, callee, op_name), edge in traffic.edges.items():
            spec = SERVICE_BY_NAME.get(caller)
            pods = serving.get(caller) or []
            if spec is None or not spec.instrumented or not edge.call.span or not pods:
                continue
            client_kind = (
                "SPAN_KIND_PRODUCER" if edge.call.service == "kafka" else "SPAN_KIND_CLIENT"
            )
            span = client_span_name(caller, edge.call)
            n = self._count(("cli", caller, caller_op, callee, op_name), edge.rate * dt)
            errors = min(
                n, self._count(("cer", caller, caller_op, callee, op_name), n * edge.error)
            )
            for index, pod in enumerate(pods):
                uid = str(pod["metadata"].get("uid", ""))
                ok_key = self._client_key(label_sets, target, caller, uid, span, client_kind, False)
                client[ok_key] = client.get(ok_key, 0.0) + _share(n - errors, len(pods), index)
                err_key = self._client_key(label_sets, target, caller, uid, span, client_kind, True)
                err = _share(errors, len(pods), index)
                if err or err_key in client or self.store.has(err_key):
                    client[err_key] = client.get(err_key, 0.0) + err

    def _write_spans(self, t: float, target: tuple[tuple[str, str], ...]) -> None:
        """Write the collector exporter's span series at a scrape: every count so far."""
        instance = dict(target)["instance"]
        # The connector counts in the collector's memory: a restarted collector container
        # starts every count at zero again (a counter reset).
        restarted = self._exporter_runs.get(instance, self._collector_restarts) != (
            self._collector_restarts
        )
        self._exporter_runs[instance] = self._collector_restarts
        server: dict[tuple[tuple[str, str], ...], list[float]] = {}
        client: dict[tuple[tuple[str, str], ...], float] = {}
        if self._pending_run == (instance, self._collector_restarts):
            server, client = self._pending_server, self._pending_client
        self._pending_server, self._pending_client = {}, {}
        # The connector keeps exporting every series it has seen (cumulative, no expiry), so a
        # service that stops serving keeps constant series: their rate falls to zero.
        for labels, exporter in list(self._span_instances.items()):
            if exporter == instance and labels not in server:
                server[labels] = [0.0] * (len(BUCKETS_MS) + 4)
        for labels, increments in server.items():
            handles = self._span_handles_for(labels)
            ts = handles[0].timestamps
            if handles[0].group is handles and not (ts and ts[-1] == t):
                ts.append(t)  # shared by every series of the span
                for series, inc in zip(handles, increments, strict=True):
                    values = series.values
                    last = values[-1] if values else 0.0
                    if last != last or restarted:
                        last = _count_before(values, restarted)
                    values.append(last + inc)
                    if restarted:  # counts only ever fall when the collector restarted
                        note_sample(series, len(values) - 1, values[-1])
                    if len(values) < 2 or values[-1] != values[-2]:
                        _changed(series, t)
                continue
            for series, inc in zip(handles, increments, strict=True):
                values = series.values
                if series.timestamps and series.timestamps[-1] == t:
                    values[-1] += inc
                    if inc:
                        _changed(series, t)
                    continue
                series.timestamps.append(t)
                values.append(_count_before(values, restarted) + inc)
                note_sample(series, len(values) - 1, values[-1])
                if len(values) < 2 or values[-1] != values[-2]:
                    _changed(series, t)
        for key in self._client_keys.get(instance, ()):
            if key not in client:
                client[key] = 0.0
        for series_key, inc in client.items():
            self._add(series_key, t, inc, restarted)
            self._client_keys.setdefault(instance, set()).add(series_key)

    @staticmethod
    def _client_key(
        label_sets: dict[tuple[object, ...], tuple[tuple[str, str], ...]],
        target: tuple[tuple[str, str], ...],
        caller: str,
        uid: str,
        span: str,
        kind: str,
        error: bool,
    ) -> tuple[tuple[str, str], ...]:
        """The calls series of a client span of an emitting pod (remembered per target)."""
        key = (uid, caller, span, kind, error)
        labels = label_sets.get(key)
        if labels is None:
            status = "STATUS_CODE_ERROR" if error else "STATUS_CODE_UNSET"
            labels = (
                ("__name__", "traces_span_metrics_calls_total"),
                *_span_labels(target, caller, uid, span, kind, status),
            )
            label_sets[key] = labels
        return labels

    def _span_handles_for(self, labels: tuple[tuple[str, str], ...]) -> list[SimSeries]:
        handles = self._span_handles.get(labels)
        if handles is None:
            prefix = "traces_span_metrics_duration_milliseconds"
            keys = [(("__name__", "traces_span_metrics_calls_total"), *labels)]
            keys += [
                (("__name__", f"{prefix}_bucket"), *labels, ("le", _le(le))) for le in BUCKETS_MS
            ]
            keys += [(("__name__", f"{prefix}_bucket"), *labels, ("le", "+Inf"))]
            keys += [
                (("__name__", f"{prefix}_count"), *labels),
                (("__name__", f"{prefix}_sum"), *labels),
            ]
            handles = [self.store.handle(_sorted(k)) for k in keys]
            self.store.share_timestamps(handles)
            self._span_handles[labels] = handles
            self._span_instances[labels] = dict(labels).get("instance")
        return handles

    def _increments_for(self, n: int, lat: Latency) -> list[float]:
        """A span's increments over an interval of n calls: calls, each bucket, +Inf, count and
        sum (a new list). The counts depend on the latency only through its rounded shape, and
        are shared; the sum is n times this latency's own mean."""
        key = (n, _cdf_key(lat))
        counts = self._increments.get(key)
        if counts is None:
            cdf = self._cdf(lat)
            counts = [float(n)]
            counts += [float(round(n * share)) for share in cdf]
            counts += [float(n), float(n)]
            if len(self._increments) < 100_000:
                self._increments[key] = counts
        return [*counts, n * lat.mean_ms()]

    # ---- kube-state-metrics -----------------------------------------------------------------
    def _ksm(self, t: float, name: str, labels: tuple[tuple[str, str], ...], value: float) -> None:
        _put(self._ksm_series(name, labels), t, value)

    def _ksm_series(self, name: str, labels: tuple[tuple[str, str], ...]) -> SimSeries:
        s = self._ksm_handles.get((name, labels))
        if s is None:
            # honorLabels: the object's own labels win over the scrape's.
            own = {k for k, _ in labels}
            extra = tuple(kv for kv in (*KSM_TARGET, ("pod", KSM_POD)) if kv[0] not in own)
            s = self._series((("__name__", name), *labels, *extra))
            self._ksm_handles[(name, labels)] = s
        return s

    def _kube_state(self, t: float) -> None:
        c = self.cluster
        ns = ("namespace", c.namespace)
        for d in c.of_kind("Deployment"):
            name = ("deployment", d["metadata"]["name"])
            st = d.get("status") or {}
            self._ksm(
                t, "kube_deployment_spec_replicas", (name, ns), float(d["spec"].get("replicas", 1))
            )
            for metric, field_name in _DEPLOYMENT_SERIES[1:]:
                self._ksm(t, metric, (name, ns), float(st.get(field_name, 0)))
        for pod in c.of_kind("Pod"):
            self._pod_series(t, pod, c.runtime.get(pod["metadata"]["name"]))
        for h in c.of_kind("HorizontalPodAutoscaler"):
            label = ("horizontalpodautoscaler", h["metadata"]["name"])
            spec = h.get("spec") or {}
            st = h.get("status") or {}
            for metric, value in (
                ("kube_horizontalpodautoscaler_spec_max_replicas", spec.get("maxReplicas", 1)),
                ("kube_horizontalpodautoscaler_spec_min_replicas", spec.get("minReplicas", 1)),
                (
                    "kube_horizontalpodautoscaler_status_current_replicas",
                    st.get("currentReplicas", 0),
                ),
                (
                    "kube_horizontalpodautoscaler_status_desired_replicas",
                    st.get("desiredReplicas", 0),
                ),
            ):
                self._ksm(t, metric, (label, ns), float(value))
        for quota in c.of_kind("ResourceQuota"):
            st = quota.get("status") or {}
            for kind in ("hard", "used"):
                for resource, text in (st.get(kind) or {}).items():
                    amount = _amount(str(resource), str(text))
                    labels = (
                        ns,
                        ("resource", str(resource)),
                        ("resourcequota", quota["metadata"]["name"]),
                        ("type", kind),
                    )
                    self._ksm(t, "kube_resourcequota", labels, amount)

    def _pod_series(self, t: float, pod: Obj, rt: ContainerRuntime | None) -> None:
        c = self.cluster
        ns = ("namespace", c.namespace)
        name = str(pod["metadata"]["name"])
        p = ("pod", name)
        uid = ("uid", str(pod["metadata"].get("uid", "")))
        node = ("node", str(pod["spec"].get("nodeName", "")))
        ready = bool(rt is not None and c.pod_ready(pod))
        fixed = self._pod_handles.get((ns, p, uid))
        if fixed is None:
            fixed = [
                self._ksm_series("kube_pod_status_ready", (("condition", condition), ns, p, uid))
                for condition in ("true", "false", "unknown")
            ]
            fixed += [
                self._ksm_series("kube_pod_status_phase", (ns, ("phase", ph), p, uid))
                for ph in _PHASES
            ]
            self._pod_handles[(ns, p, uid)] = fixed
        for series, value in zip(fixed, (ready, not ready, False), strict=False):
            _put(series, t, float(value))
        phase = pod["status"].get("phase", "Pending")
        for series, ph in zip(fixed[3:], _PHASES, strict=True):
            _put(series, t, 1.0 if ph == phase else 0.0)
        info = tuple(
            (k, v)
            for k, v in (
                ("created_by_kind", _owner_kind(pod)),
                ("created_by_name", _owner(pod)),
                ("host_ip", str(pod["status"].get("hostIP", ""))),
                ("host_network", str(bool(pod["spec"].get("hostNetwork"))).lower()),
                ns,
                node,
                p,
                ("pod_ip", str(pod["status"].get("podIP", ""))),
                ("priority_class", str(pod["spec"].get("priorityClassName") or "")),
                uid,
            )
            if v  # Prometheus stores no label with an empty value
        )
        self._ksm(t, "kube_pod_info", info, 1.0)
        statuses = {s["name"]: s for s in pod["status"].get("containerStatuses") or []}
        for container in pod["spec"].get("containers") or []:
            cname = ("container", str(container.get("name", "")))
            status = statuses.get(cname[1], {})
            base = (cname, ns, p, uid)
            per_container = self._container_handles.get(base)
            if per_container is None:
                per_container = [self._ksm_series(m, base) for m in _CONTAINER_SERIES]
                self._container_handles[base] = per_container
            restarts, ready_series, running = per_container
            _put(restarts, t, float(status.get("restartCount", 0)))
            _put(ready_series, t, float(bool(status.get("ready"))))
            state = status.get("state") or {}
            _put(running, t, float("running" in state))
            waiting = state.get("waiting")
            if waiting and waiting.get("reason"):
                self._ksm(
                    t,
                    "kube_pod_container_status_waiting_reason",
                    (*base, ("reason", str(waiting["reason"]))),
                    1.0,
                )
            last = (status.get("lastState") or {}).get("terminated")
            if last and last.get("reason"):
                self._ksm(
                    t,
                    "kube_pod_container_status_last_terminated_reason",
                    (*base, ("reason", str(last["reason"]))),
                    1.0,
                )
            self._resources(t, container, base, node, "kube_pod_container_resource")
        for init in pod["status"].get("initContainerStatuses") or []:
            base = (("container", str(init.get("name", ""))), ns, p, uid)
            self._ksm(
                t,
                "kube_pod_init_container_status_restarts_total",
                base,
                float(init.get("restartCount", 0)),
            )
            state = init.get("state") or {}
            self._ksm(t, "kube_pod_init_container_status_running", base, float("running" in state))
            waiting = state.get("waiting")
            if waiting and waiting.get("reason") and waiting["reason"] != "PodInitializing":
                self._ksm(
                    t,
                    "kube_pod_init_container_status_waiting_reason",
                    (*base, ("reason", str(waiting["reason"]))),
                    1.0,
                )

    def _resources(
        self,
        t: float,
        container: Obj,
        base: tuple[tuple[str, str], ...],
        node: tuple[str, str],
        prefix: str,
    ) -> None:
        resources = container.get("resources") or {}
        requests = resources.get("requests") or {}
        limits = resources.get("limits") or {}
        raws = (
            requests.get("cpu"),
            requests.get("memory"),
            limits.get("cpu"),
            limits.get("memory"),
        )
        # The series and amounts are functions of the labels and the quantities as written:
        # found and parsed once per distinct set, not every scrape.
        key = (prefix, base, node, *((r.__class__, r) for r in raws))
        cacheable = True
        try:
            written = self._resource_handles.get(key)
        except TypeError:  # a quantity that is no scalar: parsed (and refused) every time
            cacheable, written = False, None
        if written is None:
            written = []
            for (section, resource, unit, parse), raw in zip(_RESOURCE_FIELDS, raws, strict=True):
                if raw is None:
                    continue
                try:
                    amount = parse(raw)
                except ValueError:
                    continue
                labels = (*base, node, ("resource", resource), ("unit", unit))
                written.append((self._ksm_series(f"{prefix}_{section}", labels), amount))
            if cacheable:
                self._resource_handles[key] = written
        for series, amount in written:
            _put(series, t, amount)

    # ---- cAdvisor ---------------------------------------------------------------------------
    def _cadvisor(self, t: float) -> None:
        c = self.cluster
        for pod in c.of_kind("Pod"):
            rt = c.runtime.get(pod["metadata"]["name"])
            if rt is None or not pod["spec"].get("nodeName") or not rt.container_ids:
                continue
            uid = str(pod["metadata"].get("uid", "")).replace("-", "_")
            ns = ("namespace", c.namespace)
            p = ("pod", str(pod["metadata"]["name"]))
            cgroup = f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{uid}.slice"
            container = main_container(pod["spec"])
            cname = str(container.get("name", ""))
            running = rt.state == "running"
            ws = float(round(rt.working_set if running else 0.0))
            # The pod's own cgroup (container="" and no image) and the application container's.
            pod_handles = self._cgroup_handles.get((cgroup, "", "", "", p[1]))
            if pod_handles is None:
                pod_base = (("container", ""), ("id", cgroup), ("image", ""), ("name", ""), ns, p)
                pod_handles = self._cgroup_series(pod_base)
                self._cgroup_handles[(cgroup, "", "", "", p[1])] = pod_handles
            _put(pod_handles[0], t, ws)
            _put(pod_handles[1], t, rt.cpu_seconds)
            # A container's cgroup counts from its own start (the pod's cgroup counts on across
            # restarts); an exited container's cgroup keeps its counts while cAdvisor still
            # reports it.
            counters = (rt.cpu_seconds, rt.cfs_periods, rt.cfs_throttled)
            before = self._pod_counters.get(p[1], (0.0, 0.0, 0.0))
            self._pod_counters[p[1]] = counters
            for cid, _started, ended in rt.container_ids:
                alive = ended == 0.0
                if not alive and t - ended > OLD_CONTAINER_SECONDS:
                    continue
                container_id = f"{cid:064x}"[-64:]
                image = str(rt.image or container.get("image", ""))
                if alive and not running:
                    continue
                own = self._containers.get((p[1], cid))
                if own is None:
                    if not alive:
                        continue  # exited before any scrape saw it
                    own = [*before, 0.0, 0.0, 0.0, 0.0]
                    self._containers[(p[1], cid)] = own
                if alive:
                    own[3] = ws
                    own[4] = counters[0] - own[0]
                    own[5] = counters[1] - own[1]
                    own[6] = counters[2] - own[2]
                else:
                    own[3] = 0.0  # its processes are gone
                base = (
                    ("container", cname),
                    ("id", f"{cgroup}/cri-containerd-{container_id}.scope"),
                    ("image", image),
                    ("name", container_id),
                    ns,
                    p,
                )
                cache_key = (cgroup, cname, container_id, image, p[1])
                handles = self._cgroup_handles.get(cache_key)
                if handles is None:
                    handles = self._cgroup_series(base)
                    self._cgroup_handles[cache_key] = handles
                _put(handles[0], t, own[3])
                _put(handles[1], t, own[4])
                if cpu_limit_of(container) is not None:
                    self._set(
                        (("__name__", "container_cpu_cfs_periods_total"), *base, *KUBELET_TARGET),
                        t,
                        float(int(own[5])),
                    )
                    self._set(
                        (
                            ("__name__", "container_cpu_cfs_throttled_periods_total"),
                            *base,
                            *KUBELET_TARGET,
                        ),
                        t,
                        float(int(own[6])),
                    )

    def _cgroup_series(self, base: tuple[tuple[str, str], ...]) -> list[SimSeries]:
        """A cgroup's working-set and CPU usage series (the ones cAdvisor always writes)."""
        return [
            self._series(
                (("__name__", "container_memory_working_set_bytes"), *base, *KUBELET_TARGET)
            ),
            self._series(
                (
                    ("__name__", "container_cpu_usage_seconds_total"),
                    ("cpu", "total"),
                    *base,
                    *KUBELET_TARGET,
                )
            ),
        ]

    # ---- logs -------------------------------------------------------------------------------
    def _write_logs(self, t: float, dt: float, traffic: TrafficState) -> None:
        c = self.cluster
        by_service: dict[str, list[tuple[str, OpStats]]] = {}
        for (svc, name), stats in traffic.ops.items():
            by_service.setdefault(svc, []).append((name, stats))
        for pod in c.of_kind("Pod"):
            pname = pod["metadata"]["name"]
            rt = c.runtime.get(pname)
            if rt is None:
                continue
            container = main_container(pod["spec"])
            svc = _owner(pod).rsplit("-", 1)[0]
            spec = SERVICE_BY_NAME.get(str(container.get("name", "")))
            loki = None
            if spec is not None and spec.instrumented:
                loki = {
                    "k8s_deployment_name": svc,
                    "k8s_namespace_name": c.namespace,
                    "k8s_pod_name": pname,
                    "k8s_replicaset_name": _owner(pod),
                    "service_instance_id": str(pod["metadata"].get("uid", "")),
                    "service_name": svc,
                    "service_namespace": SERVICE_NAMESPACE,
                }
            if rt.last_finished_at > t - dt and rt.crash_log:
                self.logs.write(pname, loki, rt.last_finished_at, rt.crash_log)
            if rt.init_log and not rt.init_done:
                self.logs.write(pname, None, t - dt / 2, rt.init_log[-1])
            if rt.state != "running":
                continue
            if self._started_logged.get(pname) != rt.started_at:
                self._started_logged[pname] = rt.started_at
                self.logs.write(pname, loki, max(rt.started_at, t - dt), _startup_line(svc))
            if not rt.ready:
                continue
            served = [(stats.rate, name, stats) for name, stats in by_service.get(svc, [])]
            busiest = max(served, default=None)
            if busiest is not None and busiest[0] > 0:
                self.logs.write(pname, loki, t - dt / 2, _info_line(svc, busiest[1], busiest[2], t))
            for _, name, stats in served:
                if stats.rate * dt * stats.error >= 0.5 and stats.causes:
                    _, cause = max(stats.causes)
                    self.logs.write(pname, loki, t - dt / 3, _error_line(svc, name, cause, t))

    # ---- traces -----------------------------------------------------------------------------
    def traces(
        self,
        service: str,
        operation: str | None,
        tags: dict[str, str],
        start: float,
        end: float,
        limit: int,
        seed: int,
    ) -> list[dict[str, Any]]:
        """Jaeger traces touching a service within [start, end], newest first.

        Args:
            service: A span's process serviceName must equal this.
            operation: When given, a span of that service must have this operationName.
            tags: Every key=value must appear as a tag of some span of the trace.
            start: Earliest trace start (epoch seconds).
            end: Latest trace start.
            limit: Most traces returned.
            seed: The environment seed (traces are a pure function of seed and interval).
        """
        out: list[dict[str, Any]] = []
        for index in range(len(self.history) - 1, -1, -1):
            t, traffic = self.history[index]
            if t < start - 15 or t > end + 15:
                continue
            for route in sorted(k[1] for k in traffic.ops if k[0] == PROXY):
                stats = traffic.ops[(PROXY, route)]
                if stats.rate <= 0 or service not in _ROUTE_SERVICES[route]:
                    continue
                trace = _TraceBuilder(traffic, random.Random(f"{seed}/{index}/{route}"), t).build(
                    route
                )
                if _trace_matches(trace, service, operation, tags):
                    out.append(trace)
                    if len(out) >= limit:
                        return out
        return out


def server_span_name(service: str, operation: str) -> str:
    """The span name a server operation is exported under (after the collector's renaming)."""
    op = _OPS.get((service, operation))
    return op.exported if op is not None else operation


def client_span_name(caller: str, call: Call) -> str:
    """The span name of a client call as exported."""
    return call.span or call.operation


def _span_labels(
    target: tuple[tuple[str, str], ...], svc: str, uid: str, span: str, kind: str, status: str
) -> tuple[tuple[str, str], ...]:
    """A span-metric series' labels (sorted): the scrape's, the exporter's and the connector's."""
    return _sorted(
        (
            *[(k, v) for k, v in target],
            ("exported_instance", uid),
            ("exported_job", f"{SERVICE_NAMESPACE}/{svc}"),
            *SPAN_SCOPE,
            ("service_name", svc),
            ("span_kind", kind),
            ("span_name", span),
            ("status_code", status),
        )
    )


def _sorted(labels: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """Labels in store order: `__name__` first, then by name."""
    rest = [kv for kv in labels if kv[0] != "__name__"]
    rest.sort()
    if len(rest) == len(labels) - 1 and labels[0][0] == "__name__":
        return (labels[0], *rest)
    return (*[kv for kv in labels if kv[0] == "__name__"], *rest)


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


def _share(n: int, parts: int, index: int) -> int:
    return n // parts + (1 if index < n % parts else 0)


def _le(bound: float) -> str:
    return str(bound)


def cpu_limit_of(container: Obj) -> float | None:
    """A container's CPU limit in cores (None: none, so cAdvisor writes no CFS series)."""
    raw = ((container.get("resources") or {}).get("limits") or {}).get("cpu")
    try:
        return parse_cpu(raw) if raw is not None else None
    except ValueError:
        return None


def _amount(resource: str, text: str) -> float:
    try:
        if resource.endswith("cpu"):
            return parse_cpu(text)
        if resource.endswith("memory"):
            return parse_memory(text)
        return float(text)
    except ValueError:
        return 0.0


def _cdf_key(lat: Latency) -> tuple[float, float, float]:
    return (round(lat.median_ms, 1), round(lat.tail, 3), round(lat.tail_ms, 1))


def _lognormal_cdf(x: float, median: float) -> float:
    return 0.5 * (1.0 + math.erf((math.log(x) - math.log(median)) / (SIGMA * math.sqrt(2.0))))


def _float(text: object) -> float | None:
    try:
        return float(str(text))
    except (TypeError, ValueError):
        return None


def _owner(pod: Obj) -> str:
    refs = pod["metadata"].get("ownerReferences") or [{}]
    return str(refs[0].get("name", ""))


def _owner_kind(pod: Obj) -> str:
    refs = pod["metadata"].get("ownerReferences") or [{}]
    return str(refs[0].get("kind", ""))


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


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


def _info_line(svc: str, op: str, stats: OpStats, t: float) -> str:
    message = f"{op} served at {stats.rate:.2f}/s, median {stats.latency.median_ms:.0f} ms"
    return _format(svc, "info", message, t - 7)


def _error_line(svc: str, op: str, cause: str, t: float) -> str:
    return _format(svc, "error", f"{op} failed: {cause}", t - 5)


class _TraceBuilder:
    """Builds one Jaeger trace for a proxy route from an interval's traffic."""

    def __init__(self, traffic: TrafficState, rng: random.Random, t: float) -> None:
        self.traffic = traffic
        self.rng = rng
        self.spans: list[dict[str, Any]] = []
        self.processes: dict[str, dict[str, Any]] = {}
        self.trace_id = f"{rng.getrandbits(128):032x}"
        self.t0 = int((t - 15 + rng.random() * 14) * 1_000_000)

    def _process(self, svc: str) -> str:
        for pid, proc in self.processes.items():
            if proc["serviceName"] == svc:
                return pid
        pid = f"p{len(self.processes) + 1}"
        spec = SERVICE_BY_NAME.get(svc)
        self.processes[pid] = {
            "serviceName": svc,
            "tags": [
                {
                    "key": "telemetry.sdk.language",
                    "type": "string",
                    "value": (spec.language if spec else ""),
                },
                {"key": "service.namespace", "type": "string", "value": "opentelemetry-demo"},
            ],
        }
        return pid

    def _span(
        self,
        svc: str,
        name: str,
        kind: str,
        start: int,
        duration: int,
        parent: str | None,
        error: str,
        span_id: str | None = None,
        at: int | None = None,
    ) -> str:
        """Record a span (at a list position when given); returns its id."""
        span_id = span_id or f"{self.rng.getrandbits(64):016x}"
        tags: list[dict[str, Any]] = [{"key": "span.kind", "type": "string", "value": kind}]
        if error:
            tags.append({"key": "error", "type": "bool", "value": True})
            tags.append({"key": "otel.status_code", "type": "string", "value": "ERROR"})
            tags.append({"key": "otel.status_description", "type": "string", "value": error})
        span = {
            "traceID": self.trace_id,
            "spanID": span_id,
            "operationName": name,
            "references": (
                [{"refType": "CHILD_OF", "traceID": self.trace_id, "spanID": parent}]
                if parent
                else []
            ),
            "startTime": start,
            "duration": max(duration, 1),
            "tags": tags,
            "logs": [],
            "processID": self._process(svc),
            "warnings": None,
        }
        if at is None:
            self.spans.append(span)
        else:
            self.spans.insert(at, span)
        return span_id

    def _sample(self, lat: Latency) -> float:
        median = lat.tail_ms if lat.tail > 0 and self.rng.random() < lat.tail else lat.median_ms
        return median * math.exp(SIGMA * self.rng.gauss(0.0, 1.0))

    def build(self, route: str) -> dict[str, Any]:
        self._serve(PROXY, route, self.t0, None)
        return {
            "traceID": self.trace_id,
            "spans": sorted(self.spans, key=lambda s: (s["startTime"], s["spanID"])),
            "processes": self.processes,
            "warnings": None,
        }

    def _serve(self, svc: str, name: str, start: int, parent: str | None) -> tuple[int, str]:
        """Emit the server span and its subtree; returns (duration us, error text)."""
        op = _OPS[(svc, name)]
        stats = self.traffic.ops.get((svc, name), OpStats())
        spec = SERVICE_BY_NAME.get(svc)
        instrumented = spec is not None and spec.instrumented
        own_us = int(
            _own_ms(op, stats, self.traffic) * 1000 * math.exp(SIGMA * self.rng.gauss(0, 1))
        )
        span_slot = len(self.spans)
        span_id = f"{self.rng.getrandbits(64):016x}" if instrumented else (parent or "")
        cursor = start + own_us // 2
        error = ""
        for call in op.calls:
            edge = self.traffic.edges.get((svc, name, call.service, call.operation))
            if edge is None:
                continue
            for _ in range(max(1, round(call.count))):
                dur, cause = self._call(svc, call, edge, cursor, span_id, instrumented)
                if call.mode == "sync" and cause:
                    error = error or f"{call.operation} on {call.service}: {cause}"
                if call.mode != "async":
                    cursor += dur + 400
        own_fail = 1.0 - (1.0 - stats.error) / max(_sync_survival(op, self.traffic), 1e-9)
        if not error and self.rng.random() < max(own_fail, 0.0) and stats.causes:
            error = max(stats.causes)[1]
        duration = cursor - start + own_us // 2
        if instrumented:
            kind = "consumer" if op.kind == "SPAN_KIND_CONSUMER" else "server"
            self._span(
                svc,
                server_span_name(svc, name),
                kind,
                start,
                duration,
                parent,
                error,
                span_id=span_id,
                at=span_slot,
            )
        return duration, error

    def _call(
        self, svc: str, call: Call, edge: EdgeStats, start: int, parent: str, instrumented: bool
    ) -> tuple[int, str]:
        """One outgoing call: its client span and the callee's subtree; (duration us, error)."""
        name = client_span_name(svc, call)
        kind = "producer" if call.service == "kafka" else "client"
        # Flag evaluations answered from the SDK's cache export no client span.
        instrumented = instrumented and bool(call.span)
        if self.rng.random() < edge.net_fail:
            duration = int(self._sample(edge.latency) * 1000)
            if instrumented:
                self._span(svc, name, kind, start, duration, parent, edge.reason)
            return duration, edge.reason
        client_id = f"{self.rng.getrandbits(64):016x}" if instrumented else parent
        span_slot = len(self.spans)
        if (call.service, call.operation) in _OPS:
            duration, cause = self._serve(call.service, call.operation, start + 200, client_id)
        else:
            duration, cause = int(self._sample(edge.latency) * 1000), ""
        duration += int(edge.delay_ms * 1000)
        callee = self.traffic.ops.get((call.service, call.operation))
        # Calls the reached program does not understand fail without a server-side span error.
        misrouted = edge.error - (callee.error if callee is not None else 0.0)
        if not cause and misrouted > 0 and self.rng.random() < misrouted:
            cause = edge.reason or "call failed"
        if instrumented:
            shown = cause if call.mode != "async" else ""
            self._span(svc, name, kind, start, duration + 400, parent, shown, client_id, span_slot)
        if call.service == "kafka":
            self._consumers(client_id, start + duration + 1000)
        return duration, cause

    def _consumers(self, parent: str, start: int) -> None:
        for consumer in KAFKA_CONSUMERS:
            if self.traffic.kafka_consumed.get(consumer.group, 0.0) <= 0:
                continue
            lag_us = int(self.traffic.kafka_lag.get(consumer.group, 0.0) * 50_000)
            self._serve(consumer.service, consumer.operation, start + lag_us, parent)


def _own_ms(op: Operation, stats: OpStats, traffic: TrafficState) -> float:
    """An operation's own time now: its latency minus what its downstream calls take."""
    if stats.rate <= 0:
        return op.latency_ms
    downstream = 0.0
    for call in op.calls:
        edge = traffic.edges.get((op.service, op.name, call.service, call.operation))
        if edge is not None and call.mode != "async":
            downstream += call.count * edge.latency.median_ms
    return max(stats.latency.median_ms - downstream, 0.1)


def _sync_survival(op: Operation, traffic: TrafficState) -> float:
    ok = 1.0
    for call in op.calls:
        if call.mode != "sync":
            continue
        edge = traffic.edges.get((op.service, op.name, call.service, call.operation))
        if edge is not None:
            ok *= (1 - edge.error) ** call.count
    return ok


def _trace_matches(
    trace: dict[str, Any], service: str, operation: str | None, tags: dict[str, str]
) -> bool:
    procs = trace["processes"]
    spans = [s for s in trace["spans"] if procs[s["processID"]]["serviceName"] == service]
    if not spans:
        return False
    if operation and not any(s["operationName"] == operation for s in spans):
        return False
    for key, value in tags.items():
        found = any(
            tag["key"] == key and str(tag["value"]).lower() == value.lower()
            for s in trace["spans"]
            for tag in s["tags"]
        )
        if not found:
            return False
    return True
