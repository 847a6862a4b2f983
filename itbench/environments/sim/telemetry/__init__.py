"""The twin's telemetry: scraped series, logs and Jaeger traces shaped as the pinned stack stores
them.

Metrics carry the labels of their scrape as kube-prometheus-stack writes them: span metrics and
the kafkametrics receiver's lag from the collector's Prometheus exporter (per emitting pod, with
`exported_job`/`exported_instance`, only while the collector runs), kube-state-metrics (its
target's labels beside the object's), cAdvisor (container IDs; a restarted container's old series
lingers briefly; CFS series only under a CPU limit). Logs are what the collector ships to Loki
over OTLP (instrumented services only, Loki's OTLP labels); `kubectl logs` sees every pod. Traces
are rebuilt on demand from each interval's traffic, deterministically from the seed.

The package: `store` (the series and their staleness), `logs` (the log book and log lines),
`traces` (span names and the trace builder), and the `scraper` that writes them, with its targets
in `collector` (the collector's exporter) and `cluster_metrics` (kube-state-metrics, cAdvisor)
over the state in `state`.
"""

from itbench.environments.sim.telemetry.cluster_metrics import (
    KSM_POD,
    KSM_TARGET,
    KUBELET_TARGET,
    OLD_CONTAINER_SECONDS,
    ClusterMetrics,
    cpu_limit_of,
)
from itbench.environments.sim.telemetry.collector import (
    BUCKETS_MS,
    KAFKA_SCOPE,
    SPAN_SCOPE,
    CollectorExporter,
)
from itbench.environments.sim.telemetry.logs import MAX_LINES_PER_STREAM, LogBook
from itbench.environments.sim.telemetry.scraper import Scraper
from itbench.environments.sim.telemetry.state import ScraperState
from itbench.environments.sim.telemetry.store import SimSeries, TelemetryStore
from itbench.environments.sim.telemetry.traces import (
    SERVICE_NAMESPACE,
    SIGMA,
    client_span_name,
    server_span_name,
)

__all__ = [
    "BUCKETS_MS",
    "KAFKA_SCOPE",
    "KSM_POD",
    "KSM_TARGET",
    "KUBELET_TARGET",
    "MAX_LINES_PER_STREAM",
    "OLD_CONTAINER_SECONDS",
    "SERVICE_NAMESPACE",
    "SIGMA",
    "SPAN_SCOPE",
    "ClusterMetrics",
    "CollectorExporter",
    "LogBook",
    "Scraper",
    "ScraperState",
    "SimSeries",
    "TelemetryStore",
    "client_span_name",
    "cpu_limit_of",
    "server_span_name",
]
