"""Guardrails over HTTP: tokens, trial isolation, refused actions and reads, hidden ground truth."""

from __future__ import annotations

from typing import Any

import pytest
from gateway_fakes import Gateway

from itbench.client import AgentAction, ITBenchAPIError, ITBenchClient


def test_missing_malformed_and_unknown_tokens_are_401(gw: Gateway) -> None:
    gw.open("t1")
    missing = gw.http.get("/v1/trials/t1/task")
    malformed = gw.http.get("/v1/trials/t1/task", headers={"Authorization": "Basic abc"})
    unknown = gw.http.get("/v1/trials/t1/task", headers={"Authorization": "Bearer nope"})
    for response in (missing, malformed, unknown):
        assert response.status_code == 401
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["type"].endswith("/unauthenticated")
    assert "Bearer" in missing.json()["detail"]
    assert "no open trial" in unknown.json()["detail"]


def test_a_token_never_reaches_another_trial_and_the_attempt_is_audited(gw: Gateway) -> None:
    mine = gw.open("t1")
    other = gw.open("t2")
    response = gw.http.get("/v1/trials/t2/alerts", headers=gw.headers(mine))
    assert response.status_code == 403
    assert response.json()["type"].endswith("/forbidden-trial")
    assert "reaches trial 't1' only" in response.json()["detail"]
    assert mine.audit[-1].outcome == "refused"
    assert mine.audit[-1].path == "/v1/trials/t2/alerts"
    assert other.audit == []


def test_trials_of_one_agent_never_see_each_others_objects(gw: Gateway) -> None:
    first = gw.open("t1")
    second = gw.open("t2")
    gw.client(first).act(
        AgentAction(
            verb="set-image",
            kind="Deployment",
            name="cart",
            image="ghcr.io/open-telemetry/demo:2.0.0-cart",
        )
    )
    first_image = gw.client(first).get("deploy", "cart").items[0]["spec"]["template"]["spec"]
    second_image = gw.client(second).get("deploy", "cart").items[0]["spec"]["template"]["spec"]
    assert first_image["containers"][0]["image"] == "ghcr.io/open-telemetry/demo:2.0.0-cart"
    assert second_image["containers"][0]["image"] == "bad:image"
    assert gw.client(second).alerts()[0].alertname == "KubePodNotReady"
    assert gw.client(first).alerts() == []


def test_an_allowed_action_reaches_the_environment_and_is_audited(gw: Gateway) -> None:
    session = gw.open("t1")
    result = gw.client(session).act(
        AgentAction(verb="rollout-undo", kind="Deployment", name="cart")
    )
    assert result.ok
    assert result.outcome == "applied"
    env_actions = session.env.actions  # type: ignore[attr-defined]
    assert env_actions[0].namespace == "otel-demo"
    entry = session.audit[-1]
    assert (entry.action, entry.outcome) == ("act.rollout-undo", "ok")
    assert entry.detail["action"]["name"] == "cart"
    assert entry.detail["result"]["outcome"] == "applied"


def test_a_failed_action_is_returned_and_audited_as_error(gw: Gateway) -> None:
    session = gw.open("t1")
    result = gw.client(session).act(AgentAction(verb="scale", kind="Deployment", name="x"))
    assert not result.ok
    assert session.audit[-1].outcome == "error"


def test_an_action_whose_metadata_is_not_an_object_is_rejected_naming_the_field(
    gw: Gateway,
) -> None:
    session = gw.open("t1")
    action = {
        "verb": "apply",
        "kind": "ConfigMap",
        "name": "x",
        "manifest": {"kind": "ConfigMap", "metadata": "oops"},
    }
    response = gw.http.post("/v1/trials/t1/actions", json=action, headers=gw.headers(session))
    assert response.status_code == 422, response.text
    assert any("manifest" in e["field"] for e in response.json()["errors"])
    assert session.env.actions == []  # type: ignore[attr-defined]
    assert session.audit[-1].outcome == "rejected"


