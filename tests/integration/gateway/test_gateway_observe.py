"""Observation endpoints over HTTP: alerts, PromQL, logs, traces, topology and kubectl views."""

from __future__ import annotations

from typing import Any

import pytest
from gateway_fakes import NS, Gateway

from itbench.client import ITBenchAPIError, ITBenchClient
from itbench.core.faults import get_fault
from itbench.core.models.base import TelemetryToggles
from itbench.environments.port import EnvironmentFailure
from itbench.environments.sim.objects import clone


def test_alerts_use_the_prometheus_alerts_shape(gw: Gateway) -> None:
    session = gw.open("t1")
    body = gw.http.get("/v1/trials/t1/alerts", headers=gw.headers(session)).json()
    assert body["status"] == "success"
    alert = body["data"]["alerts"][0]
    assert alert["labels"]["alertname"] == "KubePodNotReady"
    assert alert["state"] == "firing"
    assert alert["value"] == "1.0"
    typed = gw.client(session).alerts()
    assert typed[0].alertname == "KubePodNotReady"
    assert typed[0].labels == {
        "namespace": "otel-demo",
        "deployment": "cart",
        "severity": "warning",
    }
    assert session.audit[0].action == "observe.alerts"


def test_instant_query_by_get_form_post_and_json_post(gw: Gateway) -> None:
    session = gw.open("t1")
    h = gw.headers(session)
    q = "sum(rate(calls_total[1m]))"
    by_get = gw.http.get("/v1/trials/t1/metrics/query", params={"query": q}, headers=h).json()
    by_form = gw.http.post("/v1/trials/t1/metrics/query", data={"query": q}, headers=h).json()
    by_json = gw.http.post("/v1/trials/t1/metrics/query", json={"query": q}, headers=h).json()
    assert by_get["status"] == by_form["status"] == by_json["status"] == "success"
    assert by_get["data"]["resultType"] == "vector"
    assert by_get["data"]["result"][0]["metric"] == by_form["data"]["result"][0]["metric"]
    assert by_get["data"]["result"][0]["metric"] == by_json["data"]["result"][0]["metric"]
    assert session.audit[0].detail["query"] == q


def test_range_query_honours_start_end_and_step(gw: Gateway) -> None:
    session = gw.open("t1")
    now = session.env.now().timestamp()
    data = gw.client(session).query_range("up", start=now - 60, end=now, step="15s")
    assert data["resultType"] == "matrix"
    assert len(data["result"][0]["values"]) == 5


def test_bad_promql_is_a_400_problem_naming_the_query_field(gw: Gateway) -> None:
    session = gw.open("t1")
    response = gw.http.get(
        "/v1/trials/t1/metrics/query", params={"query": "sum(up"}, headers=gw.headers(session)
    )
    assert response.status_code == 400
    problem = response.json()
    assert problem["type"].endswith("/bad-query")
    assert problem["errors"][0]["field"] == "query"
    assert "unclosed" in problem["detail"]
    assert problem["errorType"] == "bad_data"
    assert session.audit[-1].outcome == "error"


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"query": "up", "step": "soon"}, "step"),
        ({"query": "up", "start": "yesterday"}, "start"),
        ({"query": "up", "start": "2026-01-02T00:00:00Z", "end": "2026-01-01T00:00:00Z"}, "start"),
        ({"query": "up", "start": "inf"}, "start"),
        ({"query": "up", "end": "1e300"}, "end"),
        ({"query": "up", "step": "1e300"}, "step"),
    ],
)
def test_bad_range_parameters_name_the_field(
    gw: Gateway, params: dict[str, str], field: str
) -> None:
    session = gw.open("t1")
    response = gw.http.get(
        "/v1/trials/t1/metrics/query_range", params=params, headers=gw.headers(session)
    )
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == field


def test_logs_come_in_loki_format(gw: Gateway) -> None:
    session = gw.open("t1")
    data = gw.client(session).logs('{service_name="cart"} |= "error"', limit=5)
    assert data["resultType"] == "streams"
    assert data["result"][0]["values"][0][1] == "error: pull failed"


