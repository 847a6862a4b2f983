"""The agent API's request metrics, read back through prometheus_client's own text parser."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from gateway_fakes import Gateway
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from itbench.environments.port import EnvironmentFailure
from itbench.gateway.metrics import GatewayMetrics

TRIAL = "trial-7f3a9c"
ACTIONS = "/v1/trials/{trial_id}/actions"
GET = "/v1/trials/{trial_id}/kubectl/get"


@pytest.fixture(params=["threaded", "inline"])
def measured(request: pytest.FixtureRequest) -> Iterator[tuple[Gateway, CollectorRegistry]]:
    registry = CollectorRegistry()
    gateway = Gateway(inline=request.param == "inline", metrics=GatewayMetrics(registry))
    yield gateway, registry
    gateway.http.close()


def _samples(registry: CollectorRegistry) -> list[Sample]:
    text = generate_latest(registry).decode()
    return [
        sample
        for family in text_string_to_metric_families(text)
        if family.name.startswith("itbench_gateway_")
        for sample in family.samples
    ]


def _count(samples: list[Sample], route: str, method: str, outcome: str) -> float:
    labels = {"route": route, "method": method, "outcome": outcome}
    found = [
        s.value
        for s in samples
        if s.name == "itbench_gateway_requests_total" and s.labels == labels
    ]
    assert len(found) == 1, labels
    return found[0]


def test_requests_are_counted_by_route_template_and_outcome(
    measured: tuple[Gateway, CollectorRegistry],
) -> None:
    gw, registry = measured
    before = _samples(registry)
    assert _count(before, ACTIONS, "POST", "refused") == 0, "known series start at zero"
    session = gw.open(TRIAL)
    headers = gw.headers(session)
    assert gw.http.get(f"/v1/trials/{TRIAL}/task", headers=headers).status_code == 200
    assert gw.http.get(f"/v1/trials/{TRIAL}/task", headers=headers).status_code == 200
    refused = gw.http.post(
        f"/v1/trials/{TRIAL}/actions",
        json={"verb": "patch", "kind": "RoleBinding", "name": "agent"},
        headers=headers,
    )
    assert refused.status_code == 403 and refused.json()["rule"] == "privilege"
    missing = gw.http.get(
        f"/v1/trials/{TRIAL}/kubectl/get",
        params={"kind": "deployment", "name": "no-such-deployment"},
        headers=headers,
    )
    assert missing.status_code == 404
    assert gw.http.get(f"/v1/trials/{TRIAL}/no-such-endpoint", headers=headers).status_code == 404
    assert gw.http.get(f"/v1/trials/{TRIAL}/task").status_code == 401

    samples = _samples(registry)
    task = "/v1/trials/{trial_id}/task"
    assert _count(samples, task, "GET", "ok") == 2
    assert _count(samples, task, "GET", "client_error") == 1
    assert _count(samples, ACTIONS, "POST", "refused") == 1
    assert _count(samples, ACTIONS, "POST", "client_error") == 0
    assert _count(samples, GET, "GET", "client_error") == 1
    assert _count(samples, "unmatched", "other", "client_error") == 1
    assert _count(samples, task, "GET", "server_error") == 0
    durations = {
        (s.labels["route"], s.labels["method"]): s.value
        for s in samples
        if s.name == "itbench_gateway_request_duration_seconds_count"
    }
    assert durations[(task, "GET")] == 3
    assert durations[(ACTIONS, "POST")] == 1
    assert durations[("unmatched", "other")] == 1
    values = {v for s in samples for k, v in s.labels.items() if k != "le"}
    assert not [v for v in values if TRIAL in v or "no-such" in v], "no raw ids in labels"
    assert {s.labels["outcome"] for s in samples if "outcome" in s.labels} == {
        "ok",
        "refused",
        "client_error",
        "server_error",
    }


def _series(samples: list[Sample]) -> set[tuple[str, str]]:
    return {(s.labels["route"], s.labels["method"]) for s in samples}


def test_series_are_bounded_by_the_routes_not_the_requests(
    measured: tuple[Gateway, CollectorRegistry],
) -> None:
    gw, registry = measured
    before = _series(_samples(registry))
    for n in range(5):
        session = gw.open(f"t{n}")
        gw.http.get(f"/v1/trials/t{n}/task", headers=gw.headers(session))
        gw.http.get(f"/v1/trials/t{n}/kubectl/get/extra-{n}", headers=gw.headers(session))
        gw.http.request("PURGE", f"/v1/trials/t{n}/task", headers=gw.headers(session))
    after = _samples(registry)
    # Five trials and three kinds of request: only the route's `other` method (the 405) is new.
    assert _series(after) - before == {("/v1/trials/{trial_id}/task", "other")}
    assert _count(after, "/v1/trials/{trial_id}/task", "GET", "ok") == 5
    assert _count(after, "unmatched", "other", "client_error") == 5
    assert _count(after, "/v1/trials/{trial_id}/task", "other", "client_error") == 5


def test_environment_and_unexpected_failures_are_server_errors(
    measured: tuple[Gateway, CollectorRegistry],
) -> None:
    gw, registry = measured
    session = gw.open(TRIAL)

    def unreachable(query: str, time: object) -> dict[str, object]:
        raise EnvironmentFailure("prometheus is unreachable")

    def boom(
        kind: str | None = None, name: str | None = None, *, copy: bool = True
    ) -> list[dict[str, Any]]:
        raise RuntimeError("boom")

    session.env.query_metrics = unreachable  # type: ignore[method-assign]
    session.env.events = boom  # type: ignore[method-assign]
    headers = gw.headers(session)
    query = gw.http.get(
        f"/v1/trials/{TRIAL}/metrics/query", params={"query": "up"}, headers=headers
    )
    events = gw.http.get(f"/v1/trials/{TRIAL}/kubectl/events", headers=headers)
    assert (query.status_code, events.status_code) == (503, 500)
    samples = _samples(registry)
    assert _count(samples, "/v1/trials/{trial_id}/metrics/query", "GET", "server_error") == 1
    assert _count(samples, "/v1/trials/{trial_id}/kubectl/events", "GET", "server_error") == 1
    assert _count(samples, "/v1/trials/{trial_id}/kubectl/events", "GET", "ok") == 0


def test_a_request_the_client_abandons_counts_as_a_client_error() -> None:
    app = FastAPI()

    @app.get("/v1/trials/{trial_id}/slow")
    async def slow(trial_id: str) -> None:
        raise asyncio.CancelledError  # what the server raises when the client disconnects

    registry = CollectorRegistry()
    GatewayMetrics(registry).instrument(app, app.routes)

    async def call() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
            await client.get(f"/v1/trials/{TRIAL}/slow")

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(call())
    samples = _samples(registry)
    assert _count(samples, "/v1/trials/{trial_id}/slow", "GET", "client_error") == 1
    assert _count(samples, "/v1/trials/{trial_id}/slow", "GET", "server_error") == 0
