"""Bodies agents send (actions and reports), checked against the size and depth limits before any
parser sees them, then validated into their models with every field path.

A transport hands over what it received: the raw bytes of an HTTP body, the arguments of an MCP
tool call, or a body that was too large to read. The limits and the validation live here once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from itbench.gateway.errors import (
    InvalidError,
    MalformedError,
    TooLargeError,
    bounded,
    excerpt,
    field_errors,
)
from itbench.gateway.operations.calls import Call
from itbench.gateway.schemas import MAX_BODY_BYTES

M = TypeVar("M", bound=BaseModel)

MAX_JSON_DEPTH = 64
"""The deepest nesting of arrays and objects a JSON body or parameter may have (Kubernetes
objects nest about a dozen levels)."""

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


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


def json_depth(raw: bytes) -> int:
    """How deeply a JSON text nests arrays and objects, read without parsing it (strings are
    skipped); cheap when the text has few brackets at all."""
    if raw.count(b"[") + raw.count(b"{") <= MAX_JSON_DEPTH:
        return raw.count(b"[") + raw.count(b"{")
    brackets = _STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    depth = deepest = 0
    for byte in brackets:
        if byte in (0x5B, 0x7B):  # [ {
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def decode_utf8(raw: bytes, field: str) -> str:
    """The text of a body or parameter that must be UTF-8.

    Raises:
        MalformedError: 400 naming the field and the first byte that is not UTF-8.
    """
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedError(
            "malformed-body",
            "Malformed body",
            f"{field}: not UTF-8 (byte 0x{raw[exc.start]:02x} at position {exc.start} of "
            f"{len(raw)} bytes); send text encoded as UTF-8",
        ) from None


def check_json_text(raw: bytes, field: str) -> str:
    """The text of a JSON body or parameter, once it is UTF-8 and within the depth limit.

    Raises:
        MalformedError: 400 naming the field: not UTF-8, or nested beyond MAX_JSON_DEPTH.
    """
    text = decode_utf8(raw, field)
    depth = json_depth(raw)
    if depth > MAX_JSON_DEPTH:
        raise MalformedError(
            "malformed-body",
            "Malformed body",
            f"{field}: JSON nested {depth} levels deep; the limit is {MAX_JSON_DEPTH}",
            extra={"limit": MAX_JSON_DEPTH},
        )
    return text


def parse_json(raw: bytes, field: str) -> Any:
    """A JSON body or parameter, parsed only once it is within the limits.

    Raises:
        MalformedError: 400 naming the field: not UTF-8, nested too deeply, or not JSON.
    """
    text = check_json_text(raw, field)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise MalformedError(
            "malformed-body",
            "Malformed body",
            f"{field}: not JSON ({exc.msg} at position {exc.pos} of {len(text)}: "
            f"{excerpt(text[max(exc.pos - 20, 0) : exc.pos + 20])})",
        ) from None
    except RecursionError:
        raise MalformedError(
            "malformed-body", "Malformed body", f"{field}: JSON nested too deeply"
        ) from None


def _check_mapping(payload: Mapping[str, Any]) -> None:
    # Arguments another transport already parsed: the same limits, measured on the value.
    stack: list[tuple[Any, int]] = [(payload, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise MalformedError(
                "malformed-body",
                "Malformed body",
                f"body: JSON nested more than {MAX_JSON_DEPTH} levels deep",
                extra={"limit": MAX_JSON_DEPTH},
            )
        if isinstance(value, Mapping):
            stack.extend((v, depth + 1) for v in value.values() if isinstance(v, Mapping | list))
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value if isinstance(v, Mapping | list))
    size = len(json.dumps(payload, default=str).encode())
    if size > MAX_BODY_BYTES:
        raise too_large(size)


def validate(model: type[M], payload: M | Payload, call: Call, *, fields_under: str = "") -> M:
    """The body as a `model`, or an error listing every invalid field (kept on the call).

    `fields_under` prefixes the field paths (where the transport keeps the body's fields).

    Raises:
        TooLargeError: The body is beyond the size limit.
        MalformedError: The body is not UTF-8, or nests too deeply.
        InvalidError: The body does not validate.
    """
    if isinstance(payload, model):
        return payload
    if isinstance(payload, Oversized):
        raise too_large(payload.size)
    try:
        if isinstance(payload, bytes | bytearray):
            return model.model_validate_json(check_json_text(bytes(payload), "body") or b"")
        assert isinstance(payload, Mapping)
        _check_mapping(payload)
        return model.model_validate(payload)
    except ValidationError as exc:
        errors = field_errors(exc, fields_under)
        call.detail["errors"] = [e.model_dump() for e in errors]
        raise InvalidError(
            "invalid-body",
            "Invalid body",
            bounded(f"{model.__name__} is invalid at: {', '.join(e.field for e in errors)}"),
            errors=errors,
        ) from None
