"""RFC 7807 problem responses: every gateway error names its cause and the field or object.

Route code raises `ProblemError`; `install_handlers` maps it, FastAPI's own validation errors and
unknown routes to `application/problem+json` bodies.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

PROBLEM_BASE = "https://itbench.io/problems/"
PROBLEM_MEDIA_TYPE = "application/problem+json"


class FieldError(BaseModel):
    """One invalid field of a request."""

    model_config = ConfigDict(extra="forbid")

    field: str = Field(description="Dotted path of the field, e.g. `entities.0.kind`.")
    message: str = Field(description="What is wrong with it.")


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


class ProblemError(Exception):
    """Raised by route code to answer with a problem response."""

    def __init__(
        self,
        status: int,
        slug: str,
        title: str,
        detail: str,
        *,
        errors: list[FieldError] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        """Describe the problem.

        Args:
            status: HTTP status.
            slug: Problem type, appended to the problem base URI.
            title: Short summary.
            detail: The specific cause, naming the field or object.
            errors: Invalid fields.
            extra: More members of the problem object.
        """
        super().__init__(detail)
        self.status = status
        self.slug = slug
        self.title = title
        self.detail = detail
        self.errors = errors or []
        self.extra = extra or {}
        self.recorded = False
        """Whether the call is already on a trial's audit trail."""

    def problem(self, instance: str) -> Problem:
        """The problem body for a request path."""
        return Problem(
            type=PROBLEM_BASE + self.slug,
            title=self.title,
            status=self.status,
            detail=self.detail,
            instance=instance,
            errors=self.errors,
            **self.extra,
        )


def field_errors(exc: ValidationError, prefix: str = "") -> list[FieldError]:
    """The errors of a pydantic validation, one per field path.

    Args:
        exc: The validation error.
        prefix: Prepended to each path (e.g. `body`).
    """
    out: list[FieldError] = []
    for err in exc.errors():
        path = ".".join(str(p) for p in err["loc"])
        full = ".".join(p for p in (prefix, path) if p)
        out.append(FieldError(field=full or "(body)", message=err["msg"]))
    return out


def problem_response(problem: Problem, headers: dict[str, str] | None = None) -> JSONResponse:
    """A JSON response carrying a problem."""
    return JSONResponse(
        problem.model_dump(mode="json"),
        status_code=problem.status,
        media_type=PROBLEM_MEDIA_TYPE,
        headers=headers,
    )


def install_handlers(app: FastAPI) -> None:
    """Answer every error of the app with a problem response."""

    async def on_problem(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ProblemError)
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return problem_response(exc.problem(request.url.path), headers)

    async def on_validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        errors = [
            FieldError(
                field=".".join(str(p) for p in err.get("loc", ())) or "(request)",
                message=str(err.get("msg", "invalid")),
            )
            for err in exc.errors()
        ]
        names = ", ".join(e.field for e in errors)
        return problem_response(
            Problem(
                type=PROBLEM_BASE + "invalid-request",
                title="Invalid request",
                status=422,
                detail=f"invalid request parameters: {names}",
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
                detail=detail,
                instance=request.url.path,
            )
        )

    app.add_exception_handler(ProblemError, on_problem)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
