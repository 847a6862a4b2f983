"""Bodies agents send (actions and reports), validated into their models with every field path.

A transport hands over what it received: the raw bytes of an HTTP body, the arguments of an MCP
tool call, or a body that was too large to read. The size limit and the validation live here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from itbench.gateway.errors import InvalidError, TooLargeError, field_errors
from itbench.gateway.operations.calls import Call
from itbench.gateway.schemas import MAX_BODY_BYTES

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class Oversized:
    """A body larger than the limit, left unread past it.

    Attributes:
        size: Its size in bytes (declared, or read so far).
    """

    size: int


Payload = bytes | Mapping[str, Any] | Oversized
"""What a transport received as a body."""


def too_large(size: int) -> TooLargeError:
    """The error for a body of `size` bytes beyond MAX_BODY_BYTES."""
    return TooLargeError(
        "body-too-large",
        "Request body too large",
        f"body: {size} bytes exceeds the limit of {MAX_BODY_BYTES} bytes (256 KiB); "
        "shorten the reasoning or the entity list",
        extra={"limit": MAX_BODY_BYTES},
    )


def validate(model: type[M], payload: M | Payload, call: Call) -> M:
    """The body as a `model`, or an error listing every invalid field (kept on the call).

    Raises:
        TooLargeError: The body is beyond the size limit.
        InvalidError: The body does not validate.
    """
    if isinstance(payload, model):
        return payload
    if isinstance(payload, Oversized):
        raise too_large(payload.size)
    try:
        if isinstance(payload, bytes | bytearray):
            return model.model_validate_json(payload or b"")
        return model.model_validate(payload)
    except ValidationError as exc:
        errors = field_errors(exc)
        call.detail["errors"] = [e.model_dump() for e in errors]
        raise InvalidError(
            "invalid-body",
            "Invalid body",
            f"{model.__name__} is invalid at: {', '.join(e.field for e in errors)}",
            errors=errors,
        ) from None
