"""The app's error handlers: every error of the app, its own validation errors and unknown
routes included, answered with an RFC 7807 problem (`itbench.gateway.problems`)."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from itbench.gateway.errors import MAX_FIELD_ERRORS, CallError, FieldError, RefusedError, bounded
from itbench.gateway.metrics import REFUSED_KEY
from itbench.gateway.problems import PROBLEM_BASE, PROBLEM_MEDIA_TYPE, Problem, problem_answer
from itbench.gateway.routes.deps import caller_of


def problem_response(problem: Problem, headers: dict[str, str] | None = None) -> JSONResponse:
    """A JSON response carrying a problem."""
    return JSONResponse(
        problem.model_dump(mode="json"),
        status_code=problem.status,
        media_type=PROBLEM_MEDIA_TYPE,
        headers=headers,
    )


def install_handlers(app: FastAPI) -> None:
    """Answer every error of the app with a problem response, recording on the caller's trial
    the requests refused before their operation ran."""

    async def on_call_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, CallError)
        if isinstance(exc, RefusedError):
            request.scope[REFUSED_KEY] = True  # the request metrics count it as refused
        status, headers, body = problem_answer(
            exc, request.method, request.url.path, lambda: caller_of(request)
        )
        response = Response(body, status_code=status)
        response.raw_headers = headers
        return response

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
