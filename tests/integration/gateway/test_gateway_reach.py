"""What an agent may reach, through HTTP and MCP on the twin: privileged workloads, other
accounts, token Secrets and observability blinded by policies or quotas are refused naming the
field and the rule; escalations are recorded; MCP tools refuse arguments they do not declare."""

from __future__ import annotations

import asyncio
import json
from copy import deepcopy
from typing import Any

from gateway_fakes import NS, Gateway
from mcp import Client

from itbench.gateway.mcp import build_server
from itbench.gateway.sessions import TrialSession

PROBE_DS: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "DaemonSet",
    "metadata": {"name": "probe-ds", "namespace": NS},
    "spec": {
        "selector": {"matchLabels": {"app": "probe"}},
        "template": {
            "metadata": {"labels": {"app": "probe"}},
            "spec": {
                "hostPID": True,
                "hostNetwork": True,
                "serviceAccountName": "otel-collector",
                "containers": [
                    {
                        "name": "probe",
                        "image": "busybox",
                        "command": ["sh", "-c", "cat /host/etc/shadow"],
                        "securityContext": {"privileged": True},
                        "volumeMounts": [{"name": "host", "mountPath": "/host"}],
                    }
                ],
                "volumes": [{"name": "host", "hostPath": {"path": "/"}}],
            },
        },
    },
}
PROBE_FIELDS = [
    "spec.template.spec.hostNetwork",
    "spec.template.spec.hostPID",
    "spec.template.spec.volumes[0].hostPath",
    "spec.template.spec.containers[0].securityContext.privileged",
    "spec.template.spec.serviceAccountName",
]
CART_PATCH = {
    "spec": {
        "template": {
            "spec": {
                "hostPID": True,
                "serviceAccountName": "otel-collector",
                "containers": [{"name": "cart", "securityContext": {"privileged": True}}],
                "volumes": [{"name": "host", "hostPath": {"path": "/"}}],
            }
        }
    }
}
TOKEN_SECRET = {
    "apiVersion": "v1",
    "kind": "Secret",
    "metadata": {
        "name": "collector-token",
        "annotations": {"kubernetes.io/service-account.name": "otel-collector"},
    },
    "type": "kubernetes.io/service-account-token",
}
CUT_COLLECTOR = {
    "apiVersion": "networking.k8s.io/v1",
    "kind": "NetworkPolicy",
    "metadata": {"name": "quiet"},
    "spec": {
        "podSelector": {"matchLabels": {"app.kubernetes.io/name": "opentelemetry-collector"}},
        "policyTypes": ["Ingress", "Egress"],
    },
}
NO_PODS = {
    "apiVersion": "v1",
    "kind": "ResourceQuota",
    "metadata": {"name": "freeze"},
    "spec": {"hard": {"pods": "0"}},
}
BINDING = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "RoleBinding",
    "metadata": {"name": "mine"},
    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "admin"},
    "subjects": [{"kind": "ServiceAccount", "name": "helper", "namespace": NS}],
}


def _apply(manifest: dict[str, Any]) -> dict[str, Any]:
    meta = manifest["metadata"]
    return {"verb": "apply", "kind": manifest["kind"], "name": meta["name"], "manifest": manifest}


def _post(gw: Gateway, session: TrialSession, action: dict[str, Any]) -> Any:
    return gw.http.post(
        f"/v1/trials/{session.trial_id}/actions", json=action, headers=gw.headers(session)
    )


def _cart_template(gw: Gateway, session: TrialSession) -> dict[str, Any]:
    cart = gw.client(session).get("deploy", "cart").items[0]
    template: dict[str, Any] = cart["spec"]["template"]["spec"]
    return template


