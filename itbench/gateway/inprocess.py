"""The calls agents make most, answered for an in-process client without the HTTP framework.

An in-process client (`itbench.client.InProcessTransport`) offers each request to
`InProcessRoutes.answer` before the app. A request on one of the routes below, carrying a
well-formed bearer token of the trial in its path and parameters its HTTP route accepts, is
answered here: the same operation with the same origin (method and path), an error as the same RFC
7807 problem recorded the same way, and a JSON document of the same values. Anything else (another
route, a missing, unknown or foreign token, a parameter the route would refuse, a body beyond the
size limit, an escaped path) gets None and goes through the app, whose dependencies, validation and
handlers answer and record it exactly as over HTTP; none of them has run an operation or written
the audit trail by then.

The HTTP framework's routing, dependency solving and response validation cost an agent's call about
as much as the work it asks for; a benchmark's agents make tens of calls per trial.
`tests/integration/gateway/test_gateway_inprocess.py` sends the same requests both ways and
compares status, document and audit trail.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any
from urllib.parse import parse_qsl

from pydantic import BaseModel
from pydantic_core import to_json

from itbench.gateway import operations
from itbench.gateway.errors import CallError, UnknownTrialError
from itbench.gateway.operations import Origin, Payload
from itbench.gateway.operations.observe import MAX_LOG_LINES
from itbench.gateway.operations.protocol import REPORT_MODELS, ReportName
from itbench.gateway.problems import json_document, problem_answer
from itbench.gateway.schemas import MAX_BODY_BYTES
from itbench.gateway.sessions import SessionRegistry, TrialSession

Request = tuple[str, bytes, bytes, list[tuple[bytes, bytes]], bytes]
"""(method, raw path, query string, headers, body), as `InProcessTransport.exchange` takes it."""
Answer = tuple[int, list[tuple[bytes, bytes]], bytes]
"""(status, response headers, response body), as `InProcessTransport.exchange` returns it."""

Params = dict[str, str]
Handler = Callable[[TrialSession, Origin, Params, Payload], Any]
"""Runs one route's operation and returns what the route returns; raises `_DeclinedError` before
the operation runs when the route's HTTP form would refuse the parameters."""

_PATH = re.compile(rb"/v1/trials/([A-Za-z0-9._~:-]+)/([a-z_/]+)")
"""A trial route's path without escapes: the trial id (as the app's `{trial_id}` reads it when
nothing in the path is escaped) and the route's own part."""


_JSON = (b"content-type", b"application/json")


class _DeclinedError(Exception):
    """The request is left to the app (its validation answers and records it)."""


def _required(params: Params, name: str) -> str:
    # A query parameter declared `Query(min_length=1)` without a default.
    value = params.get(name)
    if not value:
        raise _DeclinedError
    return value


def _count(params: Params, name: str, default: int, most: int) -> int:
    # An `int` query parameter declared `Query(ge=1, le=most)`: plain digits in bounds only (the
    # app's validation answers any other form).
    value = params.get(name)
    if value is None:
        return default
    if not (value.isascii() and value.isdigit()) or not 1 <= int(value) <= most:
        raise _DeclinedError
    return int(value)


def _submission(report: ReportName) -> Handler:
    def submit(session: TrialSession, origin: Origin, params: Params, body: Payload) -> Any:
        return operations.submit(session, origin, report, body)

    return submit


def _routes() -> dict[tuple[str, str], Handler]:
    routes: dict[tuple[str, str], Handler] = {
        ("GET", "task"): lambda s, o, q, b: operations.task(s, o),
        ("POST", "started"): lambda s, o, q, b: operations.started(s, o),
        ("POST", "finished"): lambda s, o, q, b: operations.finished(s, o),
        ("POST", "wait"): lambda s, o, q, b: operations.wait(s, o, b, fields_under="body"),
        ("GET", "alerts"): lambda s, o, q, b: operations.alerts(s, o),
        ("GET", "metrics/query"): lambda s, o, q, b: operations.instant_query(
            s, o, _required(q, "query"), q.get("time")
        ),
        ("GET", "metrics/query_range"): lambda s, o, q, b: operations.range_query(
            s, o, _required(q, "query"), q.get("start"), q.get("end"), q.get("step")
        ),
        ("GET", "logs/query_range"): lambda s, o, q, b: operations.logs(
            s,
            o,
            _required(q, "query"),
            q.get("start"),
            q.get("end"),
            _count(q, "limit", 100, MAX_LOG_LINES),
        ),
        ("GET", "topology"): lambda s, o, q, b: operations.topology(s, o),
        ("GET", "kubectl/get"): lambda s, o, q, b: operations.get_json(
            s, o, _required(q, "kind"), q.get("name"), q.get("namespace")
        ),
        ("GET", "kubectl/events"): lambda s, o, q, b: operations.events_json(
            s, o, q.get("kind"), q.get("name")
        ),
        ("POST", "actions"): lambda s, o, q, b: operations.act(s, o, b),
    }
    for report in REPORT_MODELS:
        routes["POST", report] = _submission(report)
    return routes