REFUSED: list[tuple[dict[str, Any], str, str]] = [
    ({"verb": "delete", "kind": "Node", "name": "node-1"}, "destructive", "Node/node-1"),
    ({"verb": "delete", "kind": "ns", "name": "otel-demo"}, "destructive", "Namespace/otel-demo"),
    (
        {"verb": "scale", "kind": "Deployment", "name": "prometheus", "replicas": 0},
        "observability",
        "observability stack",
    ),
    ({"verb": "delete", "kind": "Deployment", "name": "otel-collector"}, "observability", ""),
    ({"verb": "rollout-restart", "kind": "Deployment", "name": "jaeger"}, "observability", ""),
    ({"verb": "delete", "kind": "Service", "name": "grafana"}, "observability", ""),
    ({"verb": "delete", "kind": "Deployment", "name": "loki"}, "observability", ""),
    (
        {"verb": "delete", "kind": "PrometheusRule", "name": "astronomy-shop"},
        "observability",
        "configures alerting",
    ),
    (
        {"verb": "patch", "kind": "ConfigMap", "name": "itbench-alert-rules", "patch": {"a": 1}},
        "observability",
        "holds alert rules",
    ),
    ({"verb": "delete", "kind": "Scenario", "name": "x"}, "platform", "benchmark platform"),
    (
        {"verb": "delete", "kind": "Deployment", "name": "runner", "namespace": "itbench"},
        "platform",
        "'itbench'",
    ),
    (
        {"verb": "delete", "kind": "Deployment", "name": "cart", "namespace": "other"},
        "out-of-namespace",
        "outside this trial",
    ),
    (
        {
            "verb": "apply",
            "kind": "ConfigMap",
            "name": "x",
            "manifest": {
                "kind": "ConfigMap",
                "metadata": {"name": "x", "namespace": "kube-system"},
            },
        },
        "out-of-namespace",
        "kube-system",
    ),
    (
        {
            "verb": "apply",
            "kind": "Trial",
            "name": "x",
            "manifest": {"apiVersion": "itbench.io/v1alpha1", "kind": "Trial"},
        },
        "platform",
        "itbench.io",
    ),
    ({"verb": "patch", "kind": "ClusterRole", "name": "admin"}, "out-of-namespace", "cluster"),
    (
        {
            "verb": "apply",
            "kind": "List",
            "name": "x",
            "manifest": {
                "apiVersion": "v1",
                "kind": "List",
                "items": [{"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule"}],
            },
        },
        "one-object",
        "one by one",
    ),
    (
        # Turning an allowed object into a protected kind would pass every rule about kinds.
        {
            "verb": "patch",
            "kind": "ConfigMap",
            "name": "flagd-config",
            "patch": {"kind": "PrometheusRule", "spec": {"groups": []}},
        },
        "identity",
        "may not change kind",
    ),
    (
        {"verb": "patch", "kind": "ConfigMap", "name": "x", "patch": {"apiVersion": "v2"}},
        "identity",
        "apiVersion",
    ),
    (
        {
            "verb": "patch",
            "kind": "Deployment",
            "name": "cart",
            "patch": {"metadata": {"namespace": "kube-system"}},
        },
        "identity",
        "metadata.namespace",
    ),
    ({"verb": "patch", "kind": "RoleBinding", "name": "agent"}, "privilege", "permissions"),
]


@pytest.mark.parametrize(("action", "rule", "words"), REFUSED)
def test_each_guardrail_refuses_with_its_reason_and_is_audited(
    gw: Gateway, action: dict[str, Any], rule: str, words: str
) -> None:
    session = gw.open("t1")
    response = gw.http.post("/v1/trials/t1/actions", json=action, headers=gw.headers(session))
    assert response.status_code == 403
    problem = response.json()
    assert problem["type"].endswith(f"/forbidden-{rule}")
    assert problem["rule"] == rule
    assert words in problem["detail"]
    assert session.env.actions == []  # type: ignore[attr-defined]
    entry = session.audit[-1]
    assert entry.outcome == "refused"
    assert entry.action == f"act.{action['verb']}"
    assert entry.reason == problem["detail"]
    assert session.env.advanced == [5.0]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("kind", "namespace", "rule"),
    [
        ("Scenario", None, "ground-truth"),
        ("trials", None, "ground-truth"),
        ("benchmarkruns", None, "ground-truth"),
        ("pods", "kube-system", "out-of-namespace"),
        ("configmaps", "itbench", "platform"),
    ],
)
def test_reading_ground_truth_platform_or_foreign_objects_is_refused(
    gw: Gateway, kind: str, namespace: str | None, rule: str
) -> None:
    session = gw.open("t1")
    params = {"kind": kind} | ({"namespace": namespace} if namespace else {})
    response = gw.http.get("/v1/trials/t1/kubectl/get", params=params, headers=gw.headers(session))
    assert response.status_code == 403
    assert response.json()["rule"] == rule
    assert session.audit[-1].outcome == "refused"
    assert session.audit[-1].detail["kind"] == kind


def test_nodes_are_readable_though_cluster_scoped(gw: Gateway) -> None:
    session = gw.open("t1")
    nodes = gw.client(session).get("nodes")
    assert [n["metadata"]["name"] for n in nodes.items] == ["node-1"]


def test_the_oracle_is_refused_unless_the_run_allows_it(gw: Gateway) -> None:
    hidden = gw.open("t1")
    with pytest.raises(ITBenchAPIError) as err:
        gw.client(hidden).oracle()
    assert err.value.status == 403
    assert err.value.slug == "forbidden-ground-truth"
    assert "hidden from agents" in err.value.detail
    assert hidden.audit[-1].action == "oracle"
    assert hidden.audit[-1].outcome == "refused"


def test_the_allowed_oracle_returns_root_causes_and_mitigations(gw: Gateway) -> None:
    allowed = gw.open("t1", allow_oracle=True)
    truth = gw.client(allowed).oracle()
    assert [e.name for e in truth.root_causes()] == ["cart"]
    assert truth.mitigations[0].steps[0].action == "rollout-undo"
    assert gw.client(allowed).task().allow_oracle is True


def test_the_sdk_against_a_closed_client_session_reports_the_problem(gw: Gateway) -> None:
    session = gw.open("t1")
    client = ITBenchClient.in_process(gw.app, "wrong")
    client.use_trial("t1")
    with pytest.raises(ITBenchAPIError) as err:
        client.task()
    assert err.value.status == 401
    assert err.value.problem["instance"] == "/v1/trials/t1/task"
    assert session.audit == []
