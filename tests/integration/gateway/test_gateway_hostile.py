"""Hostile input at the gateway's door: every known-bad request is a bounded 4xx problem, the
gateway keeps answering, and nothing reaches the environment."""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from gateway_fakes import Gateway, served
from hostile_requests import ADDITIONS_5000, CORPUS, MAX_PROBLEM_BYTES, HostileRequest

from itbench.client import InProcessTransport
from itbench.gateway.operations import queries
from itbench.gateway.sandbox import ParserSandbox
from itbench.gateway.schemas import MAX_BODY_BYTES
from itbench.gateway.sessions import TrialSession

ROOT = Path(__file__).resolve().parents[3]
WATCHED_KINDS = ("Deployment", "Service", "ConfigMap", "NetworkPolicy", "HorizontalPodAutoscaler")


def _objects(session: TrialSession) -> dict[str, Any]:
    # What an agent could change: everything but status and the server's bookkeeping.
    out: dict[str, Any] = {}
    for kind in WATCHED_KINDS:
        for obj in session.env.get_objects(kind):
            meta = obj.get("metadata") or {}
            body = {k: v for k, v in obj.items() if k not in ("status", "metadata")}
            out[f"{kind}/{meta.get('name')}"] = (body, meta.get("labels"), meta.get("annotations"))
    return out


@dataclass
class Answer:
    """A response, as bytes (httpx refuses URLs as long as some of these queries)."""

    status_code: int
    headers: dict[str, str]
    content: bytes

    def json(self) -> Any:
        return json.loads(self.content)

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")


def _request(
    bad: HostileRequest, trial: str, token: str
) -> tuple[str, bytes, bytes, list[tuple[bytes, bytes]]]:
    path = f"/v1/trials/{trial}/{bad.path}"
    headers = [
        (b"authorization", f"Bearer {token}".encode()),
        (b"content-type", bad.content_type.encode()),
    ]
    if bad.content:
        headers.append((b"content-length", str(len(bad.content)).encode()))
    return path, urlencode(bad.params).encode(), bad.content, headers


def _send(gw: Gateway, session: TrialSession, bad: HostileRequest) -> Answer:
    path, query, body, headers = _request(bad, session.trial_id, session.token)
    status, raw_headers, content = InProcessTransport(gw.app).exchange(
        bad.method, path.encode(), query, headers, body
    )
    return Answer(status, {k.decode(): v.decode() for k, v in raw_headers}, content)


def _send_socket(port: int, trial: str, token: str, bad: HostileRequest) -> Answer:
    path, query, body, headers = _request(bad, trial, token)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.putrequest(bad.method, f"{path}?{query.decode()}" if query else path)
        for name, value in headers:
            conn.putheader(name.decode(), value.decode())
        if not bad.content:
            conn.putheader("content-length", "0")
        # A body beyond the limit is answered from its declared length alone: send none of it.
        conn.endheaders(None if len(body) > MAX_BODY_BYTES else body or None)
        response = conn.getresponse()
        return Answer(response.status, dict(response.getheaders()), response.read())
    finally:
        conn.close()


def _assert_refused(response: Answer, bad: HostileRequest) -> dict[str, Any]:
    assert response.status_code == bad.status, response.text[:2000]
    content_type = {k.lower(): v for k, v in response.headers.items()}["content-type"]
    assert content_type.startswith("application/problem+json")
    assert len(response.content) <= MAX_PROBLEM_BYTES, len(response.content)
    problem: dict[str, Any] = response.json()
    return problem


@pytest.fixture(scope="module")
def sim_gateway() -> Iterator[tuple[Gateway, TrialSession]]:
    gateway = Gateway(inline=False)
    session = gateway.open_sim()
    yield gateway, session
    gateway.http.close()


@pytest.mark.parametrize("bad", CORPUS, ids=[b.name for b in CORPUS])
def test_a_known_bad_request_is_a_bounded_4xx_and_changes_nothing(
    sim_gateway: tuple[Gateway, TrialSession], bad: HostileRequest
) -> None:
    gw, session = sim_gateway
    before = _objects(session)
    reports = (session.diagnosis, session.mitigation, session.state)
    trail = len(session.audit)
    problem = _assert_refused(_send(gw, session, bad), bad)
    assert problem["detail"]
    assert _objects(session) == before
    assert (session.diagnosis, session.mitigation, session.state) == reports
    assert len(session.audit) == trail + 1
    assert session.audit[-1].outcome in ("error", "rejected")
    alive = gw.client(session).query("up")
    assert alive["resultType"] == "vector"


