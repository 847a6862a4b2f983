"""The agent API: one FastAPI app per gateway, serving every open trial session of a registry.

Agents poll for their trial, read the task, observe, act and submit through these endpoints; each
call passes the guardrails, costs virtual time in the simulator, and lands on the trial's audit
trail. Every error is an RFC 7807 problem naming the field or object.
"""

import functools
import json
import logging
import re
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal, TypeVar
from urllib.parse import parse_qs

from fastapi import APIRouter, Depends, FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ValidationError

from itbench import __version__
from itbench.core.models.agent_io import DiagnosisReport, MitigationReport, PostureReport
from itbench.core.models.base import Domain
from itbench.core.models.observations import ActionResult, AgentAction, AlertState
from itbench.core.models.scenario import GroundTruth, Scenario
from itbench.core.scoring.diagnosis import graded_truth
from itbench.core.scoring.profile import DEFAULT_PROFILE
from itbench.core.scoring.trial import fault_categories
from itbench.core.tasks import mitigation_applies
from itbench.environments.port import EnvironmentFailure
from itbench.gateway import guardrails, kubectl
from itbench.gateway.problems import (
    FieldError,
    Problem,
    ProblemError,
    field_errors,
    install_handlers,
)
from itbench.gateway.schemas import (
    MAX_BODY_BYTES,
    EventList,
    KubectlDescribe,
    KubectlGet,
    PodLogs,
    ProtocolState,
    SubmissionReceipt,
    TaskDescription,
    TopologyView,
    TrialList,
    TrialSummary,
    TriggeringAlert,
    WaitRequest,
    WaitResult,
)
from itbench.gateway.sessions import (
    AgentState,
    SessionRegistry,
    TrialSession,
    UnknownTrialError,
)
from itbench.gateway.topology import topology_view

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)
RUNNING = (AgentState.READY, AgentState.STARTED)
MAX_ITEMS = 500
MAX_LOG_LINES = 5000
MAX_TRACES = 200

ReportName = Literal["diagnosis", "mitigation", "posture"]
REPORT_MODELS: dict[ReportName, type[BaseModel]] = {
    "diagnosis": DiagnosisReport,
    "mitigation": MitigationReport,
    "posture": PostureReport,
}
TASKS_BY_DOMAIN: dict[Domain, list[ReportName]] = {
    Domain.SRE: ["diagnosis", "mitigation"],
    Domain.FINOPS: ["diagnosis", "mitigation"],
    Domain.CISO: ["posture"],
}

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)")
_UNIT_SECONDS = {
    "ms": 0.001,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
    "w": 604800.0,
    "y": 31536000.0,
}


MAX_DURATION_SECONDS = 365 * 86400.0
"""The longest duration a query parameter may give (longer ones overflow date arithmetic)."""


def bad_parameter(field: str, detail: str, expected: str) -> ProblemError:
    """The 400 problem for a query parameter, naming it."""
    return ProblemError(
        400,
        "bad-parameter",
        "Invalid parameter",
        f"{field}: {detail}",
        errors=[FieldError(field=field, message=expected)],
    )


def parse_time(value: str | None, default: datetime, field: str) -> datetime:
    """Parse a Prometheus-style time: RFC 3339 or Unix seconds; `default` when absent.

    Raises:
        ProblemError: 400 naming the field when the value is neither.
    """
    if value is None or value == "":
        return default
    try:
        return datetime.fromtimestamp(float(value), UTC)
    except (OverflowError, OSError):  # inf, nan or beyond the calendar
        raise bad_parameter(
            field,
            f"{value!r} is not a time this gateway can represent",
            "expected a finite time in years 1-9999",
        ) from None
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise bad_parameter(
            field,
            f"{value!r} is neither RFC 3339 nor Unix seconds",
            "expected RFC 3339 or Unix seconds",
        ) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def parse_duration(value: str, field: str) -> float:
    """Parse a Prometheus duration (`15s`, `1m30s`) or plain seconds into seconds.

    Raises:
        ProblemError: 400 naming the field when it is not a positive duration.
    """
    seconds: float | None
    try:
        seconds = float(value)
    except ValueError:
        parts = _DURATION.findall(value)
        seconds = (
            sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)
            if parts and "".join(n + u for n, u in parts) == value
            else None
        )
    if seconds is None or not 0 < seconds <= MAX_DURATION_SECONDS:
        raise bad_parameter(
            field,
            f"{value!r} is not a positive duration of at most 365 days (e.g. 15s, 1m, or seconds)",
            "expected a positive duration",
        )
    return seconds


def _bearer(authorization: str | None) -> str:
    if not authorization:
        raise ProblemError(
            401,
            "unauthenticated",
            "Missing token",
            "send the trial's token as `Authorization: Bearer <token>`",
        )
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ProblemError(
            401,
            "unauthenticated",
            "Malformed token",
            "the Authorization header must be `Bearer <token>`",
        )
    return token.strip()


class _Call:
    """One audited call on a session: its action name, detail and outcome when it returns."""

    def __init__(self, action: str) -> None:
        self.action = action
        self.outcome = "ok"
        self.detail: dict[str, Any] = {}


