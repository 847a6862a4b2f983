"""What every router shares: the bearer token, the session dependency, the call's origin, and how
endpoints run (worker threads, or inline on the event loop for in-process callers).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import Depends, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from itbench.gateway.errors import RefusedError, UnauthenticatedError, UnknownTrialError
from itbench.gateway.operations import Origin
from itbench.gateway.sessions import SessionRegistry, TrialSession

Endpoint = Callable[[Callable[..., Any]], Callable[..., Any]]
"""Wraps a route function the way the app serves endpoints."""

bearer_scheme = HTTPBearer(
    auto_error=False, description="The trial's token: `Authorization: Bearer <token>`."
)


def registry_of(request: Request) -> SessionRegistry:
    """The session registry the app serves (set by `create_app`)."""
    registry: SessionRegistry = request.app.state.registry
    return registry


def bearer(authorization: str | None) -> str:
    """The token of an `Authorization: Bearer <token>` header.

    Raises:
        UnauthenticatedError: No header, or not a bearer token.
    """
    if not authorization:
        raise UnauthenticatedError(
            "unauthenticated",
            "Missing token",
            "send the trial's token as `Authorization: Bearer <token>`",
        )
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise UnauthenticatedError(
            "unauthenticated",
            "Malformed token",
            "the Authorization header must be `Bearer <token>`",
        )
    return token.strip()


def session_for_token(registry: SessionRegistry, token: str) -> TrialSession:
    """The open session a token belongs to.

    Raises:
        UnauthenticatedError: The token belongs to no open trial.
    """
    try:
        return registry.by_token(token)
    except UnknownTrialError:
        raise UnauthenticatedError(
            "unauthenticated",
            "Unknown token",
            "the token belongs to no open trial (it may have been closed)",
        ) from None


def caller_of(request: Request) -> TrialSession | None:
    """The session of the request's token, or None (for recording rejected requests)."""
    try:
        token = bearer(request.headers.get("authorization"))
        return registry_of(request).by_token(token)
    except (UnauthenticatedError, UnknownTrialError):
        return None


Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)]


def _caller(request: Request, credentials: HTTPAuthorizationCredentials | None) -> TrialSession:
    if credentials is None or not credentials.credentials.strip():
        raise UnauthenticatedError(
            "unauthenticated",
            "Missing token",
            "send the trial's token as `Authorization: Bearer <token>`",
        )
    return session_for_token(registry_of(request), credentials.credentials.strip())


async def caller(request: Request, credentials: Credentials) -> TrialSession:
    """The session of the caller's token.

    Raises:
        UnauthenticatedError: Missing, malformed or unknown token.
    """
    return _caller(request, credentials)


async def trial(
    request: Request,
    trial_id: Annotated[str, Path(description="The trial id.")],
    credentials: Credentials,
) -> TrialSession:
    """The session of the trial in the path, which must be the token's own (else audited 403).

    It reads the token itself rather than through `caller`: one dependency less to solve on
    every call of an agent.
    """
    me = _caller(request, credentials)
    if me.trial_id != trial_id:
        reason = (
            f"the token reaches trial {me.trial_id!r} only, not {trial_id!r}; "
            "trials never see each other"
        )
        me.record(
            method=request.method,
            path=request.url.path,
            action="access",
            outcome="refused",
            reason=reason,
        )
        refused = RefusedError("forbidden-trial", "Another trial", reason)
        refused.recorded = True
        raise refused
    return me


CallerDep = Annotated[TrialSession, Depends(caller)]
"""The caller's session, for routes outside a trial path."""
SessionDep = Annotated[TrialSession, Depends(trial)]
"""The session of the trial in the path."""


def origin(request: Request) -> Origin:
    """Where the call came from, for the audit trail."""
    return Origin(request.method, request.url.path)


def run_inline(func: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    """Make a blocking endpoint run on the event loop instead of a worker thread.

    For a gateway whose only caller is an in-process client that waits for each answer anyway
    (the embedded benchmark), the hop to a thread and back buys nothing and costs a fifth of a
    trial's time. FastAPI reads the signature through `functools.wraps`.
    """

    @functools.wraps(func)
    async def call(*args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)

    return call


def endpoint_wrapper(inline: bool) -> Endpoint:
    """How the app serves endpoints: inline on the event loop, or (default) in worker threads."""
    if inline:
        return run_inline

    def threaded(func: Callable[..., Any]) -> Callable[..., Any]:
        return func

    return threaded