def test_the_privileged_daemonset_probe_is_refused_naming_every_field(gw: Gateway) -> None:
    session = gw.open_sim()
    response = _post(gw, session, _apply(PROBE_DS))
    assert response.status_code == 403, response.text
    problem = response.json()
    assert problem["type"].endswith("/forbidden-pod-security")
    assert problem["rule"] == "pod-security"
    assert problem["standard"] == "baseline"
    assert problem["field"] == "spec.template.spec.hostNetwork"
    assert problem["detail"].startswith("DaemonSet/probe-ds: spec.template.spec.hostNetwork")
    assert "Pod Security Standard baseline: Host Namespaces" in problem["detail"]
    assert [e["field"] for e in problem["errors"]] == PROBE_FIELDS
    assert "'otel-collector' is not a new workload's account" in problem["errors"][-1]["message"]
    entry = session.audit[-1]
    assert (entry.action, entry.outcome) == ("act.apply", "refused")
    assert gw.client(session).get("daemonsets").items == []
    assert entry.detail["attemptedEscalation"]["object"] == "DaemonSet/probe-ds"
    assert entry.detail["attemptedEscalation"]["fields"] == PROBE_FIELDS
    assert [(e.object, e.rule) for e in session.escalations] == [
        ("DaemonSet/probe-ds", "pod-security")
    ]


def test_the_same_patch_onto_cart_is_refused_after_merging_and_cart_is_unchanged(
    gw: Gateway,
) -> None:
    session = gw.open_sim()
    before = _cart_template(gw, session)
    action = {"verb": "patch", "kind": "Deployment", "name": "cart", "patch": CART_PATCH}
    response = _post(gw, session, action)
    assert response.status_code == 403, response.text
    problem = response.json()
    assert problem["rule"] == "pod-security"
    assert problem["detail"].startswith("Deployment/cart: spec.template.spec.hostPID")
    fields = [e["field"] for e in problem["errors"]]
    assert fields == [
        "spec.template.spec.hostPID",
        "spec.template.spec.volumes[0].hostPath",
        "spec.template.spec.containers[0].securityContext.privileged",
        "spec.template.spec.serviceAccountName",
    ]
    assert "not the workload's own account ('otel-demo')" in problem["errors"][-1]["message"]
    assert _cart_template(gw, session) == before
    assert session.escalations[0].object == "Deployment/cart"


def test_only_the_account_switch_is_refused_as_its_own_rule(gw: Gateway) -> None:
    session = gw.open_sim()
    patch = {"spec": {"template": {"spec": {"serviceAccountName": "otel-collector"}}}}
    response = _post(
        gw, session, {"verb": "patch", "kind": "Deployment", "name": "cart", "patch": patch}
    )
    assert response.status_code == 403
    problem = response.json()
    assert problem["type"].endswith("/forbidden-service-account")
    assert problem["field"] == "spec.template.spec.serviceAccountName"
    assert session.escalations[0].rule == "service-account"


def test_a_token_secret_is_refused_and_recorded_as_an_escalation(gw: Gateway) -> None:
    session = gw.open_sim()
    response = _post(gw, session, _apply(TOKEN_SECRET))
    assert response.status_code == 403
    problem = response.json()
    assert problem["rule"] == "service-account"
    assert problem["field"] == "type"
    assert "ServiceAccount 'otel-collector'" in problem["detail"]
    assert gw.client(session).get("secrets").items == []
    assert session.escalations[0].fields == ["type"]


def test_a_network_policy_cutting_off_the_collector_is_refused_like_a_direct_change(
    gw: Gateway,
) -> None:
    session = gw.open_sim()
    response = _post(gw, session, _apply(CUT_COLLECTOR))
    assert response.status_code == 403
    problem = response.json()
    assert problem["type"].endswith("/forbidden-observability")
    assert problem["field"] == "spec.podSelector"
    assert "telemetry pods otel-collector-" in problem["detail"]
    assert session.audit[-1].outcome == "refused"
    assert gw.client(session).get("networkpolicies").items == []
    assert session.escalations == []


