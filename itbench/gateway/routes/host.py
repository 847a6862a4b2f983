"""Routes of a CISO trial's RHEL9 host and evidence sandbox (docs/agent-api.md, "Observe")."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request

from itbench.core.models.compliance import EvidenceCollection
from itbench.gateway.operations import Payload
from itbench.gateway.operations.host import host_command, host_files, try_collection
from itbench.gateway.routes.bodies import body_schema, capped_body
from itbench.gateway.routes.deps import Endpoint, SessionDep, origin
from itbench.gateway.schemas import CollectionRun, HostAnswer, HostCommand, HostFiles


def router(endpoint: Endpoint) -> APIRouter:
    """The host and sandbox routes, served as `endpoint` says."""
    routes = APIRouter(prefix="/v1")

    @routes.get("/trials/{trial_id}/host/files", response_model=HostFiles, tags=["observe"])
    @endpoint
    def get_host_files(
        request: Request,
        session: SessionDep,
        path: Annotated[
            str | None, Query(max_length=4096, description="One file's absolute path.")
        ] = None,
    ) -> HostFiles:
        """The RHEL9 host's files: every path with its mode and owners, or one file's text."""
        return host_files(session, origin(request), path)

    @routes.post(
        "/trials/{trial_id}/host/commands",
        response_model=HostAnswer,
        tags=["observe"],
        openapi_extra=body_schema(HostCommand),
    )
    @endpoint
    def run_host_command(
        request: Request, session: SessionDep, raw: Annotated[Payload, Depends(capped_body)]
    ) -> HostAnswer:
        """One of the host's read-only commands (sshd -T, systemctl, rpm -q, sysctl, ...)."""
        return host_command(session, origin(request), raw)

    @routes.post(
        "/trials/{trial_id}/collections",
        response_model=CollectionRun,
        tags=["observe"],
        openapi_extra=body_schema(EvidenceCollection),
    )
    @endpoint
    def run_collection(
        request: Request, session: SessionDep, raw: Annotated[Payload, Depends(capped_body)]
    ) -> CollectionRun:
        """Try an evidence collection in the sandbox against a read-only copy of the trial's
        environment (no network, no writes); answers its evidence or why it has none."""
        return try_collection(session, origin(request), raw)

    return routes