@pytest.mark.parametrize(
    ("query", "limit"),
    [
        (ADDITIONS_5000, "binary-operators"),
        (" or ".join(["up"] * 500), "binary-operators"),
        ("(" * 3000 + "up" + ")" * 3000, "nesting"),
        ("sum(" * 1000 + "up" + ")" * 1000, "aggregation-nesting"),
        ("up + " * 20_000 + "up", "length"),
    ],
    ids=["5000-additions", "500-ors", "3000-parentheses", "1000-sums", "100kb"],
)
def test_a_query_beyond_a_limit_is_a_bad_query_naming_the_limit(
    sim_gateway: tuple[Gateway, TrialSession], query: str, limit: str
) -> None:
    gw, session = sim_gateway
    probe = HostileRequest("q", "GET", "metrics/query", 400, {"query": query})
    response = _send(gw, session, probe)
    problem = response.json()
    assert response.status_code == 400
    assert problem["type"].endswith("/bad-query")
    assert problem["limit"] == limit
    assert f"({limit})" in problem["detail"]
    assert problem["errors"][0]["field"] == "query"


def test_a_200kb_query_is_quoted_only_as_an_excerpt_with_its_length(
    sim_gateway: tuple[Gateway, TrialSession],
) -> None:
    gw, session = sim_gateway
    query = 'sum(rate(x{a="' + "y" * 200_000 + '"}[5m]))'
    response = _send(
        gw, session, HostileRequest("q", "GET", "metrics/query", 400, {"query": query})
    )
    assert response.status_code == 400
    assert len(response.content) < 2000
    assert f"{len(query)} characters" in response.json()["detail"]
    assert len(session.audit[-1].detail["query"]) <= 500


def test_series_and_samples_a_query_touches_are_bounded(
    sim_gateway: tuple[Gateway, TrialSession], monkeypatch: pytest.MonkeyPatch
) -> None:
    from itbench.environments.sim.promql import limits

    gw, session = sim_gateway
    monkeypatch.setattr(limits, "DEFAULT_LIMITS", limits.QueryLimits(max_series=10))
    response = gw.http.get(
        f"/v1/trials/{session.trial_id}/metrics/query",
        params={"query": 'count({__name__=~".+"})'},
        headers=gw.headers(session),
    )
    assert response.status_code == 400
    assert response.json()["limit"] == "series"
    monkeypatch.setattr(limits, "DEFAULT_LIMITS", limits.QueryLimits(max_samples=100))
    ranged = gw.http.get(
        f"/v1/trials/{session.trial_id}/metrics/query",
        params={"query": "sum(rate(traces_span_metrics_calls_total[10m]))"},
        headers=gw.headers(session),
    )
    assert ranged.status_code == 400
    assert ranged.json()["limit"] == "samples"


def test_a_wrong_typed_networkpolicy_is_refused_with_its_field_paths_before_the_twin(
    sim_gateway: tuple[Gateway, TrialSession],
) -> None:
    gw, session = sim_gateway
    bad = next(b for b in CORPUS if b.name == "networkpolicy-wrong-types")
    problem = _assert_refused(_send(gw, session, bad), bad)
    fields = {e["field"] for e in problem["errors"]}
    assert "manifest.spec.podSelector" in fields
    assert "manifest.spec.ingress.0.ports.0.protocol" in fields
    assert problem["type"].endswith("/invalid-object")
    assert session.env.get_objects("NetworkPolicy", "cart-ingress") == []


def test_a_valid_networkpolicy_still_applies(sim_gateway: tuple[Gateway, TrialSession]) -> None:
    gw, session = sim_gateway
    manifest = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "allow-cart"},
        "spec": {
            "podSelector": {"matchLabels": {"app.kubernetes.io/component": "cart"}},
            "ingress": [{"ports": [{"port": 7070, "protocol": "TCP"}]}],
        },
    }
    response = gw.http.post(
        f"/v1/trials/{session.trial_id}/actions",
        json={"verb": "apply", "kind": "NetworkPolicy", "name": "allow-cart", "manifest": manifest},
        headers=gw.headers(session),
    )
    assert response.status_code == 200, response.text
    assert response.json()["ok"] is True
    delete = {"verb": "delete", "kind": "NetworkPolicy", "name": "allow-cart"}
    gw.http.post(f"/v1/trials/{session.trial_id}/actions", json=delete, headers=gw.headers(session))


