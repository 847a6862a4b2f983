"""Routes of observation (docs/agent-api.md, "Observe"): alerts, PromQL, LogQL, traces, the
topology and the kubectl reads."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response

from itbench.gateway import operations
from itbench.gateway.operations.observe import MAX_LOG_LINES, MAX_TRACES
from itbench.gateway.operations.params import required
from itbench.gateway.routes.bodies import form, form_schema
from itbench.gateway.routes.deps import Endpoint, SessionDep, origin
from itbench.gateway.schemas import (
    EventList,
    KubectlDescribe,
    KubectlGet,
    PodLogs,
    TopologyView,
)

Form = Annotated[dict[str, str], Depends(form)]
Time = Annotated[str | None, Query(description="RFC 3339 or Unix seconds.")]


def router(endpoint: Endpoint) -> APIRouter:
    """The observation and kubectl routes, served as `endpoint` says."""
    routes = APIRouter(prefix="/v1")
    _telemetry(routes, endpoint)
    _kubectl(routes, endpoint)
    return routes


def _telemetry(routes: APIRouter, endpoint: Endpoint) -> None:
    @routes.get("/trials/{trial_id}/alerts", tags=["observe"])
    @endpoint
    def get_alerts(request: Request, session: SessionDep) -> dict[str, Any]:
        """Active alerts, in the shape of Prometheus' /api/v1/alerts."""
        return operations.alerts(session, origin(request))

    @routes.get("/trials/{trial_id}/metrics/query", tags=["observe"])
    @endpoint
    def metrics_query(
        request: Request,
        session: SessionDep,
        query: Annotated[str, Query(min_length=1, description="PromQL expression.")],
        time: Time = None,
    ) -> dict[str, Any]:
        """Instant PromQL query; the Prometheus HTTP API response."""
        return operations.instant_query(session, origin(request), query, time)

    @routes.post(
        "/trials/{trial_id}/metrics/query",
        tags=["observe"],
        openapi_extra=form_schema(["query"], ["time"]),
    )
    @endpoint
    def metrics_query_post(request: Request, session: SessionDep, form: Form) -> dict[str, Any]:
        """Instant PromQL query with form-encoded (or JSON) parameters, as Prometheus accepts."""
        query = required(form.get("query"), "query")
        return operations.instant_query(session, origin(request), query, form.get("time"))

    @routes.get("/trials/{trial_id}/metrics/query_range", tags=["observe"])
    @endpoint
    def metrics_query_range(
        request: Request,
        session: SessionDep,
        query: Annotated[str, Query(min_length=1, description="PromQL expression.")],
        start: Time = None,
        end: Time = None,
        step: Annotated[str | None, Query(description="Duration (15s) or seconds.")] = None,
    ) -> dict[str, Any]:
        """Range PromQL query; the Prometheus HTTP API response (default: last 30 min, 15 s)."""
        return operations.range_query(session, origin(request), query, start, end, step)

    @routes.post(
        "/trials/{trial_id}/metrics/query_range",
        tags=["observe"],
        openapi_extra=form_schema(["query"], ["start", "end", "step"]),
    )
    @endpoint
    def metrics_query_range_post(
        request: Request, session: SessionDep, form: Form
    ) -> dict[str, Any]:
        """Range PromQL query with form-encoded (or JSON) parameters."""
        query = required(form.get("query"), "query")
        return operations.range_query(
            session, origin(request), query, form.get("start"), form.get("end"), form.get("step")
        )

    @routes.get("/trials/{trial_id}/logs/query_range", tags=["observe"])
    @endpoint
    def logs_query_range(
        request: Request,
        session: SessionDep,
        query: Annotated[str, Query(min_length=1, description="LogQL selector and filters.")],
        start: Time = None,
        end: Time = None,
        limit: Annotated[int, Query(ge=1, le=MAX_LOG_LINES, description="Max lines.")] = 100,
    ) -> dict[str, Any]:
        """LogQL query over a range; Loki's response (default: the last hour)."""
        return operations.logs(session, origin(request), query, start, end, limit)

    @routes.get("/trials/{trial_id}/traces", tags=["observe"])
    @endpoint
    def search_traces(
        request: Request,
        session: SessionDep,
        service: Annotated[str, Query(min_length=1, description="Service name.")],
        operation: Annotated[str | None, Query(description="Operation (span) name.")] = None,
        tags: Annotated[
            str | None, Query(description='JSON object of span tags, e.g. {"error":"true"}.')
        ] = None,
        start: Time = None,
        end: Time = None,
        lookback: Annotated[str, Query(description="Window before end when no start.")] = "1h",
        limit: Annotated[int, Query(ge=1, le=MAX_TRACES, description="Max traces.")] = 20,
    ) -> dict[str, Any]:
        """Trace search; Jaeger's /api/traces response."""
        return operations.traces(
            session, origin(request), service, operation, tags, start, end, lookback, limit
        )

    @routes.get("/trials/{trial_id}/traces/services", tags=["observe"])
    @endpoint
    def trace_services(request: Request, session: SessionDep) -> dict[str, Any]:
        """Services that report traces; Jaeger's /api/services response."""
        return operations.trace_services(session, origin(request))

    @routes.get("/trials/{trial_id}/topology", response_model=TopologyView, tags=["observe"])
    @endpoint
    def get_topology(request: Request, session: SessionDep) -> TopologyView:
        """The system topology: Kubernetes objects and service calls as typed edges."""
        return operations.topology(session, origin(request))


