"""PromQL engine speed: 30 virtual minutes of 2,000 series at 15-s scrapes, queried like alerts."""

from __future__ import annotations

import time

from benchmarks.harness import Figure, median_seconds, peak_rss_mb
from itbench.environments.sim.promql import PromQLEngine
from itbench.environments.sim.series import MemorySeriesStore

SERVICES = 20
SPANS = 5
BUCKETS = ("5", "10", "25", "50", "75", "100", "250", "500", "750", "1000", "2500", "5000")
SCRAPE_SECONDS = 15.0
MINUTES = 30
END = MINUTES * 60.0

ERROR_RATIO = (
    'sum by (service_name) (rate(traces_span_metrics_calls_total{status_code="STATUS_CODE_ERROR"}'
    "[5m])) / sum by (service_name) (rate(traces_span_metrics_calls_total[5m])) > 0.05"
)
LATENCY_P95 = (
    "histogram_quantile(0.95, sum by (le, service_name) "
    "(rate(traces_span_metrics_duration_milliseconds_bucket[5m]))) > 500"
)
NOT_READY = 'sum by (namespace, pod) (kube_pod_status_ready{condition="false"}) > 0'
MEMORY = 'max by (pod) (max_over_time(container_memory_working_set_bytes{container!=""}[5m]))'


def build_store() -> MemorySeriesStore:
    """Fill a store the way the simulator scrapes: every series gets a sample every 15 s."""
    store = MemorySeriesStore()
    series: list[tuple[dict[str, str], float]] = []
    for s in range(SERVICES):
        service = f"service-{s:02d}"
        for span in range(SPANS):
            base = {"service_name": service, "span_name": f"op-{span}"}
            for code, rate in (("STATUS_CODE_UNSET", 10.0), ("STATUS_CODE_ERROR", 0.1 * (s % 3))):
                labels = {"__name__": "traces_span_metrics_calls_total", **base}
                series.append(({**labels, "status_code": code}, rate))
            for i, le in enumerate((*BUCKETS, "+Inf")):
                share = (i + 1) / (len(BUCKETS) + 1)
                labels = {"__name__": "traces_span_metrics_duration_milliseconds_bucket", **base}
                series.append(({**labels, "le": le}, 10.0 * share))
        for pod in range(5):
            pod_labels = {"namespace": "otel-demo", "pod": f"{service}-{pod}"}
            series.append(
                (
                    {
                        "__name__": "container_memory_working_set_bytes",
                        "container": service,
                        **pod_labels,
                    },
                    0.0,
                )
            )
            series.append(
                (
                    {
                        "__name__": "container_cpu_usage_seconds_total",
                        "container": service,
                        **pod_labels,
                    },
                    0.2,
                )
            )
            for condition in ("true", "false", "unknown"):
                series.append(
                    (
                        {"__name__": "kube_pod_status_ready", "condition": condition, **pod_labels},
                        0.0,
                    )
                )
    steps = int(END / SCRAPE_SECONDS) + 1
    for step in range(steps):
        t = step * SCRAPE_SECONDS
        for labels, slope in series:
            value = slope * t if slope else (1.0 if labels.get("condition") == "true" else 2e8)
            store.append(labels, t, value)
    return store


def run() -> list[Figure]:
    """Measure store fill, the alert queries at one instant, and a 30-minute range query."""
    start = time.perf_counter()
    store = build_store()
    fill = time.perf_counter() - start
    engine = PromQLEngine(store)
    queries = (ERROR_RATIO, LATENCY_P95, NOT_READY, MEMORY)

    def alert_tick() -> None:
        for query in queries:
            engine.instant_vector(query, END)

    tick = median_seconds(alert_tick, repeat=7)
    latency = median_seconds(lambda: engine.instant_vector(LATENCY_P95, END), repeat=7)
    ranged = median_seconds(
        lambda: engine.range(ERROR_RATIO.removesuffix(" > 0.05"), 0.0, END, SCRAPE_SECONDS),
        repeat=3,
    )
    return [
        Figure("promql: series in store", float(len(store)), "series"),
        Figure("promql: fill 30 min x 2,000 series @15 s", fill, "s", target=2.0),
        Figure("promql: 4 alert queries at one instant", tick * 1000.0, "ms", target=50.0),
        Figure("promql: p95 histogram_quantile over 1,300 buckets", latency * 1000.0, "ms", 25.0),
        Figure("promql: 30-min range query, 121 steps", ranged, "s", target=2.0),
        Figure("promql: peak memory", peak_rss_mb(), "MB", target=500.0),
    ]
