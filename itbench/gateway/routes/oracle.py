"""The oracle's route (docs/agent-api.md, "Guardrails"): the ground truth, only when allowed."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from itbench.gateway import operations
from itbench.gateway.routes.deps import Endpoint, SessionDep, origin


def router(endpoint: Endpoint) -> APIRouter:
    """The oracle route, served as `endpoint` says."""
    routes = APIRouter(prefix="/v1")

    @routes.get("/trials/{trial_id}/oracle", tags=["oracle"])
    @endpoint
    def get_oracle(request: Request, session: SessionDep) -> dict[str, Any]:
        """The ground truth (root causes, propagation, accepted mitigations); only when the
        run allows the oracle agent."""
        return operations.oracle(session, origin(request))

    return routes
