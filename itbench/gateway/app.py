"""The agent API: one FastAPI app per gateway, serving every open trial session of a registry.

Agents poll for their trial, read the task, observe, act and submit through these endpoints. The
routers (`itbench.gateway.routes`, one per section of docs/agent-api.md) translate HTTP into calls
of the operations layer (`itbench.gateway.operations`), which applies the guardrails and limits,
costs virtual time in the simulator and writes the trial's audit trail. Every error is an RFC 7807
problem naming the field or object.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from itbench import __version__
from itbench.core.models.agent_io import DiagnosisReport, MitigationReport, PostureReport
from itbench.core.models.observations import AgentAction
from itbench.gateway.inprocess import InProcessRoutes
from itbench.gateway.metrics import GatewayMetrics
from itbench.gateway.problems import Problem
from itbench.gateway.routes import act, host, observe, oracle, protocol, submit
from itbench.gateway.routes.deps import endpoint_wrapper
from itbench.gateway.routes.handlers import install_handlers
from itbench.gateway.schemas import WaitRequest
from itbench.gateway.sessions import SessionRegistry

ROUTERS = (protocol, observe, host, act, submit, oracle)
"""The router modules, in the order of docs/agent-api.md."""


def create_app(
    registry: SessionRegistry, *, inline: bool = False, metrics: GatewayMetrics | None = None
) -> FastAPI:
    """Build the agent API over a registry of trial sessions.

    Args:
        registry: The sessions this gateway serves; the runner opens and closes them.
        inline: Run endpoints on the event loop (for in-process callers); by default they run
            in worker threads, so that a slow environment never blocks other agents' calls.
            An inline app without metrics also answers in-process clients' most frequent calls
            without the framework (`app.state.in_process`, see `itbench.gateway.inprocess`).
        metrics: Where to count and time requests (None: unmeasured).

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
    app.state.registry = registry
    install_handlers(app)
    endpoint = endpoint_wrapper(inline)
    routers = [module.router(endpoint) for module in ROUTERS]
    for router in routers:
        app.include_router(router)
    app.openapi = _openapi_with_models(app)  # type: ignore[method-assign]
    if metrics is not None:
        metrics.instrument(app, [route for router in routers for route in router.routes])
    elif inline:
        # In-process clients get the most frequent calls answered without the framework.
        app.state.in_process = InProcessRoutes(registry)
    return app


def _openapi_with_models(app: FastAPI) -> Callable[[], dict[str, Any]]:
    """The OpenAPI generator, plus the schemas of raw-body requests and the problem type."""

    def generate() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        doc = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        schemas: dict[str, Any] = doc.setdefault("components", {}).setdefault("schemas", {})
        for model in (
            AgentAction,
            DiagnosisReport,
            MitigationReport,
            PostureReport,
            Problem,
            WaitRequest,
        ):
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