def test_traces_come_in_jaeger_format_with_tags(gw: Gateway) -> None:
    session = gw.open("t1")
    h = gw.headers(session)
    body = gw.http.get(
        "/v1/trials/t1/traces", params={"service": "cart", "tags": '{"error":"true"}'}, headers=h
    ).json()
    assert body["data"][0]["traceID"] == "abc"
    assert body["data"][0]["tags"] == {"error": "true"}
    assert body["errors"] is None
    bad = gw.http.get(
        "/v1/trials/t1/traces", params={"service": "cart", "tags": "{oops"}, headers=h
    )
    assert bad.status_code == 400
    assert bad.json()["errors"][0]["field"] == "tags"
    assert gw.client(session).trace_services() == ["cart", "frontend"]


def test_masked_signals_are_unavailable_with_a_reason(gw: Gateway) -> None:
    session = gw.open("t1", telemetry=TelemetryToggles(traces=False, logs=False, metrics=False))
    client = gw.client(session)
    for call in (
        lambda: client.traces("cart"),
        lambda: client.logs('{service_name="cart"}'),
        lambda: client.query("up"),
    ):
        with pytest.raises(ITBenchAPIError) as err:
            call()
        assert err.value.status == 404
        assert err.value.slug == "telemetry-unavailable"
        assert "not available in this trial" in err.value.detail


def test_topology_has_owner_selector_and_call_edges(gw: Gateway) -> None:
    session = gw.open("t1")
    topo = gw.client(session).topology()
    ids = {n["id"] for n in topo.nodes}
    assert {"Deployment/cart", "Service/cart", "Pod/cart-1-bbbbb", "Node/node-1"} <= ids
    edges = {(e["source"], e["target"], e["type"]) for e in topo.edges}
    assert ("Service/frontend", "Service/cart", "calls") in edges
    assert ("Service/cart", "Pod/cart-1-bbbbb", "selects") in edges


def test_kubectl_get_returns_json_and_the_kubectl_table(gw: Gateway) -> None:
    session = gw.open("t1")
    pods = gw.client(session).get("po")
    assert pods.kind == "Pod"
    assert [p["metadata"]["name"] for p in pods.items] == ["frontend-1-aaaaa", "cart-1-bbbbb"]
    header, _frontend, cart = pods.text.splitlines()
    assert header.split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert cart.split()[:4] == ["cart-1-bbbbb", "0/1", "ImagePullBackOff", "4"]
    deployments = gw.client(session).get("deploy", "cart")
    assert deployments.text.splitlines()[1].split()[:2] == ["cart", "1/1"]


def test_kubectl_get_of_a_missing_object_is_a_404_naming_it(gw: Gateway) -> None:
    session = gw.open("t1")
    with pytest.raises(ITBenchAPIError) as err:
        gw.client(session).get("deployment", "nope")
    assert err.value.status == 404
    assert err.value.detail == "Deployment \"nope\" not found in namespace 'otel-demo'"


def test_kubectl_describe_includes_the_objects_events(gw: Gateway) -> None:
    session = gw.open("t1")
    described = gw.client(session).describe("pod", "cart-1-bbbbb")
    assert described.object["metadata"]["name"] == "cart-1-bbbbb"
    assert described.events[0]["reason"] == "Failed"
    assert "Name:         cart-1-bbbbb" in described.text
    assert "Failed to pull image bad:image" in described.text


def test_kubectl_logs_and_events(gw: Gateway) -> None:
    session = gw.open("t1")
    client = gw.client(session)
    logs = client.pod_logs("cart-1-bbbbb", tail=3)
    assert logs.lines == ["cart-1-bbbbb line 0", "cart-1-bbbbb line 1", "cart-1-bbbbb line 2"]
    events = client.events()
    assert events.items[0]["involvedObject"]["name"] == "cart-1-bbbbb"
    assert "Failed to pull image" in events.text
    assert client.events("Pod", "frontend-1-aaaaa").items == []


def test_invalid_query_parameters_are_a_422_problem_and_audited(gw: Gateway) -> None:
    session = gw.open("t1")
    response = gw.http.get(
        "/v1/trials/t1/kubectl/logs", params={"pod": "x", "tail": 0}, headers=gw.headers(session)
    )
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "query.tail"
    assert session.audit[-1].outcome == "rejected"


def test_unknown_route_is_a_problem(gw: Gateway) -> None:
    response = gw.http.get("/v1/nope")
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"
    assert "no such endpoint" in response.json()["detail"]


