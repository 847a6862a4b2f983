"""What a request to the served API addresses, how its body is read (JSON, YAML apply
configurations, protobuf) and how an answer is written; the hooks through which the API serves
what the store does not hold (pod logs, Service proxies)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import yaml
from aiohttp import web

from itbench.environments.served import protobuf
from itbench.environments.served.patches import APPLY_PATCH
from itbench.environments.served.resources import ResourceType
from itbench.environments.served.store import ApiError

Json = dict[str, Any]
Entry = tuple[float, str]
"""(epoch seconds, line) of one log entry."""

PodLog = Callable[[str, str], "list[Entry] | None"]
"""(namespace, pod) -> the pod's log entries, oldest first, or None when it has none here."""
ServiceProxy = Callable[[web.Request, str, str, str, str], Awaitable[web.StreamResponse | None]]
"""(request, namespace, service, port, path) -> the proxied answer, or None: nothing there."""


@dataclass
class Target:
    """What a resource path addresses."""

    rtype: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None
    rest: str = ""


@dataclass
class Hooks:
    """What the API serves from elsewhere than the store."""

    pod_log: PodLog | None = None
    service_proxy: ServiceProxy | None = None


def json_response(data: Any, status: int = 200) -> web.Response:
    """An answer with a JSON body."""
    return web.Response(
        body=json.dumps(data, separators=(",", ":")).encode(),
        status=status,
        content_type="application/json",
    )


def wants_table(request: web.Request) -> bool:
    """Whether the client asks for a Table (kubectl get)."""
    return "as=Table" in request.headers.get("Accept", "")


async def read_body(request: web.Request) -> Any:
    """The decoded body of a request (None when it has none).

    Raises:
        ApiError: 415 for a protobuf body that is not decoded here, 400 for invalid YAML.
        json.JSONDecodeError: For invalid JSON (answered 400).
    """
    raw = await request.read()
    if not raw:
        return None
    if request.content_type == protobuf.CONTENT_TYPE:
        try:
            return protobuf.decode(raw)
        except (protobuf.ProtobufError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ApiError(415, "UnsupportedMediaType", str(exc)) from exc
    if request.content_type == APPLY_PATCH:
        try:
            return yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise ApiError(400, "BadRequest", f"invalid apply configuration: {exc}") from exc
    return json.loads(raw)
