"""RFC 7807 problem responses: every gateway error names its cause and the field or object.

Operations raise the domain errors of `itbench.gateway.errors`; `install_handlers` maps them, once,
to HTTP statuses and `application/problem+json` bodies, and does the same for FastAPI's own
validation errors and unknown routes. A call refused before its operation ran (a malformed,
oversized or incomplete request) is recorded on the caller's trial here.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from itbench.gateway.errors import (
    MAX_FIELD_ERRORS,
    BadInputError,
    CallError,
    EnvironmentUnavailableError,
    FieldError,
    InternalFailureError,
    InvalidError,
    NotFoundError,
    RefusedError,
    TooLargeError,
    UnauthenticatedError,
    WrongStateError,
    bounded,
)
from itbench.gateway.metrics import REFUSED_KEY
from itbench.gateway.routes.deps import caller_of
from itbench.gateway.sessions import TrialSession

PROBLEM_BASE = "https://itbench.io/problems/"
PROBLEM_MEDIA_TYPE = "application/problem+json"

STATUS: dict[type[CallError], int] = {
    UnauthenticatedError: 401,
    RefusedError: 403,
    WrongStateError: 409,
    NotFoundError: 404,
    BadInputError: 400,
    InvalidError: 422,
    TooLargeError: 413,
    EnvironmentUnavailableError: 503,
    InternalFailureError: 500,
}
"""The HTTP status of each kind of call error."""

REJECTED_BEFORE_ROUTE = frozenset({400, 413, 422})
"""Statuses of requests refused before their operation ran that the audit trail records."""


class Problem(BaseModel):
    """An RFC 7807 problem detail."""

    model_config = ConfigDict(extra="allow")

    type: str = Field(description="URI naming the kind of problem.")
    title: str = Field(description="Short summary of the kind of problem.")
    status: int = Field(description="HTTP status code.")
    detail: str = Field(description="What went wrong in this request and what to do instead.")
    instance: str = Field(default="", description="The request path.")
    errors: list[FieldError] = Field(
        default_factory=list, description="Invalid fields, for validation problems."
    )


def status_of(exc: CallError) -> int:
    """The HTTP status of a call error (by its kind; 500 for an unknown kind)."""
    for kind in type(exc).__mro__:
        if kind in STATUS:
            return STATUS[kind]
    return 500


def problem_of(exc: CallError, instance: str) -> Problem:
    """The problem body of a call error for a request path."""
    return Problem(
        type=PROBLEM_BASE + exc.slug,
        title=exc.title,
        status=status_of(exc),
        detail=exc.detail,
        instance=instance,
        errors=exc.errors,
        **exc.extra,
    )


def problem_response(problem: Problem, headers: dict[str, str] | None = None) -> JSONResponse:
    """A JSON response carrying a problem."""
    return JSONResponse(
        problem.model_dump(mode="json"),
        status_code=problem.status,
        media_type=PROBLEM_MEDIA_TYPE,
        headers=headers,
    )


def call_error_response(
    exc: CallError, method: str, path: str, caller: Callable[[], TrialSession | None]
) -> JSONResponse:
    """The problem response to a call error, recording on the caller's trial a request refused
    before its operation ran (once).

    Args:
        exc: The error.
        method: The request's method.
        path: The request's path.
        caller: Finds the session of the request's token (None: none).
    """
    status = status_of(exc)
    if not exc.recorded and status in REJECTED_BEFORE_ROUTE:
        session = caller()
        if session is not None:
            session.record(
                method=method, path=path, action="request", outcome="rejected", reason=exc.detail
            )
            exc.recorded = True
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return problem_response(problem_of(exc, path), headers)


def install_handlers(app: FastAPI) -> None:
    """Answer every error of the app with a problem response, recording on the caller's trial
    the requests refused before their operation ran."""

    async def on_call_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, CallError)
        if isinstance(exc, RefusedError):
            request.scope[REFUSED_KEY] = True  # the request metrics count it as refused
        return call_error_response(
            exc, request.method, request.url.path, lambda: caller_of(request)
        )

    async def on_validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        errors = [
            FieldError(
                field=bounded(".".join(str(p) for p in err.get("loc", ())) or "(request)", 200),
                message=bounded(str(err.get("msg", "invalid"))),
            )
            for err in exc.errors()[:MAX_FIELD_ERRORS]
        ]
        names = ", ".join(e.field for e in errors)
        session = caller_of(request)
        if session is not None:
            session.record(
                method=request.method,
                path=request.url.path,
                action="request",
                outcome="rejected",
                reason="invalid request parameters",
                detail={"errors": [str(e.get("loc")) for e in exc.errors()]},
            )
        return problem_response(
            Problem(
                type=PROBLEM_BASE + "invalid-request",
                title="Invalid request",
                status=422,
                detail=bounded(f"invalid request parameters: {names}"),
                instance=request.url.path,
                errors=errors,
            )
        )

    async def on_http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        slug = "not-found" if exc.status_code == 404 else f"http-{exc.status_code}"
        detail = (
            f"no such endpoint: {request.method} {request.url.path}; see /openapi.json"
            if exc.status_code in (404, 405)
            else str(exc.detail)
        )
        return problem_response(
            Problem(
                type=PROBLEM_BASE + slug,
                title=str(exc.detail),
                status=exc.status_code,
                detail=bounded(detail),
                instance=request.url.path,
            )
        )

    app.add_exception_handler(CallError, on_call_error)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
