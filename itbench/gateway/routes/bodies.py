"""Request bodies as the routers read them: capped at the size limit without buffering more, and
the form or JSON parameters of POST queries, as Prometheus accepts them.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs

from fastapi import Request
from pydantic import BaseModel

from itbench.gateway.errors import MalformedError
from itbench.gateway.operations import Oversized, Payload
from itbench.gateway.operations.payloads import decode_utf8, parse_json, too_large
from itbench.gateway.schemas import MAX_BODY_BYTES


async def capped_body(request: Request) -> Payload:
    """Read the request body, stopping past MAX_BODY_BYTES without buffering it all."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        return Oversized(int(declared))
    chunks: list[bytes] = []
    total = 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > MAX_BODY_BYTES:
            return Oversized(total)
        chunks.append(chunk)
    return b"".join(chunks)


async def form(request: Request) -> dict[str, str]:
    """Form-encoded or JSON parameters of a POST query.

    Raises:
        TooLargeError: The body is beyond the size limit.
        MalformedError: A body that is not UTF-8, not JSON, nests too deeply or is not a JSON
            object.
    """
    raw = await capped_body(request)
    if isinstance(raw, Oversized):
        raise too_large(raw.size)
    assert isinstance(raw, bytes)
    if "json" in request.headers.get("content-type", ""):
        value = parse_json(raw or b"{}", "body")
        if not isinstance(value, dict):
            raise MalformedError("malformed-body", "Malformed body", "body: expected an object")
        return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in value.items()}
    text = decode_utf8(raw, "body")
    return {k: v[-1] for k, v in parse_qs(text).items()}


def body_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The OpenAPI request body of a route that reads a `model` as raw JSON."""
    return {
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": {"$ref": f"#/components/schemas/{model.__name__}"}}
            },
        }
    }


def form_schema(required: list[str], optional: list[str]) -> dict[str, Any]:
    """The OpenAPI request body of a POST query (form-encoded or JSON parameters)."""
    schema = {
        "type": "object",
        "required": required,
        "properties": {name: {"type": "string"} for name in [*required, *optional]},
    }
    return {
        "requestBody": {
            "required": True,
            "content": {
                "application/x-www-form-urlencoded": {"schema": schema},
                "application/json": {"schema": schema},
            },
        }
    }