def _outcome_of(exc: ProblemError) -> str:
    if exc.status in (413, 422):
        return "rejected"
    if exc.status in (401, 403, 409):
        return "refused"
    return "error"


def run_inline(func: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    """Make a blocking endpoint run on the event loop instead of a worker thread.

    For a gateway whose only caller is an in-process client that waits for each answer anyway
    (the embedded benchmark), the hop to a thread and back buys nothing and costs a fifth of a
    trial's time. FastAPI reads the signature through `functools.wraps`.
    """

    @functools.wraps(func)
    async def call(*args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)

    return call


def create_app(registry: SessionRegistry, *, inline: bool = False) -> FastAPI:
    """Build the agent API over a registry of trial sessions.

    Args:
        registry: The sessions this gateway serves; the runner opens and closes them.
        inline: Run endpoints on the event loop (for in-process callers); by default they run
            in worker threads, so that a slow environment never blocks other agents' calls.

    Returns:
        The FastAPI application (serve it with uvicorn or call it in-process).
    """
    app = FastAPI(
        title="ITBench agent API",
        version=__version__,
        description=(
            "The only door an agent needs: poll for a ready trial, read the task, observe "
            "(alerts, metrics, logs, traces, topology, kubectl), act, submit reports, and "
            "report STARTED / FINISHED. Authenticate with the trial's bearer token. Every error "
            "is an RFC 7807 problem (application/problem+json)."
        ),
    )
    install_handlers(app)
    router = APIRouter(prefix="/v1")
    bearer_scheme = HTTPBearer(
        auto_error=False, description="The trial's token: `Authorization: Bearer <token>`."
    )

    async def caller(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)],
    ) -> TrialSession:
        if credentials is None or not credentials.credentials.strip():
            raise ProblemError(
                401,
                "unauthenticated",
                "Missing token",
                "send the trial's token as `Authorization: Bearer <token>`",
            )
        token = credentials.credentials.strip()
        try:
            return registry.by_token(token)
        except UnknownTrialError:
            raise ProblemError(
                401,
                "unauthenticated",
                "Unknown token",
                "the token belongs to no open trial (it may have been closed)",
            ) from None

    async def trial(
        request: Request,
        trial_id: Annotated[str, Path(description="The trial id.")],
        me: Annotated[TrialSession, Depends(caller)],
    ) -> TrialSession:
        if me.trial_id != trial_id:
            reason = (
                f"the token reaches trial {me.trial_id!r} only, not {trial_id!r}; "
                "trials never see each other"
            )
            me.record(
                method=request.method,
                path=request.url.path,
                action="access",
                outcome="refused",
                reason=reason,
            )
            refused = ProblemError(403, "forbidden-trial", "Another trial", reason)
            refused.recorded = True
            raise refused
        return me

    SessionDep = Annotated[TrialSession, Depends(trial)]  # noqa: N806 (a type alias)

    def endpoint(func: Callable[..., Any]) -> Callable[..., Any]:
        return run_inline(func) if inline else func

    @contextmanager
    def audited(
        session: TrialSession,
        request: Request,
        action: str,
        cost: float,
        *,
        states: tuple[AgentState, ...] = RUNNING,
        enforce_deadline: bool = True,
    ) -> Iterator[_Call]:
        with session.lock:
            call = _Call(action)
            arrived = session.env.now()
            try:
                _check_state(session, arrived, states, enforce_deadline)
                yield call
            except ProblemError as exc:
                session.record(
                    time=arrived,
                    method=request.method,
                    path=request.url.path,
                    action=call.action,
                    outcome=_outcome_of(exc),
                    reason=exc.detail,
                    detail=call.detail,
                )
                exc.recorded = True
                session.charge(cost)
                raise
            except EnvironmentFailure as exc:
                session.record(
                    time=arrived,
                    method=request.method,
                    path=request.url.path,
                    action=call.action,
                    outcome="error",
                    reason=f"environment failure: {exc}",
                    detail=call.detail,
                )
                raise ProblemError(
                    503,
                    "environment-failure",
                    "Environment failure",
                    f"the trial's environment failed: {exc}; the trial will be Errored, "
                    "not counted against the agent",
                ) from exc
            except Exception as exc:
                log.exception("gateway call failed", extra={"trial": session.trial_id})
                session.record(
                    time=arrived,
                    method=request.method,
                    path=request.url.path,
                    action=call.action,
                    outcome="error",
                    reason=f"internal error: {type(exc).__name__}: {exc}",
                    detail=call.detail,
                )
                raise ProblemError(
                    500,
                    "internal-error",
                    "Internal error",
                    f"the gateway failed on this call ({type(exc).__name__}: {exc})",
                ) from exc
            else:
                session.record(
                    time=arrived,
                    method=request.method,
                    path=request.url.path,
                    action=call.action,
                    outcome=call.outcome,
                    detail=call.detail,
                )
                session.charge(cost)

    def telemetry_enabled(session: TrialSession, signal: str) -> None:
        if not getattr(session.telemetry, signal):
            raise ProblemError(
                404,
                "telemetry-unavailable",
                "Signal not available",
                f"{signal} are not available in this trial (see telemetry in the task)",
                extra={"signal": signal},
            )

    def bad_query(exc: Exception, field: str) -> ProblemError:
        return ProblemError(
            400,
            "bad-query",
            "Bad query",
            f"{field}: {exc}",
            errors=[FieldError(field=field, message=str(exc))],
            extra={"errorType": "bad_data", "error": str(exc)},
        )

    # ---- task and protocol ------------------------------------------------------------
    @router.get("/trials", response_model=TrialList, tags=["protocol"])
    @endpoint
    def list_trials(
        request: Request,
        me: Annotated[TrialSession, Depends(caller)],
        state: Annotated[
            str | None, Query(description="Only trials in this state, e.g. Ready.")
        ] = None,
    ) -> TrialList:
        """Trials the token reaches (its own trial), optionally filtered by state."""
        me.record(
            method=request.method,
            path=request.url.path,
            action="protocol.list",
            outcome="ok",
            detail={"state": state} if state else {},
        )
        items = []
        if state is None or state.lower() == me.state.value.lower():
            items.append(_summary(me))
        return TrialList(items=items)

    @router.get("/trials/{trial_id}/task", response_model=TaskDescription, tags=["protocol"])
    @endpoint
    def get_task(request: Request, session: SessionDep) -> TaskDescription:
        """What happened, what to deliver, by when, and which signals are available."""
        with audited(session, request, "protocol.task", session.virtual_cost.protocol):
            return _task(session)

    @router.post("/trials/{trial_id}/started", response_model=ProtocolState, tags=["protocol"])
    @endpoint
    def report_started(request: Request, session: SessionDep) -> ProtocolState:
        """Report STARTED: the agent has begun working on the trial."""
        with audited(session, request, "protocol.started", session.virtual_cost.protocol):
            now = session.env.now()
            if session.state == AgentState.READY:
                session.state = AgentState.STARTED
                session.started_at = now
            return ProtocolState(trial_id=session.trial_id, state=session.state.value, time=now)

    @router.post("/trials/{trial_id}/finished", response_model=ProtocolState, tags=["protocol"])
    @endpoint
    def report_finished(request: Request, session: SessionDep) -> ProtocolState:
        """Report FINISHED: the agent is done; later calls are refused. Idempotent."""
        with audited(
            session,
            request,
            "protocol.finished",
            0.0,
            states=(*RUNNING, AgentState.FINISHED),
            enforce_deadline=False,
        ):
            now = session.env.now()
            if session.state != AgentState.FINISHED:
                session.state = AgentState.FINISHED
                session.finished_at = now
            return ProtocolState(
                trial_id=session.trial_id,
                state=session.state.value,
                time=session.finished_at or now,
            )

    @router.post("/trials/{trial_id}/wait", response_model=WaitResult, tags=["protocol"])
    @endpoint
    def wait(request: Request, session: SessionDep, body: WaitRequest) -> WaitResult:
        """Let time pass (for example until alerts clear), bounded by the deadline."""
        with audited(session, request, "protocol.wait", 0.0) as call:
            before = session.env.now()
            remaining = session.remaining_seconds()
            seconds = body.seconds if remaining is None else min(body.seconds, remaining)
            session.env.advance(seconds)
            after = session.env.now()
            call.detail["seconds"] = body.seconds
            return WaitResult(
                trial_id=session.trial_id,
                waited_seconds=(after - before).total_seconds(),
                now=after,
                remaining_seconds=session.remaining_seconds(),
                firing_alerts=sum(1 for a in session.env.alerts() if a.state == AlertState.FIRING),
            )

    # ---- observe ----------------------------------------------------------------------
    @router.get("/trials/{trial_id}/alerts", tags=["observe"])
    @endpoint
    def get_alerts(request: Request, session: SessionDep) -> dict[str, Any]:
        """Active alerts, in the shape of Prometheus' /api/v1/alerts."""
        with audited(session, request, "observe.alerts", session.virtual_cost.observation):
            alerts = [
                {
                    "labels": {"alertname": a.alertname, **a.labels},
                    "annotations": a.annotations,
                    "state": a.state.value,
                    "activeAt": a.active_at.isoformat(),
                    "value": repr(float(a.value)),
                }
                for a in session.env.alerts()
            ]
            return {"status": "success", "data": {"alerts": alerts}}

    def instant_query(
        session: TrialSession, request: Request, query: str, time: str | None
    ) -> dict[str, Any]:
        with audited(
            session, request, "observe.metrics.query", session.virtual_cost.observation
        ) as call:
            call.detail["query"] = query[:500]
            telemetry_enabled(session, "metrics")
            at = parse_time(time, session.env.now(), "time")
            try:
                data = session.env.query_metrics(query, at)
            except ValueError as exc:
                raise bad_query(exc, "query") from exc
            return {"status": "success", "data": data}

    def range_query(
        session: TrialSession,
        request: Request,
        query: str,
        start: str | None,
        end: str | None,
        step: str | None,
    ) -> dict[str, Any]:
        with audited(
            session, request, "observe.metrics.query_range", session.virtual_cost.observation
        ) as call:
            call.detail["query"] = query[:500]
            telemetry_enabled(session, "metrics")
            now = session.env.now()
            t_end = parse_time(end, now, "end")
            t_start = parse_time(start, t_end - timedelta(minutes=30), "start")
            step_s = parse_duration(step or "15s", "step")
            if t_start > t_end:
                raise bad_parameter("start", "must not be after end", "after end")
            if (t_end - t_start).total_seconds() / step_s > 11000:
                raise bad_parameter(
                    "step",
                    "more than 11000 points per series; raise step or narrow the range",
                    "too many points",
                )
            try:
                data = session.env.query_metrics_range(query, t_start, t_end, step_s)
            except ValueError as exc:
                raise bad_query(exc, "query") from exc
            return {"status": "success", "data": data}

    @router.get("/trials/{trial_id}/metrics/query", tags=["observe"])
    @endpoint
    def metrics_query(
        request: Request,
        session: SessionDep,
        query: Annotated[str, Query(min_length=1, description="PromQL expression.")],
        time: Annotated[str | None, Query(description="RFC 3339 or Unix seconds.")] = None,
    ) -> dict[str, Any]:
        """Instant PromQL query; the Prometheus HTTP API response."""
        return instant_query(session, request, query, time)

    @router.post(
        "/trials/{trial_id}/metrics/query",
        tags=["observe"],
        openapi_extra=_form_schema(["query"], ["time"]),
    )
    @endpoint
    def metrics_query_post(
        request: Request, session: SessionDep, form: Annotated[dict[str, str], Depends(_form)]
    ) -> dict[str, Any]:
        """Instant PromQL query with form-encoded (or JSON) parameters, as Prometheus accepts."""
        return instant_query(session, request, _required(form, "query"), form.get("time"))

    @router.get("/trials/{trial_id}/metrics/query_range", tags=["observe"])
    @endpoint
    def metrics_query_range(
        request: Request,
        session: SessionDep,
        query: Annotated[str, Query(min_length=1, description="PromQL expression.")],
        start: Annotated[str | None, Query(description="RFC 3339 or Unix seconds.")] = None,
        end: Annotated[str | None, Query(description="RFC 3339 or Unix seconds.")] = None,
        step: Annotated[str | None, Query(description="Duration (15s) or seconds.")] = None,
    ) -> dict[str, Any]:
        """Range PromQL query; the Prometheus HTTP API response (default: last 30 min, 15 s)."""
        return range_query(session, request, query, start, end, step)

    @router.post(
        "/trials/{trial_id}/metrics/query_range",
        tags=["observe"],
        openapi_extra=_form_schema(["query"], ["start", "end", "step"]),
    )
    @endpoint
    def metrics_query_range_post(
        request: Request, session: SessionDep, form: Annotated[dict[str, str], Depends(_form)]
    ) -> dict[str, Any]:
        """Range PromQL query with form-encoded (or JSON) parameters."""
        return range_query(
            session,
            request,
            _required(form, "query"),
            form.get("start"),
            form.get("end"),
            form.get("step"),
        )

    @router.get("/trials/{trial_id}/logs/query_range", tags=["observe"])
    @endpoint
    def logs_query_range(
        request: Request,
        session: SessionDep,
        query: Annotated[str, Query(min_length=1, description="LogQL selector and filters.")],
        start: Annotated[str | None, Query(description="RFC 3339 or Unix seconds.")] = None,
        end: Annotated[str | None, Query(description="RFC 3339 or Unix seconds.")] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_LOG_LINES, description="Max lines.")] = 100,
    ) -> dict[str, Any]:
        """LogQL query over a range; Loki's response (default: the last hour)."""
        with audited(session, request, "observe.logs", session.virtual_cost.observation) as call:
            call.detail["query"] = query[:500]
            telemetry_enabled(session, "logs")
            now = session.env.now()
            t_end = parse_time(end, now, "end")
            t_start = parse_time(start, t_end - timedelta(hours=1), "start")
            try:
                data = session.env.query_logs(query, t_start, t_end, limit)
            except ValueError as exc:
                raise bad_query(exc, "query") from exc
            return {"status": "success", "data": data}

    @router.get("/trials/{trial_id}/traces", tags=["observe"])
    @endpoint
    def search_traces(
        request: Request,
        session: SessionDep,
        service: Annotated[str, Query(min_length=1, description="Service name.")],
        operation: Annotated[str | None, Query(description="Operation (span) name.")] = None,
        tags: Annotated[
            str | None, Query(description='JSON object of span tags, e.g. {"error":"true"}.')
        ] = None,
        start: Annotated[str | None, Query(description="RFC 3339 or Unix seconds.")] = None,
        end: Annotated[str | None, Query(description="RFC 3339 or Unix seconds.")] = None,
        lookback: Annotated[str, Query(description="Window before end when no start.")] = "1h",
        limit: Annotated[int, Query(ge=1, le=MAX_TRACES, description="Max traces.")] = 20,
    ) -> dict[str, Any]:
        """Trace search; Jaeger's /api/traces response."""
        with audited(session, request, "observe.traces", session.virtual_cost.observation) as call:
            call.detail["service"] = service
            telemetry_enabled(session, "traces")
            tag_map = _tags(tags)
            now = session.env.now()
            t_end = parse_time(end, now, "end")
            window = parse_duration(lookback, "lookback")
            t_start = parse_time(start, t_end - timedelta(seconds=window), "start")
            try:
                data = session.env.search_traces(service, operation, tag_map, t_start, t_end, limit)
            except ValueError as exc:
                raise bad_query(exc, "service") from exc
            return {"data": data, "total": len(data), "limit": limit, "offset": 0, "errors": None}

    @router.get("/trials/{trial_id}/traces/services", tags=["observe"])
    @endpoint
    def trace_services(request: Request, session: SessionDep) -> dict[str, Any]:
        """Services that report traces; Jaeger's /api/services response."""
        with audited(session, request, "observe.traces.services", session.virtual_cost.observation):
            telemetry_enabled(session, "traces")
            names = sorted({n for edge in session.env.service_calls() for n in edge})
            return {"data": names, "total": len(names), "limit": 0, "offset": 0, "errors": None}

    @router.get("/trials/{trial_id}/topology", response_model=TopologyView, tags=["observe"])
    @endpoint
    def get_topology(request: Request, session: SessionDep) -> TopologyView:
        """The system topology: Kubernetes objects and service calls as typed edges."""
        with audited(session, request, "observe.topology", session.virtual_cost.observation):
            return topology_view(session.env)

    # ---- kubectl ----------------------------------------------------------------------
    def read_objects(
        session: TrialSession, kind: str, name: str | None, namespace: str | None
    ) -> tuple[str, list[dict[str, Any]]]:
        canonical = kubectl.canonical_kind(kind)
        refusal = guardrails.check_read(kind, namespace, session.namespace)
        if refusal is not None:
            raise ProblemError(
                403,
                f"forbidden-{refusal.rule}",
                "Refused by a guardrail",
                refusal.reason,
                extra={"rule": refusal.rule},
            )
        try:
            objects = session.env.get_objects(canonical, name or None)
        except (KeyError, ValueError) as exc:
            raise ProblemError(
                400,
                "unknown-kind",
                "Unknown kind",
                f"kind: cannot list {kind!r}: {exc}",
                errors=[FieldError(field="kind", message=str(exc))],
            ) from exc
        objects = [o for o in objects if _in_namespace(o, canonical, session.namespace)]
        if name and not objects:
            raise ProblemError(
                404,
                "object-not-found",
                "Not found",
                f'{canonical} "{name}" not found in namespace {session.namespace!r}',
                extra={"kind": canonical, "name": name},
            )
        return canonical, objects[:MAX_ITEMS]

    @router.get("/trials/{trial_id}/kubectl/get", response_model=KubectlGet, tags=["kubectl"])
    @endpoint
    def kubectl_get(
        request: Request,
        session: SessionDep,
        kind: Annotated[str, Query(min_length=1, description="Kind, e.g. pods or Deployment.")],
        name: Annotated[str | None, Query(description="One object by name.")] = None,
        namespace: Annotated[str | None, Query(description="Defaults to the trial's.")] = None,
    ) -> KubectlGet:
        """`kubectl get`: objects as JSON and as the table kubectl prints."""
        with audited(
            session, request, "observe.kubectl.get", session.virtual_cost.observation
        ) as call:
            call.detail.update({"kind": kind, "name": name or ""})
            canonical, objects = read_objects(session, kind, name, namespace)
            return KubectlGet(
                kind=canonical,
                namespace=session.namespace,
                items=objects,
                text=kubectl.render_get(canonical, objects, session.env.now()),
            )

    @router.get(
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
        with audited(
            session, request, "observe.kubectl.describe", session.virtual_cost.observation
        ) as call:
            call.detail.update({"kind": kind, "name": name})
            canonical, objects = read_objects(session, kind, name, namespace)
            obj = objects[0]
            events = kubectl.events_for(session.env.events(), canonical, name)
            return KubectlDescribe(
                kind=canonical,
                name=name,
                object=obj,
                events=events,
                text=kubectl.render_describe(obj, events),
            )

    @router.get("/trials/{trial_id}/kubectl/logs", response_model=PodLogs, tags=["kubectl"])
    @endpoint
    def kubectl_logs(
        request: Request,
        session: SessionDep,
        pod: Annotated[str, Query(min_length=1, description="Pod name.")],
        tail: Annotated[int, Query(ge=1, le=MAX_LOG_LINES, description="Last N lines.")] = 100,
    ) -> PodLogs:
        """`kubectl logs --tail`: the last lines of a pod's log."""
        with audited(
            session, request, "observe.kubectl.logs", session.virtual_cost.observation
        ) as call:
            call.detail["pod"] = pod
            read_objects(session, "Pod", pod, None)
            lines = session.env.pod_logs(pod, tail)
            return PodLogs(pod=pod, lines=lines, text="\n".join(lines))

    @router.get("/trials/{trial_id}/kubectl/events", response_model=EventList, tags=["kubectl"])
    @endpoint
    def kubectl_events(
        request: Request,
        session: SessionDep,
        kind: Annotated[str | None, Query(description="Only events of this kind...")] = None,
        name: Annotated[str | None, Query(description="...and this object name.")] = None,
    ) -> EventList:
        """`kubectl get events`: events in the trial's namespace."""
        with audited(session, request, "observe.kubectl.events", session.virtual_cost.observation):
            events = [
                e
                for e in session.env.events()
                if (e.get("metadata") or {}).get("namespace") in (None, session.namespace)
            ]
            if kind and name:
                events = kubectl.events_for(events, kubectl.canonical_kind(kind), name)
            events = events[-MAX_ITEMS:]
            return EventList(items=events, text=kubectl.render_events(events))

    # ---- act --------------------------------------------------------------------------
    @router.post(
        "/trials/{trial_id}/actions",
        response_model=ActionResult,
        tags=["act"],
        openapi_extra=_body_schema(AgentAction),
    )
    @endpoint
    def act(
        request: Request, session: SessionDep, raw: Annotated[_Body, Depends(_capped_body)]
    ) -> ActionResult:
        """Carry out one action (patch, set image/resources/env, scale, rollout, delete, apply,
        set a flag) after the guardrails."""
        with audited(session, request, "act", session.virtual_cost.action) as call:
            action = _parse(AgentAction, raw, call)
            call.action = f"act.{action.verb.value}"
            call.detail["action"] = action.wire()
            refusal = guardrails.check_action(action, session.namespace)
            if refusal is not None:
                raise ProblemError(
                    403,
                    f"forbidden-{refusal.rule}",
                    "Refused by a guardrail",
                    refusal.reason,
                    extra={"rule": refusal.rule},
                )
            if action.namespace is None:
                action = action.model_copy(update={"namespace": session.namespace})
            result = session.env.act(action)
            call.detail["result"] = result.wire()
            if not result.ok:
                call.outcome = "error"
            return result

    # ---- submit -----------------------------------------------------------------------
    def submit(
        session: TrialSession, request: Request, raw: _Body, report: ReportName
    ) -> SubmissionReceipt:
        with audited(session, request, f"submit.{report}", session.virtual_cost.submission) as call:
            if report not in TASKS_BY_DOMAIN[session.scenario.spec.domain]:
                session.rejected_submissions += 1
                raise ProblemError(
                    422,
                    "report-not-expected",
                    "Report not expected",
                    f"a {session.scenario.spec.domain.value} trial takes "
                    f"{' and '.join(TASKS_BY_DOMAIN[session.scenario.spec.domain])} reports, "
                    f"not {report}",
                )
            try:
                parsed = _parse(REPORT_MODELS[report], raw, call)
            except ProblemError:
                session.rejected_submissions += 1
                raise
            now = session.env.now()
            if isinstance(parsed, DiagnosisReport):
                session.diagnosis, session.diagnosis_at = parsed, now
            elif isinstance(parsed, MitigationReport):
                session.mitigation, session.mitigation_at = parsed, now
            elif isinstance(parsed, PostureReport):
                session.posture, session.posture_at = parsed, now
            return SubmissionReceipt(trial_id=session.trial_id, report=report, accepted_at=now)

    def submission_route(report: ReportName, model: type[BaseModel]) -> None:
        @endpoint
        def submit_report(
            request: Request, session: SessionDep, raw: Annotated[_Body, Depends(_capped_body)]
        ) -> SubmissionReceipt:
            return submit(session, request, raw, report)

        submit_report.__doc__ = (
            f"Submit the {report} report (validated; malformed or larger than 256 KiB is "
            "rejected and counted, and the trial is still scored)."
        )
        router.add_api_route(
            f"/trials/{{trial_id}}/{report}",
            submit_report,
            methods=["POST"],
            response_model=SubmissionReceipt,
            tags=["submit"],
            name=f"submit_{report}",
            openapi_extra=_body_schema(model),
        )

    for report_name, report_model in REPORT_MODELS.items():
        submission_route(report_name, report_model)

    # ---- ground truth -----------------------------------------------------------------
    @router.get("/trials/{trial_id}/oracle", tags=["oracle"])
    @endpoint
    def get_oracle(request: Request, session: SessionDep) -> dict[str, Any]:
        """The ground truth (root causes, propagation, accepted mitigations); only when the
        run allows the oracle agent."""
        with audited(session, request, "oracle", 0.0):
            if not session.allow_oracle:
                raise ProblemError(
                    403,
                    "forbidden-ground-truth",
                    "Refused by a guardrail",
                    "the ground truth is hidden from agents; this run does not allow the oracle",
                    extra={"rule": "ground-truth"},
                )
            return oracle_truth(session.scenario).wire()

    app.include_router(router)
    _install_audited_validation(app, registry)
    _install_audited_problems(app, registry)
    app.openapi = _openapi_with_models(app)  # type: ignore[method-assign]
    return app


def oracle_truth(scenario: Scenario) -> GroundTruth:
    """The ground truth as the default profile grades it: what an agent can observe, the
    specific root causes, and the accepted mitigations only where the agent can reach the cause."""
    truth = graded_truth(
        scenario.spec.ground_truth, DEFAULT_PROFILE, fault_categories(scenario)
    ).truth
    categories = fault_categories(scenario)
    if categories:
        entities = [
            e.model_copy(update={"category": categories[0]})
            if e.root_cause and e.category is None
            else e
            for e in truth.entities
        ]
        truth = truth.model_copy(update={"entities": entities})
    if not mitigation_applies(scenario):
        truth = truth.model_copy(update={"mitigations": []})
    return truth


def _check_state(
    session: TrialSession, now: datetime, states: tuple[AgentState, ...], enforce_deadline: bool
) -> None:
    if session.state not in states:
        if session.state == AgentState.WAITING:
            detail = "the trial is not Ready yet; poll GET /v1/trials?state=Ready"
            slug = "trial-not-ready"
        else:
            detail = f"the trial is {session.state.value}; no more calls are accepted"
            slug = "trial-finished"
        raise ProblemError(409, slug, "Wrong trial state", detail, extra={"state": session.state})
    if enforce_deadline and session.deadline is not None and now >= session.deadline:
        raise ProblemError(
            409,
            "deadline-passed",
            "Deadline passed",
            f"the trial's deadline {session.deadline.isoformat()} has passed; report FINISHED",
            extra={"deadline": session.deadline.isoformat()},
        )


def _summary(session: TrialSession) -> TrialSummary:
    return TrialSummary(
        trial_id=session.trial_id,
        state=session.state.value,
        agent_name=session.agent_name,
        domain=session.scenario.spec.domain,
        namespace=session.namespace,
        deadline=session.deadline,
    )


def _task(session: TrialSession) -> TaskDescription:
    spec = session.scenario.spec
    tasks = TASKS_BY_DOMAIN[spec.domain]
    costs = session.virtual_cost
    return TaskDescription(
        trial_id=session.trial_id,
        state=session.state.value,
        domain=spec.domain,
        namespace=session.namespace,
        now=session.env.now(),
        deadline=session.deadline,
        remaining_seconds=session.remaining_seconds(),
        alerts=[
            TriggeringAlert(
                alertname=a.alertname,
                labels=a.labels,
                state=a.state.value,
                active_at=a.active_at,
            )
            for a in session.env.alerts()
        ],
        requirement=spec.description if spec.domain == Domain.CISO else "",
        telemetry=session.telemetry,
        tasks=tasks,
        output_schemas={t: _report_schema(t) for t in tasks},
        call_costs_seconds={
            "observation": costs.observation if session.virtual_time else 0.0,
            "action": costs.action if session.virtual_time else 0.0,
            "submission": costs.submission if session.virtual_time else 0.0,
            "protocol": costs.protocol if session.virtual_time else 0.0,
        },
        allow_oracle=session.allow_oracle,
    )


@functools.cache
def _report_schema(report: ReportName) -> dict[str, Any]:
    return REPORT_MODELS[report].model_json_schema(by_alias=True, mode="validation")


def _in_namespace(obj: dict[str, Any], kind: str, namespace: str) -> bool:
    if kind in kubectl.CLUSTER_SCOPED_KINDS:
        return kind != "Namespace" or (obj.get("metadata") or {}).get("name") == namespace
    return (obj.get("metadata") or {}).get("namespace") in (None, namespace)


def _tags(text: str | None) -> dict[str, str]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise bad_parameter(
            "tags", f"not JSON ({exc.msg})", "expected a JSON object of strings"
        ) from None
    if not isinstance(value, dict):
        raise bad_parameter("tags", "expected a JSON object", "expected a JSON object of strings")
    return {str(k): str(v) for k, v in value.items()}


def _required(form: dict[str, str], name: str) -> str:
    value = form.get(name, "")
    if not value:
        raise ProblemError(
            422,
            "invalid-request",
            "Invalid request",
            f"{name}: field required",
            errors=[FieldError(field=name, message="field required")],
        )
    return value


class _Body:
    """A request body read up to the limit; `data` is None when it was larger."""

    def __init__(self, data: bytes | None, size: int) -> None:
        self.data = data
        self.size = size

    def bytes_or_413(self) -> bytes:
        if self.data is None:
            raise _TooLargeError(self.size)
        return self.data


async def _capped_body(request: Request) -> _Body:
    """Read the request body, stopping past MAX_BODY_BYTES without buffering it all."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        return _Body(None, int(declared))
    chunks: list[bytes] = []
    total = 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > MAX_BODY_BYTES:
            return _Body(None, total)
        chunks.append(chunk)
    return _Body(b"".join(chunks), total)


async def _form(request: Request) -> dict[str, str]:
    """Form-encoded or JSON parameters of a POST query, as Prometheus accepts them."""
    raw = (await _capped_body(request)).bytes_or_413()
    if "json" in request.headers.get("content-type", ""):
        try:
            value = json.loads(raw or b"{}")
        except json.JSONDecodeError as exc:
            raise ProblemError(
                400, "malformed-body", "Malformed body", f"body: not JSON ({exc.msg})"
            ) from None
        except RecursionError:
            raise ProblemError(
                400, "malformed-body", "Malformed body", "body: JSON nested too deeply"
            ) from None
        if not isinstance(value, dict):
            raise ProblemError(400, "malformed-body", "Malformed body", "body: expected an object")
        return {str(k): str(v) for k, v in value.items()}
    return {k: v[-1] for k, v in parse_qs(raw.decode("utf-8", "replace")).items()}


class _TooLargeError(ProblemError):
    def __init__(self, size: int) -> None:
        super().__init__(
            413,
            "body-too-large",
            "Request body too large",
            f"body: {size} bytes exceeds the limit of {MAX_BODY_BYTES} bytes (256 KiB); "
            "shorten the reasoning or the entity list",
            extra={"limit": MAX_BODY_BYTES},
        )


def _parse(model: type[M], body: _Body, call: _Call) -> M:
    raw = body.bytes_or_413()
    try:
        return model.model_validate_json(raw or b"")
    except ValidationError as exc:
        errors = field_errors(exc)
        call.detail["errors"] = [e.model_dump() for e in errors]
        raise ProblemError(
            422,
            "invalid-body",
            "Invalid body",
            f"{model.__name__} is invalid at: {', '.join(e.field for e in errors)}",
            errors=errors,
        ) from None


def _body_schema(model: type[BaseModel]) -> dict[str, Any]:
    return {
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": {"$ref": f"#/components/schemas/{model.__name__}"}}
            },
        }
    }


def _form_schema(required: list[str], optional: list[str]) -> dict[str, Any]:
    schema = {
        "type": "object",
        "required": required,
        "properties": {name: {"type": "string"} for name in [*required, *optional]},
    }
    return {
        "requestBody": {
            "required": True,
            "content": {
                "application/x-www-form-urlencoded": {"schema": schema},
                "application/json": {"schema": schema},
            },
        }
    }


def _openapi_with_models(app: FastAPI) -> Callable[[], dict[str, Any]]:
    """The OpenAPI generator, plus the schemas of raw-body requests and the problem type."""

    def generate() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        doc = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        schemas: dict[str, Any] = doc.setdefault("components", {}).setdefault("schemas", {})
        for model in (AgentAction, DiagnosisReport, MitigationReport, PostureReport, Problem):
            body = model.model_json_schema(
                by_alias=True, ref_template="#/components/schemas/{model}", mode="validation"
            )
            for name, definition in body.pop("$defs", {}).items():
                schemas.setdefault(name, definition)
            schemas[model.__name__] = body
        problem_ref = {"$ref": "#/components/schemas/Problem"}
        for path_item in doc.get("paths", {}).values():
            for operation in path_item.values():
                responses = operation.setdefault("responses", {})
                responses.pop("422", None)
                responses["default"] = {
                    "description": "An RFC 7807 problem naming the cause and the field or object.",
                    "content": {"application/problem+json": {"schema": problem_ref}},
                }
        for unused in ("HTTPValidationError", "ValidationError"):
            schemas.pop(unused, None)
        app.openapi_schema = doc
        return doc

    return generate


def _install_audited_problems(app: FastAPI, registry: SessionRegistry) -> None:
    """Record a call refused before its route got to it (a malformed, oversized or incomplete
    body) on the caller's trial, then answer with the problem."""
    previous = app.exception_handlers[ProblemError]

    async def handler(request: Request, exc: Exception) -> Any:
        assert isinstance(exc, ProblemError)
        if not exc.recorded and exc.status in (400, 413, 422):
            try:
                session = registry.by_token(_bearer(request.headers.get("authorization")))
            except (ProblemError, UnknownTrialError):
                session = None
            if session is not None:
                session.record(
                    method=request.method,
                    path=request.url.path,
                    action="request",
                    outcome="rejected",
                    reason=exc.detail,
                )
                exc.recorded = True
        response = previous(request, exc)
        return await response if isinstance(response, Awaitable) else response

    app.add_exception_handler(ProblemError, handler)


def _install_audited_validation(app: FastAPI, registry: SessionRegistry) -> None:
    """Record rejected request parameters on the caller's trial before answering 422."""
    previous = app.exception_handlers[RequestValidationError]

    async def handler(request: Request, exc: Exception) -> JSONResponse:
        response = previous(request, exc)
        result = await response if isinstance(response, Awaitable) else response
        assert isinstance(result, JSONResponse)
        try:
            session = registry.by_token(_bearer(request.headers.get("authorization")))
        except (ProblemError, UnknownTrialError):
            return result
        assert isinstance(exc, RequestValidationError)
        session.record(
            method=request.method,
            path=request.url.path,
            action="request",
            outcome="rejected",
            reason="invalid request parameters",
            detail={"errors": [str(e.get("loc")) for e in exc.errors()]},
        )
        return result

    app.add_exception_handler(RequestValidationError, handler)
