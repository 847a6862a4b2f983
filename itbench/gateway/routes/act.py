"""The route of actions (docs/agent-api.md, "Act")."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request

from itbench.core.models.observations import ActionResult, AgentAction
from itbench.gateway import operations
from itbench.gateway.operations import Payload
from itbench.gateway.routes.bodies import body_schema, capped_body
from itbench.gateway.routes.deps import Endpoint, SessionDep, origin


def router(endpoint: Endpoint) -> APIRouter:
    """The act route, served as `endpoint` says."""
    routes = APIRouter(prefix="/v1")

    @routes.post(
        "/trials/{trial_id}/actions",
        response_model=ActionResult,
        tags=["act"],
        openapi_extra=body_schema(AgentAction),
    )
    @endpoint
    def act(
        request: Request, session: SessionDep, raw: Annotated[Payload, Depends(capped_body)]
    ) -> ActionResult:
        """Carry out one action (patch, set image/resources/env, scale, rollout, delete, apply,
        set a flag) after the guardrails."""
        return operations.act(session, origin(request), raw)

    return routes
