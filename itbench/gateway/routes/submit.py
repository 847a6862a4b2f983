"""Routes of the reports (docs/agent-api.md, "Submit"): diagnosis, mitigation and posture."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel

from itbench.gateway import operations
from itbench.gateway.operations import Payload
from itbench.gateway.operations.protocol import REPORT_MODELS, ReportName
from itbench.gateway.routes.bodies import body_schema, capped_body
from itbench.gateway.routes.deps import Endpoint, SessionDep, origin
from itbench.gateway.schemas import SubmissionReceipt


def _submission_route(
    routes: APIRouter, endpoint: Endpoint, report: ReportName, model: type[BaseModel]
) -> None:
    @endpoint
    def submit_report(
        request: Request, session: SessionDep, raw: Annotated[Payload, Depends(capped_body)]
    ) -> SubmissionReceipt:
        return operations.submit(session, origin(request), report, raw)

    submit_report.__doc__ = (
        f"Submit the {report} report (validated; malformed or larger than 256 KiB is "
        "rejected and counted, and the trial is still scored)."
    )
    routes.add_api_route(
        f"/trials/{{trial_id}}/{report}",
        submit_report,
        methods=["POST"],
        response_model=SubmissionReceipt,
        tags=["submit"],
        name=f"submit_{report}",
        openapi_extra=body_schema(model),
    )


def router(endpoint: Endpoint) -> APIRouter:
    """The submission routes, served as `endpoint` says."""
    routes = APIRouter(prefix="/v1")
    for report, model in REPORT_MODELS.items():
        _submission_route(routes, endpoint, report, model)
    return routes