def test_an_environment_failure_is_a_503_and_audited(gw: Gateway) -> None:
    session = gw.open("t1")

    def broken(query: str, time: object) -> dict[str, object]:
        raise EnvironmentFailure("prometheus is unreachable")

    session.env.query_metrics = broken  # type: ignore[method-assign]
    response = gw.http.get(
        "/v1/trials/t1/metrics/query", params={"query": "up"}, headers=gw.headers(session)
    )
    assert response.status_code == 503
    assert "Errored, not counted against the agent" in response.json()["detail"]
    assert session.audit[-1].outcome == "error"
    assert "prometheus is unreachable" in session.audit[-1].reason


def test_an_unexpected_failure_is_a_500_problem_and_audited(gw: Gateway) -> None:
    session = gw.open("t1")

    def broken(
        kind: str | None = None, name: str | None = None, *, copy: bool = True
    ) -> list[dict[str, Any]]:
        raise RuntimeError("boom")

    session.env.events = broken  # type: ignore[method-assign]
    with pytest.raises(ITBenchAPIError) as err:
        gw.client(session).events()
    assert err.value.status == 500
    assert err.value.slug == "internal-error"
    assert session.audit[-1].reason == "internal error: RuntimeError: boom"


def test_absurd_times_and_lookbacks_are_400_problems_not_crashes(gw: Gateway) -> None:
    session = gw.open("t1")
    headers = gw.headers(session)
    instant = gw.http.get(
        "/v1/trials/t1/metrics/query", params={"query": "up", "time": "inf"}, headers=headers
    )
    assert instant.status_code == 400 and instant.json()["errors"][0]["field"] == "time"
    traces = gw.http.get(
        "/v1/trials/t1/traces", params={"service": "cart", "lookback": "1e300"}, headers=headers
    )
    assert traces.status_code == 400 and traces.json()["errors"][0]["field"] == "lookback"


@pytest.mark.parametrize(
    ("content", "content_type", "status"),
    [
        (b"{", "application/json", 400),
        (b"[" * 100_000 + b"]" * 100_000, "application/json", 400),
        (b"time=1", "application/x-www-form-urlencoded", 422),
        (b"query=up&x=" + b"a" * 300_000, "application/x-www-form-urlencoded", 413),
    ],
    ids=["not-json", "nested-too-deep", "no-query", "too-large"],
)
def test_a_rejected_query_body_is_a_problem_and_lands_on_the_audit_trail(
    gw: Gateway, content: bytes, content_type: str, status: int
) -> None:
    session = gw.open("t1")
    response = gw.http.post(
        "/v1/trials/t1/metrics/query",
        content=content,
        headers={**gw.headers(session), "content-type": content_type},
    )
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    entry = session.audit[-1]
    assert (entry.outcome, entry.path) == ("rejected", "/v1/trials/t1/metrics/query")
    assert entry.reason == response.json()["detail"]


def _crash_looping_twin(gw: Gateway, trial: str) -> tuple[Any, ITBenchClient]:
    """A twin on virtual time whose cart crash-loops (its pods and events change every tick),
    and a client of its session."""
    session = gw.open_sim(trial)
    session.virtual_time = True
    env = session.env
    env.inject("crash", get_fault("kubernetes.invalid-command").changes({"workload": "cart"}, NS))
    return env, gw.client(session)


def test_kubectl_get_answers_the_state_before_the_calls_own_time_passes(gw: Gateway) -> None:
    """Over HTTP the objects are written out in place, under the session's lock; the answer is
    still the state the call saw, never one a tick during its virtual cost produced."""
    env, client = _crash_looping_twin(gw, "ticking")
    ticked_with_changes = 0
    for _ in range(40):
        before = clone(env.get_objects("Pod"))
        start = env.now()
        answer = client.get("pods")
        assert answer.items == before
        if env.now() != start and env.get_objects("Pod") != before:
            ticked_with_changes += 1
    assert ticked_with_changes > 0


def test_kubectl_events_answers_the_events_before_the_calls_own_time_passes(gw: Gateway) -> None:
    """Events too are written out in place under the session's lock (repeats of an event bump
    its count while the call's virtual cost passes): the answer is what the call saw."""
    from itbench.gateway.operations.objects import MAX_ITEMS

    env, client = _crash_looping_twin(gw, "ticking-events")
    ticked_with_changes = 0
    for _ in range(40):
        before = env.events()
        start = env.now()
        answer = client.events()
        assert answer.items == before[-MAX_ITEMS:]
        assert answer.text and "BackOff" in answer.text
        if env.now() != start and env.events() != before:
            ticked_with_changes += 1
    assert ticked_with_changes > 0