def test_a_patch_is_checked_as_the_object_it_would_produce(
    sim_gateway: tuple[Gateway, TrialSession],
) -> None:
    gw, session = sim_gateway
    good = {
        "verb": "patch",
        "kind": "Deployment",
        "name": "cart",
        "patch": {"spec": {"replicas": 2}},
    }
    bad = {
        "verb": "patch",
        "kind": "Deployment",
        "name": "cart",
        "patch": {"spec": {"template": {"spec": {"containers": [{"name": "cart", "ports": "x"}]}}}},
    }
    headers = gw.headers(session)
    refused = gw.http.post(f"/v1/trials/{session.trial_id}/actions", json=bad, headers=headers)
    assert refused.status_code == 422
    assert any(
        e["field"].startswith("patch.spec.template.spec.containers.0.ports")
        for e in refused.json()["errors"]
    )
    applied = gw.http.post(f"/v1/trials/{session.trial_id}/actions", json=good, headers=headers)
    assert applied.status_code == 200 and applied.json()["ok"] is True
    restore = {**good, "patch": {"spec": {"replicas": 1}}}
    gw.http.post(f"/v1/trials/{session.trial_id}/actions", json=restore, headers=headers)


def test_the_parser_sandbox_survives_a_query_that_crashes_the_native_parser() -> None:
    sandbox = ParserSandbox()
    try:
        assert sandbox.check("sum(rate(up[5m]))") is None
        first = sandbox.child_pid()
        # Deep enough to overflow the child's stack (the server's threads have four times it).
        assert sandbox.check("+".join(["up"] * 2000)) == ("the query crashed the PromQL parser")
        assert sandbox.check("up") is None
        assert sandbox.child_pid() not in (None, first)
    finally:
        sandbox.close()


@pytest.mark.interpreted
def test_over_a_real_socket_a_query_that_crashes_the_parser_costs_one_query(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The limits refuse the crashing queries first; with them off, the sandbox still does."""
    gw = Gateway()
    session = gw.open_sim("socket")
    monkeypatch.setattr(queries, "check_query_limits", lambda query: None)
    with served(gw.app) as url, httpx.Client(base_url=url, timeout=60) as http:
        crash = http.get(
            "/v1/trials/socket/metrics/query",
            params={"query": "+".join(["up"] * 2000)},
            headers=gw.headers(session),
        )
        assert crash.status_code == 400
        assert "crashed the PromQL parser" in crash.json()["detail"]
        after = http.get(
            "/v1/trials/socket/metrics/query",
            params={"query": "up"},
            headers=gw.headers(session),
        )
        assert after.status_code == 200


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_itbench_serve_survives_the_queries_that_killed_it() -> None:
    port = _free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "itbench"),
            "serve",
            "--scenario",
            "cart-flagd-failure",
            "--port",
            str(port),
            "--host",
            "127.0.0.1",
            "--scenarios-dir",
            str(ROOT / "scenarios"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        text=True,
    )
    try:
        assert proc.stdout is not None
        token = trial = None
        for line in proc.stdout:
            if match := re.match(r"trial:\s+(\S+)", line):
                trial = match.group(1)
            if match := re.match(r"token:\s+(\S+)", line):
                token = match.group(1)
                break
        assert token and trial, "itbench serve printed no token"
        for bad in (b for b in CORPUS if b.path.startswith(("metrics", "logs", "wait"))):
            if len(urlencode(bad.params)) > 60_000:
                # uvicorn drops request lines this long itself; a query goes as a body instead.
                if not bad.path.startswith("metrics"):
                    continue
                bad = replace(
                    bad, method="POST", params={}, content=json.dumps(bad.params).encode()
                )
            response = _send_socket(port, trial, token, bad)
            assert response.status_code == bad.status, bad.name
            assert len(response.content) <= MAX_PROBLEM_BYTES
        alive = _send_socket(port, trial, token, HostileRequest("ok", "GET", "alerts", 200))
        assert alive.status_code == 200
        assert alive.json()["status"] == "success"
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(timeout=30)
