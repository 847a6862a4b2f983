"""Observations on a trial session: alerts, PromQL, LogQL, traces and the topology.

Answers keep the shapes of the upstream APIs (Prometheus, Loki, Jaeger) so that agents built
around them read what they expect.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from itbench.gateway.errors import bad_parameter
from itbench.gateway.operations.calls import Origin, audited, require_signal
from itbench.gateway.operations.params import (
    bounded_int,
    parse_duration,
    parse_tags,
    parse_time,
)
from itbench.gateway.operations.queries import bad_query, vet_logql, vet_promql
from itbench.gateway.schemas import TopologyView
from itbench.gateway.sessions import TrialSession
from itbench.gateway.topology import topology_view

MAX_LOG_LINES = 5000
"""The most log lines one query returns."""
MAX_TRACES = 200
"""The most traces one search returns."""
MAX_POINTS = 11000
"""The most points per series of a range query (Prometheus' own limit)."""
QUERY_AUDIT_CHARS = 500
"""How much of a query the audit trail keeps."""


def alerts(session: TrialSession, origin: Origin) -> dict[str, Any]:
    """Active alerts, in the shape of Prometheus' /api/v1/alerts."""
    with audited(session, origin, "observe.alerts", session.virtual_cost.observation):
        items = [
            {
                "labels": {"alertname": a.alertname, **a.labels},
                "annotations": a.annotations,
                "state": a.state.value,
                "activeAt": a.active_at.isoformat(),
                "value": repr(float(a.value)),
            }
            for a in session.env.alerts()
        ]
        return {"status": "success", "data": {"alerts": items}}


def instant_query(
    session: TrialSession, origin: Origin, query: str, time: str | None = None
) -> dict[str, Any]:
    """Instant PromQL query; the Prometheus HTTP API response.

    Raises:
        BadInputError: A bad time or query (`bad-query` naming `query`).
    """
    with audited(
        session, origin, "observe.metrics.query", session.virtual_cost.observation
    ) as call:
        call.detail["query"] = query[:QUERY_AUDIT_CHARS]
        require_signal(session, "metrics")
        at = parse_time(time, session.env.now(), "time")
        vet_promql(query)
        try:
            data = session.env.query_metrics(query, at)
        except ValueError as exc:
            raise bad_query(exc, "query", query) from exc
        return {"status": "success", "data": data}


def range_query(
    session: TrialSession,
    origin: Origin,
    query: str,
    start: str | None = None,
    end: str | None = None,
    step: str | None = None,
) -> dict[str, Any]:
    """Range PromQL query (default: the last 30 min at 15 s); the Prometheus HTTP API response.

    Raises:
        BadInputError: Bad times, a step that gives too many points, or a bad query.
    """
    with audited(
        session, origin, "observe.metrics.query_range", session.virtual_cost.observation
    ) as call:
        call.detail["query"] = query[:QUERY_AUDIT_CHARS]
        require_signal(session, "metrics")
        now = session.env.now()
        t_end = parse_time(end, now, "end")
        t_start = parse_time(start, t_end - timedelta(minutes=30), "start")
        step_s = parse_duration(step or "15s", "step")
        if t_start > t_end:
            raise bad_parameter("start", "must not be after end", "after end")
        if (t_end - t_start).total_seconds() / step_s > MAX_POINTS:
            raise bad_parameter(
                "step",
                f"more than {MAX_POINTS} points per series; raise step or narrow the range",
                "too many points",
            )
        vet_promql(query)
        try:
            data = session.env.query_metrics_range(query, t_start, t_end, step_s)
        except ValueError as exc:
            raise bad_query(exc, "query", query) from exc
        return {"status": "success", "data": data}


def logs(
    session: TrialSession,
    origin: Origin,
    query: str,
    start: str | None = None,
    end: str | None = None,
    limit: int = 100,
) -> dict[str, Any]:
    """LogQL query over a range (default: the last hour); Loki's response.

    Raises:
        InvalidError: A limit outside 1..MAX_LOG_LINES.
        BadInputError: Bad times or a bad query.
    """
    with audited(session, origin, "observe.logs", session.virtual_cost.observation) as call:
        call.detail["query"] = query[:QUERY_AUDIT_CHARS]
        bounded_int(limit, "limit", 1, MAX_LOG_LINES)
        require_signal(session, "logs")
        now = session.env.now()
        t_end = parse_time(end, now, "end")
        t_start = parse_time(start, t_end - timedelta(hours=1), "start")
        vet_logql(query)
        try:
            data = session.env.query_logs(query, t_start, t_end, limit)
        except ValueError as exc:
            raise bad_query(exc, "query", query) from exc
        return {"status": "success", "data": data}


def traces(
    session: TrialSession,
    origin: Origin,
    service: str,
    operation: str | None = None,
    tags: str | dict[str, str] | None = None,
    start: str | None = None,
    end: str | None = None,
    lookback: str = "1h",
    limit: int = 20,
) -> dict[str, Any]:
    """Trace search; Jaeger's /api/traces response.

    Raises:
        InvalidError: A limit outside 1..MAX_TRACES.
        BadInputError: Bad tags, times or lookback, or an unknown service.
    """
    with audited(session, origin, "observe.traces", session.virtual_cost.observation) as call:
        call.detail["service"] = service[:QUERY_AUDIT_CHARS]
        bounded_int(limit, "limit", 1, MAX_TRACES)
        require_signal(session, "traces")
        tag_map = parse_tags(tags)
        now = session.env.now()
        t_end = parse_time(end, now, "end")
        window = parse_duration(lookback, "lookback")
        t_start = parse_time(start, t_end - timedelta(seconds=window), "start")
        try:
            data = session.env.search_traces(service, operation, tag_map, t_start, t_end, limit)
        except ValueError as exc:
            raise bad_query(exc, "service", service) from exc
        return {"data": data, "total": len(data), "limit": limit, "offset": 0, "errors": None}


def trace_services(session: TrialSession, origin: Origin) -> dict[str, Any]:
    """Services that report traces; Jaeger's /api/services response."""
    with audited(session, origin, "observe.traces.services", session.virtual_cost.observation):
        require_signal(session, "traces")
        names = sorted({n for edge in session.env.service_calls() for n in edge})
        return {"data": names, "total": len(names), "limit": 0, "offset": 0, "errors": None}


def topology(session: TrialSession, origin: Origin) -> TopologyView:
    """The system topology: Kubernetes objects and service calls as typed edges."""
    with audited(session, origin, "observe.topology", session.virtual_cost.observation):
        return topology_view(session.env)
