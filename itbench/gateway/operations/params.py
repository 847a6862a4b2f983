"""Parameters as agents send them (Prometheus times and durations, JSON tag objects, counts),
parsed into typed values with errors naming the parameter.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from itbench.gateway.errors import (
    FieldError,
    InvalidError,
    MalformedError,
    bad_parameter,
    excerpt,
)
from itbench.gateway.operations.payloads import parse_json

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)")
_UNIT_SECONDS = {
    "ms": 0.001,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
    "w": 604800.0,
    "y": 31536000.0,
}

MAX_TAGS_CHARS = 4096
"""The longest span-tag object a trace search may give."""

MAX_DURATION_SECONDS = 365 * 86400.0
"""The longest duration a query parameter may give (longer ones overflow date arithmetic)."""


def parse_time(value: str | None, default: datetime, field: str) -> datetime:
    """Parse a Prometheus-style time: RFC 3339 or Unix seconds; `default` when absent.

    Raises:
        BadInputError: 400 naming the field when the value is neither.
    """
    if value is None or value == "":
        return default
    try:
        return datetime.fromtimestamp(float(value), UTC)
    except (OverflowError, OSError):  # inf, nan or beyond the calendar
        raise bad_parameter(
            field,
            f"{excerpt(value)} is not a time this gateway can represent",
            "expected a finite time in years 1-9999",
        ) from None
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise bad_parameter(
            field,
            f"{excerpt(value)} is neither RFC 3339 nor Unix seconds",
            "expected RFC 3339 or Unix seconds",
        ) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def parse_duration(value: str, field: str) -> float:
    """Parse a Prometheus duration (`15s`, `1m30s`) or plain seconds into seconds.

    Raises:
        BadInputError: 400 naming the field when it is not a positive duration.
    """
    seconds: float | None
    try:
        seconds = float(value)
    except ValueError:
        parts = _DURATION.findall(value)
        seconds = (
            sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)
            if parts and "".join(n + u for n, u in parts) == value
            else None
        )
    if seconds is None or not 0 < seconds <= MAX_DURATION_SECONDS:
        raise bad_parameter(
            field,
            f"{excerpt(value)} is not a positive duration of at most 365 days "
            "(e.g. 15s, 1m, or seconds)",
            "expected a positive duration",
        )
    return seconds


def parse_tags(value: str | dict[str, str] | None) -> dict[str, str]:
    """Span tags: a JSON object of strings (as text over HTTP, or already an object), within
    the length and depth limits before it is parsed.

    Raises:
        BadInputError: 400 naming `tags` when it is too long or not a JSON object.
    """
    if not value:
        return {}
    if isinstance(value, str):
        if len(value) > MAX_TAGS_CHARS:
            raise bad_parameter(
                "tags",
                f"{len(value)} characters; the limit is {MAX_TAGS_CHARS}",
                "expected a short JSON object of strings",
            )
        try:
            value = parse_json(value.encode("utf-8", "surrogatepass"), "tags")
        except MalformedError as exc:
            raise bad_parameter(
                "tags", exc.detail.removeprefix("tags: "), "expected a JSON object of strings"
            ) from None
    if not isinstance(value, dict):
        raise bad_parameter("tags", "expected a JSON object", "expected a JSON object of strings")
    return {str(k): str(v) for k, v in value.items()}


def bounded_int(value: int, field: str, low: int, high: int) -> int:
    """An integer parameter within [low, high].

    Raises:
        InvalidError: 422 naming the field otherwise.
    """
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        message = f"Input should be an integer from {low} to {high}"
        raise InvalidError(
            "invalid-request",
            "Invalid request",
            f"invalid request parameters: {field}",
            errors=[FieldError(field=field, message=message)],
        )
    return value


def required(value: str | None, field: str) -> str:
    """A parameter that must be given and non-empty.

    Raises:
        InvalidError: 422 naming the field when it is missing.
    """
    if not value:
        raise InvalidError(
            "invalid-request",
            "Invalid request",
            f"{field}: field required",
            errors=[FieldError(field=field, message="field required")],
        )
    return value
