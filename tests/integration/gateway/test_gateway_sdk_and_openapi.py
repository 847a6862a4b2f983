"""The SDK over an ASGI transport and a real socket, and the checked-in OpenAPI document."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
from gateway_fakes import Gateway, served

from itbench.client import (
    AgentAction,
    AsyncITBenchClient,
    InProcessTransport,
    ITBenchAPIError,
    ITBenchClient,
)
from itbench.gateway.openapi import openapi_document, render

ROOT = Path(__file__).resolve().parents[3]


def test_the_async_client_works_a_trial_end_to_end(gw: Gateway) -> None:
    session = gw.open("t1")

    async def agent() -> list[str]:
        async with AsyncITBenchClient.in_process(gw.app, session.token) as client:
            trial = await client.next_trial()
            task = await client.task()
            await client.started()
            pods = await client.get("pods")
            await client.act(AgentAction(verb="rollout-undo", kind="Deployment", name="cart"))
            waited = await client.wait(30)
            try:
                await client.oracle()
            except ITBenchAPIError as exc:
                refused = exc.slug
            await client.finished()
            return [
                trial.trial_id,
                task.alerts[0].alertname,
                str(len(pods.items)),
                str(waited.firing_alerts),
                refused,
            ]

    assert asyncio.run(agent()) == ["t1", "KubePodNotReady", "2", "0", "forbidden-ground-truth"]
    assert session.state.value == "Finished"
    assert [e.action for e in session.audit][-3:] == [
        "protocol.wait",
        "oracle",
        "protocol.finished",
    ]


def test_the_async_client_polls_with_its_injected_sleep(gw: Gateway) -> None:
    session = gw.open("t1", ready=False)
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)
        gw.registry.mark_ready("t1", session.env.now())

    async def poll() -> str:
        client = AsyncITBenchClient(
            "http://gw",
            session.token,
            transport=httpx.ASGITransport(app=gw.app),
            poll_interval=2.0,
            sleep=fake_sleep,
        )
        trial = await client.next_trial()
        await client.aclose()
        return trial.state

    assert asyncio.run(poll()) == "Ready"
    assert slept == [2.0]


def test_docs_openapi_json_is_up_to_date() -> None:
    checked_in = (ROOT / "docs" / "openapi.json").read_text(encoding="utf-8")
    assert checked_in == render(), (
        "docs/openapi.json is stale: run `python -m itbench.gateway.openapi docs/openapi.json`"
    )


def test_the_openapi_document_describes_bodies_problems_and_bearer_auth() -> None:
    doc = openapi_document()
    diagnosis = doc["paths"]["/v1/trials/{trial_id}/diagnosis"]["post"]
    body = diagnosis["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/DiagnosisReport"}
    assert "propagationChain" in doc["components"]["schemas"]["DiagnosisReport"]["properties"]
    problem = diagnosis["responses"]["default"]["content"]["application/problem+json"]
    assert problem["schema"] == {"$ref": "#/components/schemas/Problem"}
    assert doc["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    assert json.dumps(doc).count("HTTPValidationError") == 0


def test_the_sync_client_works_against_a_real_socket(gw: Gateway) -> None:
    session = gw.open("t1")
    with served(gw.app) as url, ITBenchClient(url, session.token) as client:
        assert client.next_trial().trial_id == "t1"
        assert client.alerts()[0].alertname == "KubePodNotReady"
        try:
            client.get("scenarios")
        except ITBenchAPIError as exc:
            refused = exc.problem["rule"]
    assert refused == "ground-truth"
    assert [e.action for e in session.audit] == [
        "protocol.list",
        "observe.alerts",
        "observe.kubectl.get",
    ]


def test_the_in_process_shortcut_and_plain_httpx_give_the_same_answers(gw: Gateway) -> None:
    """In-process clients skip httpx's request objects; the exchange must not change."""
    answers = []
    for trial_id, direct in (("t1", True), ("t2", False)):
        session = gw.open(trial_id)
        if direct:
            client = ITBenchClient.in_process(gw.app, session.token)
        else:
            http = httpx.Client(base_url="http://gw", transport=InProcessTransport(gw.app))
            client = ITBenchClient("http://gw", session.token, http=http)
        assert (client._direct is not None) == direct
        client.use_trial(trial_id)
        got: list[object] = [client.task().alerts[0].alertname]
        got.append(client.query("up", at=session.env.now())["resultType"])
        got.append(len(client.get("pods").items))
        client.started()
        got.append(client.act(AgentAction(verb="rollout-undo", kind="Deployment", name="cart")).ok)
        try:
            client.act(AgentAction(verb="delete", kind="Node", name="n1"))
        except ITBenchAPIError as exc:
            got.append((exc.status, exc.slug))
        try:
            client.query("sum(")
        except ITBenchAPIError as exc:
            got.append((exc.status, exc.slug, [e["field"] for e in exc.errors]))
        answers.append(got)
        client.close()
    assert answers[0] == answers[1]
    assert answers[0][4] == (403, "forbidden-destructive")
