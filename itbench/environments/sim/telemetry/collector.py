"""The collector's Prometheus exporter as the Scraper writes it: span metrics of the
spanmetrics connector (counted per interval in the collector's memory, exported at each scrape)
and the kafkametrics receiver's consumer lag."""

from __future__ import annotations

import math
from bisect import bisect_left
from operator import add

from itbench.core.alert_rules import KAFKA_LAG_METRIC
from itbench.core.shop import (
    COLLECTOR,
    KAFKA_CONSUMERS,
    OPERATIONS,
    ORDERS_TOPIC,
    SERVICE_BY_NAME,
)
from itbench.environments.sim.objects import Obj, main_container
from itbench.environments.sim.registry import image_program
from itbench.environments.sim.series import note_sample
from itbench.environments.sim.telemetry.cluster_metrics import ClusterMetrics, _owner
from itbench.environments.sim.telemetry.state import SpanKey
from itbench.environments.sim.telemetry.store import (
    SimSeries,
    _append_count,
    _changed,
    _sorted,
)
from itbench.environments.sim.telemetry.traces import SERVICE_NAMESPACE, SIGMA, client_span_name
from itbench.environments.sim.traffic import Latency, TrafficState
from itbench.stack import chart_pin

BUCKETS_MS = (2, 4, 6, 8, 10, 50, 100, 200, 400, 800, 1000, 1400, 2000, 5000, 10000, 15000)
"""The spanmetrics connector's default explicit histogram buckets, in milliseconds."""
SPAN_SCOPE = (("otel_scope_name", "spanmetricsconnector"),)
KAFKA_SCOPE = (
    (
        "otel_scope_name",
        "github.com/open-telemetry/opentelemetry-collector-contrib/receiver/kafkametricsreceiver",
    ),
    ("otel_scope_version", str(chart_pin("opentelemetry-collector")["appVersion"])),
)
# Pure functions of their keys, shared by every twin in the process (read-only values): the
# bucket fractions of a latency, the expected bucket increments of a span count, and the shape
# (`_cdf_key`) of a latency.
_CDF_CACHE: dict[tuple[float, float, float], list[float]] = {}
_INCREMENTS: dict[tuple[int, tuple[float, float, float]], list[float]] = {}
_SHAPES: dict[tuple[float, float, float], tuple[float, float, float]] = {}
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