def test_a_quota_of_zero_pods_is_refused(gw: Gateway) -> None:
    session = gw.open_sim()
    response = _post(gw, session, _apply(NO_PODS))
    assert response.status_code == 403
    problem = response.json()
    assert problem["rule"] == "observability"
    assert problem["field"] == "spec.hard[pods]"
    assert "below what the namespace holds now (23)" in problem["detail"]
    assert gw.client(session).get("resourcequotas").items == []


def test_a_binding_for_a_service_account_is_refused_and_recorded(gw: Gateway) -> None:
    session = gw.open_sim()
    response = _post(gw, session, _apply(BINDING))
    assert response.status_code == 403
    assert response.json()["rule"] == "privilege"
    assert [(e.object, e.rule) for e in session.escalations] == [("RoleBinding/mine", "privilege")]
    deleted = _post(gw, session, {"verb": "delete", "kind": "RoleBinding", "name": "mine"})
    assert deleted.status_code == 403
    assert len(session.escalations) == 1


def test_ordinary_fixes_and_safe_objects_still_go_through(gw: Gateway) -> None:
    session = gw.open_sim()
    client = gw.client(session)
    generous = deepcopy(NO_PODS)
    generous["spec"]["hard"] = {"pods": "100", "requests.memory": "64Gi"}
    allowed = [
        _apply(generous),
        {
            "verb": "patch",
            "kind": "Deployment",
            "name": "cart",
            "patch": {
                "spec": {
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "cart",
                                    "securityContext": {
                                        "runAsNonRoot": True,
                                        "allowPrivilegeEscalation": False,
                                    },
                                }
                            ]
                        }
                    }
                }
            },
        },
        {
            "verb": "set-image",
            "kind": "Deployment",
            "name": "cart",
            "container": "cart",
            "image": "ghcr.io/open-telemetry/demo:2.2.0-cart",
        },
        {"verb": "rollout-restart", "kind": "Deployment", "name": "cart"},
    ]
    for action in allowed:
        response = _post(gw, session, action)
        assert response.status_code == 200, response.text
        assert response.json()["ok"], response.text
    assert [q["metadata"]["name"] for q in client.get("resourcequotas").items] == ["freeze"]
    assert _cart_template(gw, session)["containers"][0]["securityContext"]["runAsNonRoot"] is True
    assert session.escalations == []


# ---- MCP ----------------------------------------------------------------------------------------


def _problem(result: Any) -> Any:
    text: str = result.content[0].text
    return json.loads(text[text.index("{") :])