def _kubectl(routes: APIRouter, endpoint: Endpoint) -> None:
    @routes.get("/trials/{trial_id}/kubectl/get", response_model=KubectlGet, tags=["kubectl"])
    @endpoint
    def kubectl_get(
        request: Request,
        session: SessionDep,
        kind: Annotated[str, Query(min_length=1, description="Kind, e.g. pods or Deployment.")],
        name: Annotated[str | None, Query(description="One object by name.")] = None,
        namespace: Annotated[str | None, Query(description="Defaults to the trial's.")] = None,
    ) -> Response:
        """`kubectl get`: objects as JSON and as the table kubectl prints."""
        body = operations.get_json(session, origin(request), kind, name, namespace)
        return Response(body, media_type="application/json")

    @routes.get(
        "/trials/{trial_id}/kubectl/describe", response_model=KubectlDescribe, tags=["kubectl"]
    )
    @endpoint
    def kubectl_describe(
        request: Request,
        session: SessionDep,
        kind: Annotated[str, Query(min_length=1, description="Kind.")],
        name: Annotated[str, Query(min_length=1, description="Object name.")],
        namespace: Annotated[str | None, Query(description="Defaults to the trial's.")] = None,
    ) -> KubectlDescribe:
        """`kubectl describe`: one object with its events."""
        return operations.describe(session, origin(request), kind, name, namespace)

    @routes.get("/trials/{trial_id}/kubectl/logs", response_model=PodLogs, tags=["kubectl"])
    @endpoint
    def kubectl_logs(
        request: Request,
        session: SessionDep,
        pod: Annotated[str, Query(min_length=1, description="Pod name.")],
        tail: Annotated[int, Query(ge=1, le=MAX_LOG_LINES, description="Last N lines.")] = 100,
    ) -> PodLogs:
        """`kubectl logs --tail`: the last lines of a pod's log."""
        return operations.pod_logs(session, origin(request), pod, tail)

    @routes.get("/trials/{trial_id}/kubectl/events", response_model=EventList, tags=["kubectl"])
    @endpoint
    def kubectl_events(
        request: Request,
        session: SessionDep,
        kind: Annotated[str | None, Query(description="Only events of this kind...")] = None,
        name: Annotated[str | None, Query(description="...and this object name.")] = None,
    ) -> Response:
        """`kubectl get events`: events in the trial's namespace."""
        body = operations.events_json(session, origin(request), kind, name)
        return Response(body, media_type="application/json")