class CollectorExporter(ClusterMetrics):
    """The Scraper's target that is the collector's Prometheus exporter (span metrics and
    Kafka lag, only while the collector runs)."""

    def _count(self, key: tuple[str, ...], expected: float) -> int:
        jitter = 1.0 + (self.rng.random() - 0.5) * 0.1
        value = expected * jitter + self._carry.get(key, 0.0)
        n = int(value)
        self._carry[key] = value - n
        return n

    def _cdf(self, lat: Latency) -> list[float]:
        key = _cdf_key(lat)
        cached = _CDF_CACHE.get(key)
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
        if len(_CDF_CACHE) < 100_000:
            _CDF_CACHE[key] = out
        return out

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
        spans_of = self._span_keys.setdefault(target, {})
        uids = {
            svc: [str(pod["metadata"].get("uid", "")) for pod in pods]
            for svc, pods in serving.items()
        }
        for (svc, name), stats in traffic.ops.items():
            spans = _SERVER_SPANS.get((svc, name))
            pods = serving.get(svc)
            if spans is None or not pods:
                continue
            n = self._count(("srv", svc, name), stats.rate * dt)
            errors = self._count(("err", svc, name), n * stats.error) if stats.error > 0 else 0
            errors = min(errors, n)
            latency = stats.latency
            shape = _cdf_key(latency)
            mean_ms = latency.mean_ms()
            for index, uid in enumerate(uids[svc]):
                for (status, key), count in zip(
                    spans,
                    (_share(n - errors, len(pods), index), _share(errors, len(pods), index)),
                    strict=True,
                ):
                    span = spans_of.get((uid, key))
                    if span is None:
                        span = SpanKey(_span_labels(target, svc, uid, key[1], key[2], status))
                        spans_of[(uid, key)] = span
                    # An error series is exported from its first error on (a span's series
                    # are written only by this span, so it exists once it has handles).
                    if (
                        not count
                        and status == "STATUS_CODE_ERROR"
                        and span.handles is None
                        and span not in server
                    ):
                        continue
                    increments = self._increments_for(count, latency, shape, mean_ms)
                    total = server.get(span)
                    server[span] = (
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
            span_name = client_span_name(caller, edge.call)
            n = self._count(("cli", caller, caller_op, callee, op_name), edge.rate * dt)
            errors = min(
                n, self._count(("cer", caller, caller_op, callee, op_name), n * edge.error)
            )
            for index, uid in enumerate(uids[caller]):
                ok = self._client_key(spans_of, target, caller, uid, span_name, client_kind, False)
                client[ok] = client.get(ok, 0.0) + _share(n - errors, len(pods), index)
                failed = self._client_key(
                    spans_of, target, caller, uid, span_name, client_kind, True
                )
                err = _share(errors, len(pods), index)
                if err or failed.handles is not None or failed in client:
                    client[failed] = client.get(failed, 0.0) + err

    def _write_spans(self, t: float, target: tuple[tuple[str, str], ...]) -> None:
        """Write the collector exporter's span series at a scrape: every count so far."""
        instance = dict(target)["instance"]
        # The connector counts in the collector's memory: a restarted collector container
        # starts every count at zero again (a counter reset).
        restarted = self._exporter_runs.get(instance, self._collector_restarts) != (
            self._collector_restarts
        )
        self._exporter_runs[instance] = self._collector_restarts
        server: dict[SpanKey, list[float]] = {}
        client: dict[SpanKey, float] = {}
        if self._pending_run == (instance, self._collector_restarts):
            server, client = self._pending_server, self._pending_client
        self._pending_server, self._pending_client = {}, {}
        # The connector keeps exporting every series it has seen (cumulative, no expiry), so a
        # service that stops serving keeps constant series: their rate falls to zero.
        for span in self._server_spans:
            if span.instance == instance and span not in server:
                server[span] = [0.0] * (len(BUCKETS_MS) + 4)
        for span, increments in server.items():
            handles = self._span_handles_for(span)
            ts = handles[0].timestamps
            if handles[0].group is handles and not (ts and ts[-1] == t):
                ts.append(t)  # shared by every series of the span
                for series, inc in zip(handles, increments, strict=True):
                    values = series.values
                    _append_count(values, restarted, inc)
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
                _append_count(values, restarted, inc)
                note_sample(series, len(values) - 1, values[-1])
                if len(values) < 2 or values[-1] != values[-2]:
                    _changed(series, t)
        written = self._client_keys.setdefault(instance, set())
        for span in written:
            if span not in client:
                client[span] = 0.0
        for span, inc in client.items():
            calls = span.handles
            if calls is None:
                calls = [self._series(span.labels)]
                span.handles = calls
            self._add(calls[0], t, inc, restarted)
            written.add(span)

    @staticmethod
    def _client_key(
        spans_of: dict[tuple[object, ...], SpanKey],
        target: tuple[tuple[str, str], ...],
        caller: str,
        uid: str,
        span: str,
        kind: str,
        error: bool,
    ) -> SpanKey:
        """The calls series of a client span of an emitting pod (one per collector target)."""
        key = (uid, caller, span, kind, error)
        found = spans_of.get(key)
        if found is None:
            status = "STATUS_CODE_ERROR" if error else "STATUS_CODE_UNSET"
            found = SpanKey(
                (
                    ("__name__", "traces_span_metrics_calls_total"),
                    *_span_labels(target, caller, uid, span, kind, status),
                )
            )
            spans_of[key] = found
        return found

    def _span_handles_for(self, span: SpanKey) -> list[SimSeries]:
        handles = span.handles
        if handles is None:
            labels = span.labels
            prefix = "traces_span_metrics_duration_milliseconds"
            # The span's labels are in store order (`_span_labels`), so each key is too, with
            # the buckets' `le` in its place among them.
            at = bisect_left([name for name, _ in labels], "le")
            head, tail = labels[:at], labels[at:]
            keys = [(("__name__", "traces_span_metrics_calls_total"), *labels)]
            keys += [
                (("__name__", f"{prefix}_bucket"), *head, ("le", _le(le)), *tail)
                for le in BUCKETS_MS
            ]
            keys += [(("__name__", f"{prefix}_bucket"), *head, ("le", "+Inf"), *tail)]
            keys += [
                (("__name__", f"{prefix}_count"), *labels),
                (("__name__", f"{prefix}_sum"), *labels),
            ]
            handles = [self.store.handle(k) for k in keys]
            self.store.share_timestamps(handles)
            span.handles = handles
            self._server_spans.append(span)
        return handles

    def _increments_for(
        self, n: int, lat: Latency, shape: tuple[float, float, float], mean_ms: float
    ) -> list[float]:
        """A span's increments over an interval of n calls: calls, each bucket, +Inf, count and
        sum (a new list). The counts depend on the latency only through its rounded shape
        (`_cdf_key`), and are shared; the sum is n times this latency's own mean (`mean_ms`)."""
        key = (n, shape)
        counts = _INCREMENTS.get(key)
        if counts is None:
            cdf = self._cdf(lat)
            counts = [float(n)]
            counts += [float(round(n * share)) for share in cdf]
            counts += [float(n), float(n)]
            if len(_INCREMENTS) < 100_000:
                _INCREMENTS[key] = counts
        return [*counts, n * mean_ms]


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


def _share(n: int, parts: int, index: int) -> int:
    return n // parts + (1 if index < n % parts else 0)


def _le(bound: float) -> str:
    return str(bound)


def _cdf_key(lat: Latency) -> tuple[float, float, float]:
    """A latency's shape as the bucket fractions depend on it: rounded, so that nearby
    latencies share their cached fractions. Rounding to decimals goes through the float's
    decimal digits (thousands of instructions a value), and a run sees a few hundred distinct
    latencies a thousand times each: the shapes are kept by the exact values."""
    exact = (lat.median_ms, lat.tail, lat.tail_ms)
    shape = _SHAPES.get(exact)
    if shape is None:
        shape = (round(exact[0], 1), round(exact[1], 3), round(exact[2], 1))
        if len(_SHAPES) < 100_000:
            _SHAPES[exact] = shape
    return shape


def _lognormal_cdf(x: float, median: float) -> float:
    return 0.5 * (1.0 + math.erf((math.log(x) - math.log(median)) / (SIGMA * math.sqrt(2.0))))
