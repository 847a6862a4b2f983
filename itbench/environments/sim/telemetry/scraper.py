"""The Scraper: each interval's traffic and the cluster's state turned into scraped series
(through its targets), log lines and the material traces are rebuilt from."""

from __future__ import annotations

import random
from typing import Any

from itbench.core.shop import PROXY, SERVICE_BY_NAME
from itbench.environments.sim.objects import main_container
from itbench.environments.sim.telemetry.cluster_metrics import _owner
from itbench.environments.sim.telemetry.collector import CollectorExporter
from itbench.environments.sim.telemetry.logs import _error_line, _startup_line, info_line
from itbench.environments.sim.telemetry.traces import (
    _ROUTE_SERVICES,
    SERVICE_NAMESPACE,
    _trace_matches,
    _TraceBuilder,
)
from itbench.environments.sim.traffic import OpStats, TrafficState


class Scraper(CollectorExporter):
    """Turns the cluster and each interval's traffic into series, logs and trace material."""

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
            # A stream keeps the labels of its first line: later lines need none.
            if spec is not None and spec.instrumented and not self.logs.has(pname):
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
                self.logs.append(pname, loki, info_line(t - dt / 2, svc, busiest[1], busiest[2], t))
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