def _list_trials(session: TrialSession, origin: Origin, params: Params, body: Payload) -> Any:
    return operations.list_trials(session, origin, params.get("state"))


ROUTES = _routes()
"""The routes answered in process, by (method, path after `/v1/trials/{trial_id}/`); and
`GET /v1/trials`."""


class InProcessRoutes:
    """Answers the routes of `ROUTES` for the sessions of a registry (see the module)."""

    def __init__(self, registry: SessionRegistry) -> None:
        """Serve the sessions of `registry`, as the app built over it does."""
        self._registry = registry

    def answer(self, request: Request) -> Answer | None:
        """The answer to one request, or None when the app is to answer it.

        Args:
            request: (method, path as sent (percent-escaped), query string as sent, headers with
                names in lower case, the whole body).
        """
        method, raw_path, query, headers, body = request
        if raw_path == b"/v1/trials" and method == "GET":
            # The trials the token reaches: the caller's own, whatever trial that is.
            handler: Handler | None = _list_trials
            session = self._session(headers)
        else:
            match = _PATH.fullmatch(raw_path)
            if match is None:
                return None
            handler = ROUTES.get((method, match[2].decode("ascii")))
            session = self._session(headers) if handler is not None else None
            if session is not None and session.trial_id != match[1].decode("ascii"):
                return None
        if handler is None or session is None:
            return None
        payload = _payload(headers, body)
        if payload is None:
            return None
        # Starlette reads the query string as Latin-1, and the last of repeated names wins.
        params = dict(parse_qsl(query.decode("latin-1"), keep_blank_values=True))
        path = raw_path.decode("ascii")
        try:
            result = handler(session, Origin(method, path), params, payload)
        except _DeclinedError:
            return None
        except CallError as exc:
            return problem_answer(exc, method, path, lambda: session)
        document = _document(result)
        headers = [(b"content-length", str(len(document)).encode()), _JSON]
        return 200, headers, document

    def _session(self, headers: list[tuple[bytes, bytes]]) -> TrialSession | None:
        # The token as the app's bearer dependency reads it: the first Authorization header,
        # scheme `Bearer` in any case, then the credentials stripped.
        for name, value in headers:
            if name == b"authorization":
                scheme, _, credentials = value.decode("latin-1").partition(" ")
                token = credentials.strip()
                if scheme.lower() != "bearer" or not token:
                    return None
                try:
                    return self._registry.by_token(token)
                except UnknownTrialError:
                    return None
        return None


def _payload(headers: list[tuple[bytes, bytes]], body: bytes) -> Payload | None:
    # The body as the routes' `capped_body` reads it; a declared or actual size beyond the limit
    # is left to the app, which refuses it.
    if len(body) > MAX_BODY_BYTES:
        return None
    for name, value in headers:
        if name == b"content-length":
            declared = value.decode("latin-1")
            if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
                return None
            break
    return body


def _document(result: Any) -> bytes:
    """The JSON document of a route's result: its bytes as given, a model by its aliases, any
    other value as the app's JSON response writes it."""
    if isinstance(result, bytes):
        return result
    if isinstance(result, BaseModel):
        return result.model_dump_json(by_alias=True).encode()
    try:
        return json_document(result)
    except (TypeError, ValueError):
        # Values plain JSON has no form for (a time, NaN): as the app's validation writes them.
        return to_json(result, inf_nan_mode="null")


class InProcessGateway:
    """The gateway an in-process client calls: the in-process answers first, then the app
    (`create_app(registry, inline=True)`), built when a request first needs it. A process whose
    agents make only the calls answered in process (a benchmark worker running the baselines)
    never loads the web framework."""

    def __init__(self, registry: SessionRegistry) -> None:
        """Serve the sessions of `registry`."""
        self.registry = registry
        self.state = SimpleNamespace(in_process=InProcessRoutes(registry))
        self._app: Any = None
        self._lock = threading.Lock()

    @property
    def app(self) -> Any:
        """The app (built on first use)."""
        with self._lock:
            if self._app is None:
                from itbench.gateway.app import create_app

                self._app = create_app(self.registry, inline=True)
            return self._app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Serve one ASGI exchange through the app."""
        await self.app(scope, receive, send)
