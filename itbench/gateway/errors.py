"""The domain errors of the gateway's operations: what went wrong with a call, naming the field or
object, and what the agent can do instead.

Operations raise them; each transport maps them once (HTTP problem documents in
`itbench.gateway.problems`, MCP tool errors in `itbench.gateway.mcp`). No web framework here.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

EXCERPT_CHARS = 200
"""The most characters of an agent's value that an error quotes (with the value's length)."""


class FieldError(BaseModel):
    """One invalid field of a request."""

    model_config = ConfigDict(extra="forbid")

    field: str = Field(description="Dotted path of the field, e.g. `entities.0.kind`.")
    message: str = Field(description="What is wrong with it.")


def excerpt(value: object, limit: int = EXCERPT_CHARS) -> str:
    """A bounded quotation of a value: its repr, cut with its length when longer than `limit`.

    Errors quote what an agent sent so that it can see what was wrong, but never the whole of a
    large value: a 200 KB query must not come back as a 600 KB error.
    """
    text = value if isinstance(value, str) else repr(value)
    if len(text) <= limit:
        return repr(text) if isinstance(value, str) else text
    head = text[:limit]
    return f"{head!r}... ({len(text)} characters)"


def bounded(message: str, limit: int = 4 * EXCERPT_CHARS) -> str:
    """A message cut to `limit` characters (with its full length), for text built elsewhere
    (a parser's error) that may quote the agent's value whole."""
    if len(message) <= limit:
        return message
    return f"{message[:limit]}... ({len(message)} characters in all)"


class CallError(Exception):
    """A call that did not succeed; the subclass says what kind of failure it is.

    Attributes:
        slug: The problem type (`forbidden-observability`, `bad-query`, ...).
        title: A short summary of the kind of problem.
        detail: The specific cause, naming the field or object, and what to do instead.
        errors: Invalid fields.
        extra: More members of the problem (`rule`, `limit`, ...).
        recorded: Whether the call is already on a trial's audit trail.
    """

    outcome: ClassVar[str] = "error"
    """How the audit trail records the call: `refused`, `rejected` or `error`."""

    def __init__(
        self,
        slug: str,
        title: str,
        detail: str,
        *,
        errors: list[FieldError] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        """Describe the failure.

        Args:
            slug: Problem type.
            title: Short summary.
            detail: The specific cause, naming the field or object.
            errors: Invalid fields.
            extra: More members of the problem object.
        """
        super().__init__(detail)
        self.slug = slug
        self.title = title
        self.detail = detail
        self.errors = errors or []
        self.extra = extra or {}
        self.recorded = False


class UnauthenticatedError(CallError):
    """No token, a malformed one, or one that belongs to no open trial."""

    outcome = "refused"


class RefusedError(CallError):
    """A guardrail refused the call (or the token reaches another trial)."""

    outcome = "refused"


class WrongStateError(CallError):
    """The trial is not in a state that accepts the call (not Ready, finished, past deadline)."""

    outcome = "refused"


class NotFoundError(CallError):
    """The object, or the signal, does not exist in this trial."""


class BadInputError(CallError):
    """A parameter, query or body that cannot be used as given (a malformed time, bad PromQL)."""


class MalformedError(BadInputError):
    """A body that is not what its content type says (not UTF-8, not JSON, nested too deeply)."""

    outcome = "rejected"


class InvalidError(CallError):
    """A body or parameter that fails validation; `errors` lists every field path."""

    outcome = "rejected"


class TooLargeError(CallError):
    """A body beyond the size limit."""

    outcome = "rejected"


class EnvironmentUnavailableError(CallError):
    """The trial's environment failed; the trial is Errored, not counted against the agent."""


class InternalFailureError(CallError):
    """The gateway itself failed on the call."""


MAX_FIELD_ERRORS = 50
"""The most field errors one problem lists (a body with 10,000 unknown keys gets 50 and a count)."""


def field_errors(exc: ValidationError, prefix: str = "") -> list[FieldError]:
    """The errors of a pydantic validation, one per field path, at most MAX_FIELD_ERRORS (the
    last entry then counts the rest).

    Args:
        exc: The validation error.
        prefix: Prepended to each path (e.g. `body`).
    """
    out: list[FieldError] = []
    found = exc.errors()
    for err in found[:MAX_FIELD_ERRORS]:
        path = bounded(".".join(str(p) for p in err["loc"]), EXCERPT_CHARS)
        full = ".".join(p for p in (prefix, path) if p)
        out.append(FieldError(field=full or "(body)", message=bounded(err["msg"])))
    if len(found) > MAX_FIELD_ERRORS:
        out.append(
            FieldError(
                field="(more)", message=f"{len(found) - MAX_FIELD_ERRORS} more invalid fields"
            )
        )
    return out


def bad_parameter(field: str, detail: str, expected: str) -> BadInputError:
    """The error for a query parameter that cannot be used, naming it."""
    return BadInputError(
        "bad-parameter",
        "Invalid parameter",
        f"{field}: {detail}",
        errors=[FieldError(field=field, message=expected)],
    )


def refusal_error(rule: str, reason: str) -> RefusedError:
    """The error for a guardrail's refusal."""
    return RefusedError(f"forbidden-{rule}", "Refused by a guardrail", reason, extra={"rule": rule})


class UnknownTrialError(KeyError):
    """No open session has that trial id or token."""
