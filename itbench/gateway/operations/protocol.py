"""The run protocol on a trial session: polling, the task, STARTED / FINISHED and waiting."""

from __future__ import annotations

import functools
from typing import Any, Literal

from pydantic import BaseModel

from itbench.core.models.agent_io import DiagnosisReport, MitigationReport, PostureReport
from itbench.core.models.base import Domain
from itbench.core.models.compliance import ComplianceSubmission
from itbench.core.models.observations import AlertState
from itbench.gateway.operations.calls import RUNNING, Origin, audited
from itbench.gateway.operations.payloads import Payload, validate
from itbench.gateway.schemas import (
    ProtocolState,
    TaskDescription,
    TrialList,
    TrialSummary,
    TriggeringAlert,
    WaitRequest,
    WaitResult,
)
from itbench.gateway.sessions import AgentState, TrialSession

ReportName = Literal["diagnosis", "mitigation", "posture", "compliance"]
REPORT_MODELS: dict[ReportName, type[BaseModel]] = {
    "diagnosis": DiagnosisReport,
    "mitigation": MitigationReport,
    "posture": PostureReport,
    "compliance": ComplianceSubmission,
}
TASKS_BY_DOMAIN: dict[Domain, list[ReportName]] = {
    Domain.SRE: ["diagnosis", "mitigation"],
    Domain.FINOPS: ["diagnosis", "mitigation"],
    Domain.CISO: ["compliance", "posture"],
}


def list_trials(session: TrialSession, origin: Origin, state: str | None = None) -> TrialList:
    """The trials a token reaches (its own), optionally only in one state; never refused."""
    session.record(
        method=origin.method,
        path=origin.path,
        action="protocol.list",
        outcome="ok",
        detail={"state": state} if state else {},
    )
    items = []
    if state is None or state.lower() == session.state.value.lower():
        items.append(summary(session))
    return TrialList(items=items)


def summary(session: TrialSession) -> TrialSummary:
    """A trial as the polling agent sees it."""
    return TrialSummary(
        trial_id=session.trial_id,
        state=session.state.value,
        agent_name=session.agent_name,
        domain=session.scenario.spec.domain,
        namespace=session.namespace,
        deadline=session.deadline,
    )


def task(session: TrialSession, origin: Origin) -> TaskDescription:
    """What happened, what to deliver, by when, and which signals are available."""
    with audited(session, origin, "protocol.task", session.virtual_cost.protocol):
        return describe_task(session)


def describe_task(session: TrialSession) -> TaskDescription:
    """The task description of a session (no audit entry)."""
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
        output_schemas={t: report_schema(t) for t in tasks},
        call_costs_seconds={
            "observation": costs.observation if session.virtual_time else 0.0,
            "action": costs.action if session.virtual_time else 0.0,
            "submission": costs.submission if session.virtual_time else 0.0,
            "protocol": costs.protocol if session.virtual_time else 0.0,
        },
        allow_oracle=session.allow_oracle,
    )


@functools.cache
def report_schema(report: ReportName) -> dict[str, Any]:
    """The JSON Schema of a report, as the task shows it."""
    return REPORT_MODELS[report].model_json_schema(by_alias=True, mode="validation")


def started(session: TrialSession, origin: Origin) -> ProtocolState:
    """Report STARTED: the agent has begun working on the trial."""
    with audited(session, origin, "protocol.started", session.virtual_cost.protocol):
        now = session.env.now()
        if session.state == AgentState.READY:
            session.state = AgentState.STARTED
            session.started_at = now
        return ProtocolState(trial_id=session.trial_id, state=session.state.value, time=now)


def finished(session: TrialSession, origin: Origin) -> ProtocolState:
    """Report FINISHED: the agent is done; later calls are refused. Idempotent, and accepted
    after the deadline."""
    with audited(
        session,
        origin,
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


def wait(
    session: TrialSession,
    origin: Origin,
    request: WaitRequest | Payload,
    *,
    fields_under: str = "",
) -> WaitResult:
    """Let time pass (for example until alerts clear), bounded by the deadline.

    Args:
        session: The trial session.
        origin: Where the call came from.
        request: How long to wait.
        fields_under: Where the transport keeps the request's fields, for error paths
            (`body` over HTTP).

    Raises:
        InvalidError: The request is not a wait of 0 < seconds <= 3600.
        TooLargeError: Its body is beyond the size limit.
    """
    with audited(session, origin, "protocol.wait", 0.0) as call:
        body = validate(WaitRequest, request, call, fields_under=fields_under)
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
