"""The agent SDK: typed sync and async clients for the ITBench agent API (httpx).

Use it against a remote gateway (`ITBenchClient(url, token)`) or in-process without a socket
(`ITBenchClient.in_process(app, token)`). Errors raise `ITBenchAPIError` with the problem detail.
The payload models an agent needs are re-exported here.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote, unquote

import httpx
from pydantic_core import from_json

from itbench.client_http import LeanConnection, lean_target
from itbench.core.agent_failures import MODEL_UNAVAILABLE_EXIT, ModelUnavailableError
from itbench.core.mitigations import mitigation_to_actions
from itbench.core.models.agent_io import (
    ControlAssessment,
    DiagnosisReport,
    MitigationReport,
    PostureReport,
    PredictedEdge,
    PredictedEntity,
)
from itbench.core.models.base import Domain, TelemetryToggles
from itbench.core.models.compliance import (
    CollectionKind,
    ComplianceSubmission,
    EvidenceCollection,
)
from itbench.core.models.observations import (
    ActionResult,
    ActionVerb,
    AgentAction,
    Alert,
    AlertState,
)
from itbench.core.models.scenario import (
    EntityKind,
    FaultCategory,
    GroundTruth,
    GroundTruthEntity,
    Mitigation,
    MitigationStep,
    PostureResult,
    PropagationEdge,
)
from itbench.gateway.schemas import (
    CollectionRun,
    EventList,
    HostAnswer,
    HostCommand,
    HostFiles,
    KubectlDescribe,
    KubectlGet,
    PodLogs,
    ProtocolState,
    SubmissionReceipt,
    TaskDescription,
    TopologyView,
    TrialList,
    TrialSummary,
    WaitResult,
)

__all__ = [
    "MODEL_UNAVAILABLE_EXIT",
    "ActionResult",
    "ActionVerb",
    "AgentAction",
    "Alert",
    "AlertState",
    "AsyncITBenchClient",
    "CollectionKind",
    "ComplianceSubmission",
    "ControlAssessment",
    "DiagnosisReport",
    "Domain",
    "EntityKind",
    "EventList",
    "EvidenceCollection",
    "FaultCategory",
    "GroundTruth",
    "GroundTruthEntity",
    "ITBenchAPIError",
    "ITBenchClient",
    "KubectlDescribe",
    "KubectlGet",
    "Mitigation",
    "MitigationReport",
    "MitigationStep",
    "ModelUnavailableError",
    "NoReadyTrialError",
    "PodLogs",
    "PostureReport",
    "PostureResult",
    "PredictedEdge",
    "PredictedEntity",
    "PropagationEdge",
    "ProtocolState",
    "SubmissionReceipt",
    "TaskDescription",
    "TelemetryToggles",
    "TopologyView",
    "TrialSummary",
    "WaitResult",
    "mitigation_to_actions",
]

T = TypeVar("T")
TimeArg = datetime | float | str | None


IN_PROCESS_URL = "http://itbench.gateway"


class InProcessTransport(httpx.BaseTransport):
    """A synchronous httpx transport that calls an ASGI app directly, on a private event loop.

    Each request runs the app to completion on the calling thread; no socket, no server. The
    ASGI exchange is done here (one request message, the response collected in memory), which
    is all an in-process call needs.

    An app whose `state.in_process` has an `answer((method, raw_path, query, headers, body))`
    (the gateway's, see `itbench.gateway.inprocess`) is offered each request first; the requests
    it answers None to go through the app.
    """

    def __init__(self, app: Any, *, shortcuts: bool = True) -> None:
        """Wrap an ASGI app.

        Args:
            app: The app.
            shortcuts: Offer requests to the app's in-process answers first (False: every
                request goes through the app).
        """
        self._app = app
        self._loop = asyncio.new_event_loop()
        routes = getattr(getattr(app, "state", None), "in_process", None) if shortcuts else None
        self._answer: Callable[..., tuple[int, list[tuple[bytes, bytes]], bytes] | None] | None = (
            getattr(routes, "answer", None)
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Send one request through the app and return its buffered response."""
        url = request.url
        status, headers, content = self.exchange(
            request.method,
            url.raw_path.split(b"?", 1)[0],
            url.query,
            [(k.lower(), v) for k, v in request.headers.raw],
            request.read(),
            host=(url.host, url.port or (443 if url.scheme == "https" else 80)),
            scheme=url.scheme,
        )
        return httpx.Response(status, headers=headers, content=content)

    def exchange(
        self,
        method: str,
        raw_path: bytes,
        query: bytes,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
        *,
        host: tuple[str, int] = ("itbench.gateway", 80),
        scheme: str = "http",
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """One HTTP exchange with the app: (status, response headers, response body).

        The SDK calls this directly for in-process clients, without building httpx objects.
        """
        if self._answer is not None:
            answer = self._answer((method, raw_path, query, headers, body))
            if answer is not None:
                return answer
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "headers": headers,
            "scheme": scheme,
            "path": unquote(raw_path.decode("ascii")),
            "raw_path": raw_path,
            "query_string": query,
            "root_path": "",
            "server": host,
            "client": ("127.0.0.1", 0),
        }
        return self._loop.run_until_complete(self._exchange(scope, body))

    async def _exchange(
        self, scope: dict[str, Any], body: bytes
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        sent = False
        status = 500
        headers: list[tuple[bytes, bytes]] = []
        chunks: list[bytes] = []

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            nonlocal status, headers
            if message["type"] == "http.response.start":
                status = int(message["status"])
                headers = list(message.get("headers") or [])
            elif message["type"] == "http.response.body":
                chunks.append(bytes(message.get("body", b"")))

        await self._app(scope, receive, send)
        return status, headers, b"".join(chunks)

    def close(self) -> None:
        """Release the event loop."""
        if not self._loop.is_closed():
            self._loop.run_until_complete(self._loop.shutdown_default_executor())
            self._loop.close()


class ITBenchAPIError(Exception):
    """The gateway answered with an error; carries the RFC 7807 problem.

    Attributes:
        status: HTTP status code.
        problem: The whole problem object.
        type: The problem type URI.
        slug: The last segment of the type, e.g. `forbidden-observability`.
        detail: What went wrong and what to do instead.
        errors: Invalid fields, as {"field", "message"} objects.
    """

    def __init__(self, status: int, problem: dict[str, Any]) -> None:
        """Wrap a problem response."""
        self.status = status
        self.problem = problem
        self.type = str(problem.get("type", ""))
        self.slug = self.type.rsplit("/", 1)[-1]
        self.title = str(problem.get("title", ""))
        self.detail = str(problem.get("detail", ""))
        self.errors: list[dict[str, Any]] = list(problem.get("errors") or [])
        super().__init__(f"{status} {self.slug}: {self.detail}")


class NoReadyTrialError(TimeoutError):
    """No trial became Ready for this token within the polling time."""


def _time(value: TimeArg) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def _params(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _alerts(body: Any) -> list[Alert]:
    out = []
    for raw in body["data"]["alerts"]:
        labels = dict(raw.get("labels") or {})
        out.append(
            Alert(
                alertname=labels.pop("alertname", ""),
                labels=labels,
                annotations=raw.get("annotations") or {},
                state=AlertState(raw["state"]),
                active_at=raw["activeAt"],
                value=float(raw.get("value", 0.0)),
            )
        )
    return out


@dataclass(frozen=True)
class _Req(Generic[T]):
    method: str
    path: str
    parse: Callable[[Any], T]
    params: dict[str, Any] = field(default_factory=dict)
    json: Any = None


class _Requests:
    """Builds the request for every SDK call; the sync and async clients only send them."""

    def __init__(self) -> None:
        self.trial_id: str | None = None

    def _trial(self, suffix: str) -> str:
        if self.trial_id is None:
            raise RuntimeError("no trial selected: call next_trial() or use_trial(trial_id) first")
        return f"/v1/trials/{self.trial_id}/{suffix}"

    def list_trials(self, state: str | None) -> _Req[list[TrialSummary]]:
        return _Req(
            "GET",
            "/v1/trials",
            lambda b: TrialList.model_validate(b).items,
            _params(state=state),
        )

    def task(self) -> _Req[TaskDescription]:
        return _Req("GET", self._trial("task"), TaskDescription.model_validate)

    def started(self) -> _Req[ProtocolState]:
        return _Req("POST", self._trial("started"), ProtocolState.model_validate)

    def finished(self) -> _Req[ProtocolState]:
        return _Req("POST", self._trial("finished"), ProtocolState.model_validate)

    def wait(self, seconds: float) -> _Req[WaitResult]:
        return _Req(
            "POST", self._trial("wait"), WaitResult.model_validate, json={"seconds": seconds}
        )

    def alerts(self) -> _Req[list[Alert]]:
        return _Req("GET", self._trial("alerts"), _alerts)

    def query(self, promql: str, at: TimeArg) -> _Req[dict[str, Any]]:
        return _Req(
            "GET",
            self._trial("metrics/query"),
            lambda b: dict(b["data"]),
            _params(query=promql, time=_time(at)),
        )

    def query_range(
        self, promql: str, start: TimeArg, end: TimeArg, step: str | float
    ) -> _Req[dict[str, Any]]:
        return _Req(
            "GET",
            self._trial("metrics/query_range"),
            lambda b: dict(b["data"]),
            _params(query=promql, start=_time(start), end=_time(end), step=str(step)),
        )

    def logs(self, query: str, start: TimeArg, end: TimeArg, limit: int) -> _Req[dict[str, Any]]:
        return _Req(
            "GET",
            self._trial("logs/query_range"),
            lambda b: dict(b["data"]),
            _params(query=query, start=_time(start), end=_time(end), limit=limit),
        )

    def traces(
        self,
        service: str,
        operation: str | None,
        tags: dict[str, str] | None,
        lookback: str,
        limit: int,
    ) -> _Req[list[dict[str, Any]]]:
        return _Req(
            "GET",
            self._trial("traces"),
            lambda b: list(b["data"]),
            _params(
                service=service,
                operation=operation,
                tags=json.dumps(tags) if tags else None,
                lookback=lookback,
                limit=limit,
            ),
        )

    def trace_services(self) -> _Req[list[str]]:
        return _Req("GET", self._trial("traces/services"), lambda b: [str(s) for s in b["data"]])

    def topology(self) -> _Req[TopologyView]:
        return _Req("GET", self._trial("topology"), TopologyView.model_validate)

    def get(self, kind: str, name: str | None) -> _Req[KubectlGet]:
        return _Req(
            "GET",
            self._trial("kubectl/get"),
            KubectlGet.model_validate,
            _params(kind=kind, name=name),
        )

    def host_files(self, path: str | None) -> _Req[HostFiles]:
        return _Req("GET", self._trial("host/files"), HostFiles.model_validate, _params(path=path))

    def host_command(self, argv: list[str]) -> _Req[HostAnswer]:
        return _Req(
            "POST",
            self._trial("host/commands"),
            HostAnswer.model_validate,
            json=HostCommand(argv=argv).wire(),
        )

    def collect(self, collection: EvidenceCollection) -> _Req[CollectionRun]:
        return _Req(
            "POST", self._trial("collections"), CollectionRun.model_validate, json=collection.wire()
        )

    def describe(self, kind: str, name: str) -> _Req[KubectlDescribe]:
        return _Req(
            "GET",
            self._trial("kubectl/describe"),
            KubectlDescribe.model_validate,
            {"kind": kind, "name": name},
        )

    def pod_logs(self, pod: str, tail: int) -> _Req[PodLogs]:
        return _Req(
            "GET", self._trial("kubectl/logs"), PodLogs.model_validate, {"pod": pod, "tail": tail}
        )

    def events(self, kind: str | None, name: str | None) -> _Req[EventList]:
        return _Req(
            "GET",
            self._trial("kubectl/events"),
            EventList.model_validate,
            _params(kind=kind, name=name),
        )

    def act(self, action: AgentAction) -> _Req[ActionResult]:
        return _Req("POST", self._trial("actions"), ActionResult.model_validate, json=action.wire())

    def submit(
        self,
        report: str,
        body: DiagnosisReport | MitigationReport | PostureReport | ComplianceSubmission,
    ) -> _Req[SubmissionReceipt]:
        return _Req("POST", self._trial(report), SubmissionReceipt.model_validate, json=body.wire())

    def oracle(self) -> _Req[GroundTruth]:
        return _Req("GET", self._trial("oracle"), GroundTruth.model_validate)


def _decode(response: httpx.Response) -> Any:
    return _decode_body(response.status_code, response.content)


def _loads(content: bytes) -> Any:
    """A response's JSON document: read by pydantic-core's parser (twice as fast on the large
    documents of kubectl reads, the same values), or by the standard library's where that one
    declines (lone surrogate escapes, another encoding) or fails (which then says why)."""
    try:
        return from_json(content, cache_strings="keys")
    except ValueError:
        return json.loads(content)


def _decode_body(status: int, content: bytes) -> Any:
    if status >= 400:
        try:
            problem = _loads(content)
        except ValueError:
            problem = {"detail": content.decode("utf-8", "replace")[:2000]}
        if not isinstance(problem, dict):
            problem = {"detail": str(problem)}
        raise ITBenchAPIError(status, problem)
    return _loads(content)


class ITBenchClient:
    """Synchronous agent SDK client.

    Every call but `list_trials` and `next_trial` works on the selected trial (`trial_id`).
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        transport: httpx.BaseTransport | None = None,
        timeout: float = 60.0,
        poll_interval: float = 5.0,
        sleep: Callable[[float], None] = time.sleep,
        http: httpx.Client | None = None,
    ) -> None:
        """Connect to a gateway.

        Args:
            base_url: The gateway's URL, e.g. `http://localhost:8080`.
            token: The trial's bearer token.
            transport: An httpx transport (e.g. a mock or ASGI transport).
            timeout: Seconds per HTTP request.
            poll_interval: Seconds between polls in `next_trial`.
            sleep: How to wait between polls.
            http: A ready httpx client to use instead (its headers get the token).
        """
        self._http = http or httpx.Client(base_url=base_url, transport=transport, timeout=timeout)
        self._http.headers["Authorization"] = f"Bearer {token}"
        # An in-process gateway is called straight through its transport (same requests, same
        # app), without httpx building URL, request and response objects for every call.
        self._direct = (
            transport if http is None and isinstance(transport, InProcessTransport) else None
        )
        # A remote gateway over plain HTTP is called over one lean keep-alive connection, for
        # the same reason.
        target = lean_target(base_url) if http is None and transport is None else None
        self._lean = LeanConnection(*target, timeout=timeout) if target is not None else None
        self._auth = [(b"authorization", f"Bearer {token}".encode())]
        self._lean_headers = [("Authorization", f"Bearer {token}"), ("Accept", "application/json")]
        self._r = _Requests()
        self._poll_interval = poll_interval
        self._sleep = sleep

    @classmethod
    def in_process(cls, app: Any, token: str) -> ITBenchClient:
        """A client that calls an ASGI app in this process, without a socket.

        Call it from a thread without a running event loop; `close()` releases the loop.

        Args:
            app: The gateway app (`itbench.gateway.app.create_app`).
            token: The trial's bearer token.
        """
        return cls(IN_PROCESS_URL, token, transport=InProcessTransport(app))

    @property
    def trial_id(self) -> str | None:
        """The selected trial."""
        return self._r.trial_id

    def use_trial(self, trial_id: str) -> None:
        """Select the trial the other calls work on."""
        self._r.trial_id = trial_id

    def close(self) -> None:
        """Close the HTTP client (and its transport)."""
        if self._lean is not None:
            self._lean.close()
        self._http.close()

    def __enter__(self) -> ITBenchClient:
        """Use as a context manager."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close on exit."""
        self.close()

    def _call(self, req: _Req[T]) -> T:
        if self._direct is None and self._lean is None:
            response = self._http.request(req.method, req.path, params=req.params, json=req.json)
            return req.parse(_decode(response))
        body = b""
        if req.json is not None:
            body = json.dumps(
                req.json, ensure_ascii=False, separators=(",", ":"), allow_nan=False
            ).encode()
        query = str(httpx.QueryParams(req.params)) if req.params else ""
        if self._lean is not None:
            headers = list(self._lean_headers)
            if body:
                headers.append(("Content-Type", "application/json"))
            target = quote(req.path) + (f"?{query}" if query else "")
            status, content = self._lean.request(req.method, target, headers, body)
            return req.parse(_decode_body(status, content))
        assert self._direct is not None
        raw = list(self._auth)
        if body:
            raw.append((b"content-type", b"application/json"))
            raw.append((b"content-length", str(len(body)).encode()))
        status, _, content = self._direct.exchange(
            req.method, quote(req.path).encode(), query.encode(), raw, body
        )
        return req.parse(_decode_body(status, content))

    # ---- protocol -----------------------------------------------------------------------
    def list_trials(self, state: str | None = "Ready") -> list[TrialSummary]:
        """Trials this token reaches, optionally only those in a state."""
        return self._call(self._r.list_trials(state))

    def next_trial(self, timeout: float = 600.0) -> TrialSummary:
        """Poll until a trial is Ready, select it and return it.

        Raises:
            NoReadyTrialError: When none is Ready within `timeout` seconds.
        """
        waited = 0.0
        while True:
            ready = self.list_trials("Ready")
            if ready:
                self.use_trial(ready[0].trial_id)
                return ready[0]
            if waited >= timeout:
                raise NoReadyTrialError(f"no Ready trial after {timeout:g} s")
            self._sleep(self._poll_interval)
            waited += self._poll_interval

    def task(self) -> TaskDescription:
        """The task: triggering alerts or requirement, deadline, telemetry and output schemas."""
        return self._call(self._r.task())

    def started(self) -> ProtocolState:
        """Report STARTED."""
        return self._call(self._r.started())

    def finished(self) -> ProtocolState:
        """Report FINISHED (idempotent)."""
        return self._call(self._r.finished())

    def wait(self, seconds: float) -> WaitResult:
        """Let time pass in the trial (bounded by the deadline)."""
        return self._call(self._r.wait(seconds))

    # ---- observe ------------------------------------------------------------------------
    def alerts(self) -> list[Alert]:
        """Active alerts."""
        return self._call(self._r.alerts())

    def query(self, promql: str, at: TimeArg = None) -> dict[str, Any]:
        """Instant PromQL query; Prometheus' `data` object (resultType, result)."""
        return self._call(self._r.query(promql, at))

    def query_range(
        self, promql: str, start: TimeArg = None, end: TimeArg = None, step: str | float = "15s"
    ) -> dict[str, Any]:
        """Range PromQL query; Prometheus' `data` object."""
        return self._call(self._r.query_range(promql, start, end, step))

    def logs(
        self, query: str, start: TimeArg = None, end: TimeArg = None, limit: int = 100
    ) -> dict[str, Any]:
        """LogQL query; Loki's `data` object (resultType streams)."""
        return self._call(self._r.logs(query, start, end, limit))

    def traces(
        self,
        service: str,
        operation: str | None = None,
        tags: dict[str, str] | None = None,
        lookback: str = "1h",
        limit: int = 20,
    ) -> list[dict[str, Any]]:
        """Jaeger trace search; the list of traces (each with spans and processes)."""
        return self._call(self._r.traces(service, operation, tags, lookback, limit))

    def trace_services(self) -> list[str]:
        """Services that report traces."""
        return self._call(self._r.trace_services())

    def topology(self) -> TopologyView:
        """The system topology."""
        return self._call(self._r.topology())

    def get(self, kind: str, name: str | None = None) -> KubectlGet:
        """`kubectl get`."""
        return self._call(self._r.get(kind, name))

    def host_files(self, path: str | None = None) -> HostFiles:
        """CISO: the RHEL9 host's files (every path, or one file with its text)."""
        return self._call(self._r.host_files(path))

    def host_command(self, argv: list[str]) -> HostAnswer:
        """CISO: one of the RHEL9 host's read-only commands (e.g. ["sshd", "-T"])."""
        return self._call(self._r.host_command(argv))

    def collect(self, collection: EvidenceCollection) -> CollectionRun:
        """CISO: try an evidence collection in the sandbox against the trial's environment."""
        return self._call(self._r.collect(collection))

    def describe(self, kind: str, name: str) -> KubectlDescribe:
        """`kubectl describe`."""
        return self._call(self._r.describe(kind, name))

    def pod_logs(self, pod: str, tail: int = 100) -> PodLogs:
        """`kubectl logs --tail`."""
        return self._call(self._r.pod_logs(pod, tail))

    def events(self, kind: str | None = None, name: str | None = None) -> EventList:
        """`kubectl get events`, optionally for one object."""
        return self._call(self._r.events(kind, name))

    # ---- act and submit -----------------------------------------------------------------
    def act(self, action: AgentAction) -> ActionResult:
        """Carry out an action (refusals raise ITBenchAPIError with status 403)."""
        return self._call(self._r.act(action))

    def submit_diagnosis(self, report: DiagnosisReport) -> SubmissionReceipt:
        """Submit the diagnosis report."""
        return self._call(self._r.submit("diagnosis", report))

    def submit_mitigation(self, report: MitigationReport) -> SubmissionReceipt:
        """Submit the mitigation report."""
        return self._call(self._r.submit("mitigation", report))

    def submit_posture(self, report: PostureReport) -> SubmissionReceipt:
        """Submit the CISO posture report."""
        return self._call(self._r.submit("posture", report))

    def submit_compliance(self, artefacts: ComplianceSubmission) -> SubmissionReceipt:
        """Submit the CISO artefacts (a policy, or a collection and Rego); the platform
        evaluates them on the trial's environment and on its other variant."""
        return self._call(self._r.submit("compliance", artefacts))

    def oracle(self) -> GroundTruth:
        """The ground truth, when the run allows the oracle (403 otherwise)."""
        return self._call(self._r.oracle())


class AsyncITBenchClient:
    """Asynchronous agent SDK client; the same calls as `ITBenchClient`, awaited."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = 60.0,
        poll_interval: float = 5.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        """Connect to a gateway.

        Args:
            base_url: The gateway's URL.
            token: The trial's bearer token.
            transport: An httpx async transport (e.g. `httpx.ASGITransport(app=app)`).
            timeout: Seconds per HTTP request.
            poll_interval: Seconds between polls in `next_trial`.
            sleep: How to wait between polls.
        """
        self._http = httpx.AsyncClient(
            base_url=base_url,
            transport=transport,
            timeout=timeout,
            headers={"Authorization": f"Bearer {token}"},
        )
        self._r = _Requests()
        self._poll_interval = poll_interval
        self._sleep = sleep

    @classmethod
    def in_process(cls, app: Any, token: str) -> AsyncITBenchClient:
        """A client that calls an ASGI app in this event loop, without a socket."""
        return cls(IN_PROCESS_URL, token, transport=httpx.ASGITransport(app=app))

    @property
    def trial_id(self) -> str | None:
        """The selected trial."""
        return self._r.trial_id

    def use_trial(self, trial_id: str) -> None:
        """Select the trial the other calls work on."""
        self._r.trial_id = trial_id

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncITBenchClient:
        """Use as an async context manager."""
        return self

    async def __aexit__(self, *exc: object) -> None:
        """Close on exit."""
        await self.aclose()

    async def _call(self, req: _Req[T]) -> T:
        response = await self._http.request(req.method, req.path, params=req.params, json=req.json)
        return req.parse(_decode(response))

    async def list_trials(self, state: str | None = "Ready") -> list[TrialSummary]:
        """Trials this token reaches, optionally only those in a state."""
        return await self._call(self._r.list_trials(state))

    async def next_trial(self, timeout: float = 600.0) -> TrialSummary:  # noqa: ASYNC109
        """Poll until a trial is Ready, select it and return it.

        Raises:
            NoReadyTrialError: When none is Ready within `timeout` seconds.
        """
        waited = 0.0
        while True:
            ready = await self.list_trials("Ready")
            if ready:
                self.use_trial(ready[0].trial_id)
                return ready[0]
            if waited >= timeout:
                raise NoReadyTrialError(f"no Ready trial after {timeout:g} s")
            await self._sleep(self._poll_interval)
            waited += self._poll_interval

    async def task(self) -> TaskDescription:
        """The task description."""
        return await self._call(self._r.task())

    async def started(self) -> ProtocolState:
        """Report STARTED."""
        return await self._call(self._r.started())

    async def finished(self) -> ProtocolState:
        """Report FINISHED (idempotent)."""
        return await self._call(self._r.finished())

    async def wait(self, seconds: float) -> WaitResult:
        """Let time pass in the trial (bounded by the deadline)."""
        return await self._call(self._r.wait(seconds))

    async def alerts(self) -> list[Alert]:
        """Active alerts."""
        return await self._call(self._r.alerts())

    async def query(self, promql: str, at: TimeArg = None) -> dict[str, Any]:
        """Instant PromQL query; Prometheus' `data` object."""
        return await self._call(self._r.query(promql, at))

    async def query_range(
        self, promql: str, start: TimeArg = None, end: TimeArg = None, step: str | float = "15s"
    ) -> dict[str, Any]:
        """Range PromQL query; Prometheus' `data` object."""
        return await self._call(self._r.query_range(promql, start, end, step))

    async def logs(
        self, query: str, start: TimeArg = None, end: TimeArg = None, limit: int = 100
    ) -> dict[str, Any]:
        """LogQL query; Loki's `data` object."""
        return await self._call(self._r.logs(query, start, end, limit))

    async def traces(
        self,
        service: str,
        operation: str | None = None,
        tags: dict[str, str] | None = None,
        lookback: str = "1h",
        limit: int = 20,
    ) -> list[dict[str, Any]]:
        """Jaeger trace search."""
        return await self._call(self._r.traces(service, operation, tags, lookback, limit))

    async def trace_services(self) -> list[str]:
        """Services that report traces."""
        return await self._call(self._r.trace_services())

    async def topology(self) -> TopologyView:
        """The system topology."""
        return await self._call(self._r.topology())

    async def get(self, kind: str, name: str | None = None) -> KubectlGet:
        """`kubectl get`."""
        return await self._call(self._r.get(kind, name))

    async def host_files(self, path: str | None = None) -> HostFiles:
        """CISO: the RHEL9 host's files (see `ITBenchClient.host_files`)."""
        return await self._call(self._r.host_files(path))

    async def host_command(self, argv: list[str]) -> HostAnswer:
        """CISO: one of the RHEL9 host's read-only commands."""
        return await self._call(self._r.host_command(argv))

    async def collect(self, collection: EvidenceCollection) -> CollectionRun:
        """CISO: try an evidence collection in the sandbox."""
        return await self._call(self._r.collect(collection))

    async def describe(self, kind: str, name: str) -> KubectlDescribe:
        """`kubectl describe`."""
        return await self._call(self._r.describe(kind, name))

    async def pod_logs(self, pod: str, tail: int = 100) -> PodLogs:
        """`kubectl logs --tail`."""
        return await self._call(self._r.pod_logs(pod, tail))

    async def events(self, kind: str | None = None, name: str | None = None) -> EventList:
        """`kubectl get events`."""
        return await self._call(self._r.events(kind, name))

    async def act(self, action: AgentAction) -> ActionResult:
        """Carry out an action."""
        return await self._call(self._r.act(action))

    async def submit_diagnosis(self, report: DiagnosisReport) -> SubmissionReceipt:
        """Submit the diagnosis report."""
        return await self._call(self._r.submit("diagnosis", report))

    async def submit_mitigation(self, report: MitigationReport) -> SubmissionReceipt:
        """Submit the mitigation report."""
        return await self._call(self._r.submit("mitigation", report))

    async def submit_posture(self, report: PostureReport) -> SubmissionReceipt:
        """Submit the CISO posture report."""
        return await self._call(self._r.submit("posture", report))

    async def submit_compliance(self, artefacts: ComplianceSubmission) -> SubmissionReceipt:
        """Submit the CISO artefacts (see `ITBenchClient.submit_compliance`)."""
        return await self._call(self._r.submit("compliance", artefacts))

    async def oracle(self) -> GroundTruth:
        """The ground truth, when the run allows the oracle."""
        return await self._call(self._r.oracle())
