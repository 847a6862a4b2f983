"""Routes of the run protocol (docs/agent-api.md, "The run protocol"): polling, the task,
STARTED / FINISHED and waiting."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request

from itbench.gateway import operations
from itbench.gateway.operations import Payload
from itbench.gateway.routes.bodies import body_schema, capped_body
from itbench.gateway.routes.deps import CallerDep, Endpoint, SessionDep, origin
from itbench.gateway.schemas import (
    ProtocolState,
    TaskDescription,
    TrialList,
    WaitRequest,
    WaitResult,
)


def router(endpoint: Endpoint) -> APIRouter:
    """The protocol routes, served as `endpoint` says."""
    routes = APIRouter(prefix="/v1")

    @routes.get("/trials", response_model=TrialList, tags=["protocol"])
    @endpoint
    def list_trials(
        request: Request,
        me: CallerDep,
        state: Annotated[
            str | None, Query(description="Only trials in this state, e.g. Ready.")
        ] = None,
    ) -> TrialList:
        """Trials the token reaches (its own trial), optionally filtered by state."""
        return operations.list_trials(me, origin(request), state)

    @routes.get("/trials/{trial_id}/task", response_model=TaskDescription, tags=["protocol"])
    @endpoint
    def get_task(request: Request, session: SessionDep) -> TaskDescription:
        """What happened, what to deliver, by when, and which signals are available."""
        return operations.task(session, origin(request))

    @routes.post("/trials/{trial_id}/started", response_model=ProtocolState, tags=["protocol"])
    @endpoint
    def report_started(request: Request, session: SessionDep) -> ProtocolState:
        """Report STARTED: the agent has begun working on the trial."""
        return operations.started(session, origin(request))

    @routes.post("/trials/{trial_id}/finished", response_model=ProtocolState, tags=["protocol"])
    @endpoint
    def report_finished(request: Request, session: SessionDep) -> ProtocolState:
        """Report FINISHED: the agent is done; later calls are refused. Idempotent."""
        return operations.finished(session, origin(request))

    @routes.post(
        "/trials/{trial_id}/wait",
        response_model=WaitResult,
        tags=["protocol"],
        openapi_extra=body_schema(WaitRequest),
    )
    @endpoint
    def wait(
        request: Request, session: SessionDep, raw: Annotated[Payload, Depends(capped_body)]
    ) -> WaitResult:
        """Let time pass (for example until alerts clear), bounded by the deadline."""
        return operations.wait(session, origin(request), raw, fields_under="body")

    return routes
