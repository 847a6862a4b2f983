"""RFC 7807 problems: every gateway error names its cause and the field or object.

Operations raise the domain errors of `itbench.gateway.errors`; this module maps them, once, to
HTTP statuses and `application/problem+json` documents, and records on the caller's trial a call
refused before its operation ran (a malformed, oversized or incomplete request). The app's
handlers (`itbench.gateway.routes.handlers`) and the in-process answers
(`itbench.gateway.inprocess`) both answer through it; it needs no web framework.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from itbench.gateway.errors import (
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
)
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


def json_document(value: Any) -> bytes:
    """A value as the app's JSON responses write it: compact, UTF-8, no NaN (raises
    ValueError or TypeError for what plain JSON has no form for)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def problem_answer(
    exc: CallError, method: str, path: str, caller: Callable[[], TrialSession | None]
) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """A call error's response as (status, headers, body), recording on the caller's trial a
    request refused before its operation ran (once). The app's handler and the in-process answers
    both send it.

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
    body = json_document(problem_of(exc, path).model_dump(mode="json"))
    headers = [(b"www-authenticate", b"Bearer")] if status == 401 else []
    headers += [
        (b"content-length", str(len(body)).encode()),
        (b"content-type", PROBLEM_MEDIA_TYPE.encode()),
    ]
    return status, headers, body
