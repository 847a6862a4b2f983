"""The in-process answers (`itbench.gateway.inprocess`) against the app: the same requests, sent
to two identical trials on the twin, one through the in-process answers and one through the app,
get the same status, the same JSON document and the same audit trail, request after request."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

import pytest
from gateway_fakes import Gateway
from hostile_requests import CORPUS

from itbench.client import InProcessTransport, ITBenchAPIError, ITBenchClient
from itbench.gateway.inprocess import ROUTES, InProcessGateway
from itbench.gateway.schemas import MAX_BODY_BYTES
from itbench.gateway.sessions import SessionRegistry, TrialSession


@dataclass
class Call:
    """One request below /v1/trials/{trial}/ (or a whole path when `path` starts with /)."""

    method: str
    path: str
    params: list[tuple[str, str]] = field(default_factory=list)
    body: Any = None
    raw: bytes | None = None
    headers: list[tuple[bytes, bytes]] | None = None
    content_type: bytes = b"application/json"
    answered_in_process: bool = True

    def request(
        self, session: TrialSession
    ) -> tuple[bytes, bytes, list[tuple[bytes, bytes]], bytes]:
        path = (
            self.path if self.path.startswith("/") else f"/v1/trials/{session.trial_id}/{self.path}"
        )
        body = self.raw if self.raw is not None else b""
        if self.body is not None:
            body = json.dumps(self.body).encode()
        headers = (
            self.headers
            if self.headers is not None
            else [(b"authorization", f"Bearer {session.token}".encode())]
        )
        if body:
            headers = [
                *headers,
                (b"content-type", self.content_type),
                (b"content-length", str(len(body)).encode()),
            ]
        return path.encode(), urlencode(self.params).encode(), headers, body


WAIT = Call("POST", "wait", body={"seconds": 30})
CALLS: list[Call] = [
    Call("GET", "/v1/trials"),
    Call("GET", "/v1/trials", [("state", "Ready")]),
    Call("GET", "/v1/trials", [("state", "Closed")]),
    Call("GET", "/v1/trials", headers=[], answered_in_process=False),
    Call("GET", "/v1/trials", headers=[(b"authorization", b"Bearer x")], answered_in_process=False),
    Call("POST", "/v1/trials", answered_in_process=False),
    Call("GET", "task"),
    Call("POST", "started"),
    Call("GET", "alerts"),
    Call("GET", "metrics/query", [("query", "up")]),
    Call(
        "GET",
        "metrics/query",
        [("query", "sum by (service_name) (rate(traces_span_metrics_calls_total[2m]))")],
    ),
    Call("GET", "metrics/query", [("query", "up"), ("time", "2026-01-01T00:05:00Z")]),
    Call("GET", "metrics/query", [("query", "nope"), ("query", "up")]),  # the last one counts
    Call("GET", "metrics/query", [("query", "up"), ("time", "yesterday")]),
    Call("GET", "metrics/query", [("query", "sum(")]),
    Call("GET", "metrics/query", [("query", "")], answered_in_process=False),
    Call("GET", "metrics/query", answered_in_process=False),
    Call("GET", "metrics/query_range", [("query", "up")]),
    Call(
        "GET",
        "metrics/query_range",
        [("query", "sum(rate(traces_span_metrics_calls_total[2m]))"), ("step", "30s")],
    ),
    Call("GET", "metrics/query_range", [("query", "up"), ("step", "0")]),
    Call("GET", "metrics/query_range", [("query", "up"), ("start", "x"), ("end", "y")]),
    Call("GET", "metrics/query_range", [("query", "")], answered_in_process=False),
    Call("GET", "logs/query_range", [("query", '{service_name="cart"}')]),
    Call(
        "GET", "logs/query_range", [("query", '{service_name="cart"} |= "error"'), ("limit", "5")]
    ),
    Call("GET", "logs/query_range", [("query", '{service_name="cart"}'), ("limit", "5000")]),
    Call("GET", "logs/query_range", [("query", "{"), ("limit", "1")]),
    Call("GET", "logs/query_range", [("query", '{service_name="cart"}'), ("limit", "007")]),
    Call("GET", "logs/query_range", [("query", "{}"), ("limit", "0")], answered_in_process=False),
    Call("GET", "logs/query_range", [("query", "{}"), ("limit", "1e2")], answered_in_process=False),
    Call("GET", "logs/query_range", [("query", "{}"), ("limit", " 7")], answered_in_process=False),
    Call(
        "GET", "logs/query_range", [("query", "{}"), ("limit", "99999")], answered_in_process=False
    ),
    Call("GET", "topology"),
    Call("GET", "kubectl/get", [("kind", "pods")]),
    Call("GET", "kubectl/get", [("kind", "Deployment"), ("name", "cart")]),
    Call("GET", "kubectl/get", [("kind", "Deployment"), ("name", "")]),
    Call("GET", "kubectl/get", [("kind", "Deployment"), ("name", "no-such")]),
    Call("GET", "kubectl/get", [("kind", "Secret")]),
    Call("GET", "kubectl/get", [("kind", "NoSuchKind")]),
    Call("GET", "kubectl/get", [("kind", "pods"), ("namespace", "kube-system")]),
    Call("GET", "kubectl/get", [("kind", "podchaos")]),
    Call("GET", "kubectl/get", answered_in_process=False),
    Call("GET", "kubectl/events"),
    Call("GET", "kubectl/events", [("kind", "Pod")]),
    Call("GET", "kubectl/events", [("kind", "Deployment"), ("name", "cart")]),
    WAIT,
    Call("POST", "wait", body={"seconds": -1}),
    Call("POST", "wait", body={"seconds": "soon"}),
    Call("POST", "wait", body=[1, 2]),
    Call("POST", "wait", raw=b"{not json"),
    Call("POST", "wait", raw=b'{"seconds": 1}\xff'),
    Call("POST", "wait", raw=b"x" * (MAX_BODY_BYTES + 1), answered_in_process=False),
    Call(
        "POST",
        "wait",
        raw=b'{"seconds": 1}',
        headers=[(b"authorization", b"Bearer token-a"), (b"content-length", b"9999999")],
        answered_in_process=False,
    ),
    Call(
        "POST",
        "actions",
        body={"verb": "scale", "kind": "Deployment", "name": "cart", "replicas": 2},
    ),
    Call("POST", "actions", body={"verb": "rollout-undo", "kind": "Deployment", "name": "cart"}),
    Call("POST", "actions", body={"verb": "delete", "kind": "Namespace", "name": "otel-demo"}),
    Call("POST", "actions", body={"verb": "scale", "kind": "Deployment"}),
    Call("POST", "actions", body={"verb": "launch-rockets"}),
    Call("POST", "actions", raw=b"[]"),
    Call(
        "POST",
        "diagnosis",
        body={"reasoning": "the cart", "entities": [{"id": "Deployment/cart", "root_cause": True}]},
    ),
    Call("POST", "diagnosis", body={"entities": "all of them"}),
    Call("POST", "mitigation", body={"reasoning": "rolled back", "actions": []}),
    Call("POST", "posture", body={"reasoning": "n/a"}),
    Call("POST", "compliance", body={}),
    # Requests the app answers: no token, a malformed or unknown one, another trial's path, an
    # escaped path, a route answered only by the app, a method the route does not have.
    Call("GET", "task", headers=[], answered_in_process=False),
    Call("GET", "task", headers=[(b"authorization", b"Basic abc")], answered_in_process=False),
    Call("GET", "task", headers=[(b"authorization", b"Bearer ")], answered_in_process=False),
    Call("GET", "task", headers=[(b"authorization", b"Bearer nope")], answered_in_process=False),
    Call("GET", "/v1/trials/other/task", answered_in_process=False),
    Call("GET", "/v1/trials/%61/task", answered_in_process=False),
    Call(
        "GET",
        "kubectl/describe",
        [("kind", "Deployment"), ("name", "cart")],
        answered_in_process=False,
    ),
    Call("DELETE", "task", answered_in_process=False),
    Call("GET", "alerts", headers=[(b"authorization", b"bearer  token-a ")]),
    WAIT,
    Call("GET", "alerts"),
    Call("POST", "finished"),
    Call("GET", "alerts"),
    Call("POST", "finished"),
    Call("POST", "wait", body={"seconds": 10}),
]


@pytest.fixture
def twins() -> Iterator[tuple[Gateway, TrialSession, Gateway, TrialSession]]:
    """Two gateways with the same trial on the twin (same seed, same time)."""
    fast, slow = Gateway(inline=True), Gateway(inline=True)
    yield fast, fast.open_sim("a", seed=11), slow, slow.open_sim("a", seed=11)
    fast.http.close()
    slow.http.close()


def _exchange(
    transport: InProcessTransport, session: TrialSession, call: Call
) -> tuple[int, str, Any]:
    path, query, headers, body = call.request(session)
    status, raw_headers, content = transport.exchange(call.method, path, query, headers, body)
    content_type = dict(raw_headers).get(b"content-type", b"").decode()
    return status, content_type, json.loads(content) if content else None


def _trail(session: TrialSession) -> list[dict[str, Any]]:
    return [entry.as_dict() for entry in session.audit]


def test_every_route_answered_in_process_is_one_the_calls_cover() -> None:
    covered = {(c.method, c.path) for c in CALLS if c.answered_in_process}
    assert set(ROUTES) <= covered


def test_in_process_answers_match_the_app_request_after_request(
    twins: tuple[Gateway, TrialSession, Gateway, TrialSession],
) -> None:
    fast_gw, fast, slow_gw, slow = twins
    # A second trial in each registry: its token on the first trial's path is refused there.
    others = (fast_gw.open("other"), slow_gw.open("other"))
    assert others[0].token == others[1].token
    fast_transport = InProcessTransport(fast_gw.app)
    slow_transport = InProcessTransport(slow_gw.app, shortcuts=False)
    seen: set[int] = set()
    for call in CALLS:
        expected = _exchange(slow_transport, slow, call)
        got = _exchange(fast_transport, fast, call)
        assert got == expected, (call, got, expected)
        assert _trail(fast) == _trail(slow), call
        seen.add(got[0])
        assert fast.env.now() == slow.env.now()
    assert {200, 400, 401, 403, 404, 405, 409, 413, 422} <= seen


def test_the_app_answers_what_the_in_process_answers_leave(
    twins: tuple[Gateway, TrialSession, Gateway, TrialSession],
) -> None:
    # Each call sent only to the in-process answers (on its own fresh trial state): answered
    # there exactly when the call says so, and a declined call left no audit entry behind.
    fast_gw, fast, _slow_gw, _slow = twins
    answer = fast_gw.app.state.in_process.answer
    for call in CALLS:
        path, query, headers, body = call.request(fast)
        trail = len(fast.audit)
        result = answer((call.method, path, query, headers, body))
        assert (result is not None) == call.answered_in_process, call
        if result is None:
            assert len(fast.audit) == trail, call


@pytest.mark.parametrize("bad", CORPUS, ids=[b.name for b in CORPUS])
def test_a_hostile_request_gets_the_same_answer_both_ways(
    twins: tuple[Gateway, TrialSession, Gateway, TrialSession], bad: Any
) -> None:
    fast_gw, fast, slow_gw, slow = twins
    call = Call(
        bad.method,
        bad.path,
        list(bad.params.items()),
        raw=bad.content,
        content_type=bad.content_type.encode(),
    )
    expected = _exchange(InProcessTransport(slow_gw.app, shortcuts=False), slow, call)
    got = _exchange(InProcessTransport(fast_gw.app), fast, call)
    assert got == expected
    assert got[0] == bad.status
    assert _trail(fast) == _trail(slow)


def test_the_in_process_gateway_builds_its_app_only_for_a_request_left_to_it() -> None:
    registry = SessionRegistry()
    gateway = InProcessGateway(registry)
    session = Gateway(inline=True).open_sim("solo", seed=5)
    registry.open(session)
    registry.mark_ready("solo", session.env.now() + timedelta(hours=1))
    client = ITBenchClient.in_process(gateway, session.token)
    try:
        client.next_trial()
        assert client.task().trial_id == "solo"
        assert client.query("up")["resultType"] == "vector"
        assert gateway._app is None  # every call so far was answered in process
        with pytest.raises(ITBenchAPIError) as refused:
            client.describe("Deployment", "no-such")  # left to the app
        assert refused.value.status == 404
        assert gateway._app is not None
        assert session.audit[-1].outcome == "error"
    finally:
        client.close()
