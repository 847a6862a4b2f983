"""PromQL and LogQL from agents, held to the query limits before any parser or environment sees
them; the native PromQL parser is tried in its sandbox first (`itbench.gateway.sandbox`)."""

from __future__ import annotations

import functools
import os

from itbench.environments.sim.logql import LogQueryLimitError, check_logql_limits
from itbench.environments.sim.promql.limits import QueryLimitError, check_query_limits
from itbench.gateway.errors import BadInputError, FieldError, bounded, excerpt
from itbench.gateway.sandbox import ParserSandbox


@functools.cache
def _sandbox(pid: int) -> ParserSandbox:
    # One per process, built on first use (a worker process gets its own, never its parent's).
    return ParserSandbox()


def sandbox() -> ParserSandbox:
    """This process's PromQL parser sandbox."""
    return _sandbox(os.getpid())


def bad_query(exc: Exception, field: str, query: str | None = None) -> BadInputError:
    """The error for a query that is refused, with Prometheus' errorType/error members, the
    limit it exceeds (if that is why), and at most an excerpt of the query with its length."""
    message = str(exc)
    if query is not None and len(query) > 40:
        message = message.replace(repr(query), excerpt(query))
    message = bounded(message)
    extra: dict[str, object] = {"errorType": "bad_data", "error": message}
    limit = getattr(exc, "limit", None)
    if isinstance(limit, str):
        extra.update({"limit": limit, "maximum": getattr(exc, "maximum", None)})
    return BadInputError(
        "bad-query",
        "Bad query",
        f"{field}: {message}",
        errors=[FieldError(field=field, message=message)],
        extra=extra,
    )


def vet_promql(query: str, field: str = "query") -> None:
    """Hold a PromQL query to the limits, then try it on the parser in the sandbox.

    Raises:
        BadInputError: `bad-query` naming the limit, or saying the query crashed the parser.
    """
    try:
        check_query_limits(query)
    except QueryLimitError as exc:
        raise bad_query(exc, field, query) from None
    problem = sandbox().check(query)
    if problem is not None:
        raise bad_query(ValueError(f"{problem}; simplify it"), field, query)


def vet_logql(query: str, field: str = "query") -> None:
    """Hold a LogQL query to the limits (its parser is plain Python, so no sandbox).

    Raises:
        BadInputError: `bad-query` naming the limit.
    """
    try:
        check_logql_limits(query)
    except LogQueryLimitError as exc:
        raise bad_query(exc, field, query) from None