def _mcp(session: TrialSession, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    server = build_server(lambda _ctx: session)

    async def run() -> list[Any]:
        async with Client(server) as client:
            return [await client.call_tool(tool, args) for tool, args in calls]

    return asyncio.run(run())


def test_mcp_refuses_the_probes_with_the_same_problems() -> None:
    gw = Gateway()
    session = gw.open_sim()
    results = _mcp(
        session,
        [
            ("act", {"action": _apply(PROBE_DS)}),
            (
                "act",
                {
                    "action": {
                        "verb": "patch",
                        "kind": "Deployment",
                        "name": "cart",
                        "patch": CART_PATCH,
                    }
                },
            ),
            ("act", {"action": _apply(TOKEN_SECRET)}),
            ("act", {"action": _apply(CUT_COLLECTOR)}),
            ("act", {"action": _apply(NO_PODS)}),
        ],
    )
    assert all(r.is_error for r in results)
    problems = [_problem(r) for r in results]
    assert [p["type"] for p in problems] == [
        "forbidden-pod-security",
        "forbidden-pod-security",
        "forbidden-service-account",
        "forbidden-observability",
        "forbidden-observability",
    ]
    assert [e["field"] for e in problems[0]["errors"]] == PROBE_FIELDS
    assert problems[0]["standard"] == "baseline"
    assert problems[4]["field"] == "spec.hard[pods]"
    assert [e.object for e in session.escalations] == [
        "DaemonSet/probe-ds",
        "Deployment/cart",
        "Secret/collector-token",
    ]
    assert [(e.method, e.outcome) for e in session.audit] == [("MCP", "refused")] * 5


def test_mcp_kubectl_namespace_is_honoured_and_refused_outside_the_trial() -> None:
    gw = Gateway()
    session = gw.open_sim()
    own, other, described = _mcp(
        session,
        [
            ("kubectl_get", {"kind": "deploy", "name": "cart", "namespace": NS}),
            ("kubectl_get", {"kind": "secrets", "namespace": "kube-system"}),
            ("kubectl_describe", {"kind": "deploy", "name": "cart", "namespace": "itbench"}),
        ],
    )
    assert not own.is_error
    assert [i["metadata"]["name"] for i in _problem(own)["items"]] == ["cart"]
    assert other.is_error
    assert _problem(other)["type"] == "forbidden-out-of-namespace"
    assert described.is_error
    assert _problem(described)["type"] == "forbidden-platform"


def test_every_mcp_tool_refuses_an_argument_it_does_not_declare() -> None:
    gw = Gateway()
    session = gw.open_sim()
    server = build_server(lambda _ctx: session)

    async def run() -> tuple[list[str], list[Any], Any]:
        async with Client(server) as client:
            listed = await client.list_tools()
            names = sorted(t.name for t in listed.tools)
            schemas = {t.name: t.input_schema for t in listed.tools}
            results = [await client.call_tool(name, {"label_selector": "app=x"}) for name in names]
            return names, results, schemas

    names, results, schemas = asyncio.run(run())
    assert len(names) >= 20
    for name, result in zip(names, results, strict=True):
        assert result.is_error, name
        problem = _problem(result)
        assert problem["type"] == "unknown-argument", name
        assert problem["errors"] == [
            {"field": "label_selector", "message": f"not an argument of {name}"}
        ]
        assert schemas[name]["additionalProperties"] is False
    assert {(e.method, e.action, e.outcome) for e in session.audit} == {
        ("MCP", "request", "rejected")
    }
    assert sorted(e.path for e in session.audit) == names
    assert session.env.now() == session.audit[0].time


PASSWORD_SECRET = {
    "apiVersion": "v1",
    "kind": "Secret",
    "metadata": {"name": "db-credentials"},
    "type": "Opaque",
    "data": {"password": "aHVudGVyMi1ub3QtZm9yLWFnZW50cw=="},  # hunter2-not-for-agents
}


def test_secret_values_never_come_back_to_an_agent_over_http_in_process_or_mcp(
    gw: Gateway,
) -> None:
    session = gw.open_sim()
    assert _post(gw, session, _apply(PASSWORD_SECRET)).status_code == 200
    stored = session.env.get_objects("Secret", "db-credentials")[0]
    assert stored["data"]["password"] == PASSWORD_SECRET["data"]["password"]  # held as applied
    listed = gw.http.get(
        f"/v1/trials/{session.trial_id}/kubectl/get",
        params={"kind": "secrets", "name": "db-credentials"},
        headers=gw.headers(session),
    )
    assert listed.status_code == 200
    assert "hunter2" not in listed.text and stored["data"]["password"] not in listed.text
    [item] = listed.json()["items"]
    assert item["data"] == {"password": ""}
    described = gw.client(session).describe("secret", "db-credentials")
    assert described.object["data"] == {"password": ""}
    assert stored["data"]["password"] not in described.text
    via_sdk = gw.client(session).get("secrets").items
    assert all(value == "" for s in via_sdk for value in (s.get("data") or {}).values())
    (mcp_get,) = _mcp(session, [("kubectl_get", {"kind": "secret", "name": "db-credentials"})])
    assert not mcp_get.is_error
    assert _problem(mcp_get)["items"][0]["data"] == {"password": ""}
    assert stored["data"]["password"] not in json.dumps(_problem(mcp_get))
