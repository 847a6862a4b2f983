"""Jaeger traces rebuilt from an interval's traffic: span names as the collector exports them,
the trace builder, and the matching of a trace search."""

from __future__ import annotations

import math
import random
from typing import Any

from itbench.core.shop import (
    KAFKA_CONSUMERS,
    OPERATIONS,
    PROXY,
    SERVICE_BY_NAME,
    Call,
    Operation,
)
from itbench.environments.sim.traffic import EdgeStats, Latency, OpStats, TrafficState

SERVICE_NAMESPACE = "otel-demo"
"""The chart's `resource.opentelemetry.io/service.namespace` pod annotation, which the collector's
k8sattributes processor (`otel_annotations: true`) puts on every span, metric and log as
service.namespace."""

SIGMA = 0.4
"""Log-normal shape of every latency distribution."""

_OPS: dict[tuple[str, str], Operation] = {(o.service, o.name): o for o in OPERATIONS}


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


def server_span_name(service: str, operation: str) -> str:
    """The span name a server operation is exported under (after the collector's renaming)."""
    op = _OPS.get((service, operation))
    return op.exported if op is not None else operation


def client_span_name(caller: str, call: Call) -> str:
    """The span name of a client call as exported."""
    return call.span or call.operation


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
                {"key": "service.namespace", "type": "string", "value": SERVICE_NAMESPACE},
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
