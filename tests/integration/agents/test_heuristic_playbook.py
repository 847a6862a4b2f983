"""The heuristic agents' reading of objects and messages: rollout history, flags flagd serves,
Services, NetworkPolicies, error chains and autoscalers, on hand-written objects."""

from __future__ import annotations

from typing import Any

from agents.heuristic_finops.agent import judge_hpa
from agents.heuristic_sre.flags import flag_concerns, flag_is_on, served_variants
from agents.heuristic_sre.objects import Objects, address_broken, restore_patch
from agents.heuristic_sre.signals import parse_failure

SERVICES = [
    "ad",
    "cart",
    "checkout",
    "frontend",
    "image-provider",
    "load-generator",
    "payment",
    "product-catalog",
    "kafka",
    "frontend-proxy",
]
APP = "opentelemetry.io/name"


def _template(image: str, env: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"labels": {APP: "checkout"}},
        "spec": {
            "containers": [
                {
                    "name": "checkout",
                    "image": image,
                    "env": [{"name": k, "value": v} for k, v in env.items()],
                    "ports": [{"name": "service", "containerPort": 8080}],
                }
            ],
            **spec,
        },
    }


def _deployment(name: str, revision: int, template: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "annotations": {"deployment.kubernetes.io/revision": str(revision)},
        },
        "spec": {"replicas": 1, "selector": {"matchLabels": {APP: name}}, "template": template},
    }


def _replicaset(name: str, owner: str, revision: int, template: dict[str, Any]) -> dict[str, Any]:
    labels = {**template["metadata"]["labels"], "pod-template-hash": name.rsplit("-", 1)[-1]}
    return {
        "metadata": {
            "name": name,
            "annotations": {"deployment.kubernetes.io/revision": str(revision)},
            "ownerReferences": [{"kind": "Deployment", "name": owner}],
        },
        "spec": {"template": {**template, "metadata": {"labels": labels}}},
    }


def _objects(**kinds: Any) -> Objects:
    return Objects(
        deployments=kinds.get("deployments", {}),
        replicasets=kinds.get("replicasets", []),
        pods=kinds.get("pods", []),
        services=kinds.get("services", {}),
        policies=kinds.get("policies", []),
        hpas=[],
        events=[],
        namespace="otel-demo",
    )


def test_restore_patch_reverts_values_and_nulls_added_keys() -> None:
    first = _template("demo:2.0.2", {"PAYMENT_ADDR": "payment:8080"})
    broken = _template("demo:broken", {"PAYMENT_ADDR": "nowhere:1"}, nodeSelector={"disk": "x"})
    patch = restore_patch(broken, first)
    container = patch["spec"]["containers"][0]
    assert container["image"] == "demo:2.0.2"
    assert container["env"] == [{"name": "PAYMENT_ADDR", "value": "payment:8080"}]
    assert patch["spec"]["nodeSelector"] is None
    assert restore_patch(first, first) == {}


def test_the_template_change_is_read_against_the_previous_revision_only() -> None:
    oldest = _template("demo:1.12.0", {"PAYMENT_ADDR": "payment:8080"})
    before = _template("demo:2.0.2", {"PAYMENT_ADDR": "payment:8080"})
    now = _template("demo:2.0.2", {"PAYMENT_ADDR": "payment-gateway:8080"})
    objects = _objects(
        deployments={"checkout": _deployment("checkout", 3, now)},
        replicasets=[
            _replicaset("checkout-aaa", "checkout", 1, oldest),
            _replicaset("checkout-bbb", "checkout", 2, before),
            _replicaset("checkout-ccc", "checkout", 3, now),
        ],
    )
    change = objects.template_change("checkout")
    assert change is not None
    assert change.fields == ("checkout/env",), "the older image of revision 1 is history"
    assert change.env == {"PAYMENT_ADDR": ("payment:8080", "payment-gateway:8080")}
    assert change.previous_revision == 2
    env = change.patch["spec"]["template"]["spec"]["containers"][0]["env"]
    assert env == [{"name": "PAYMENT_ADDR", "value": "payment:8080"}]


def test_a_paused_rollout_serves_off_and_is_not_a_flag_that_is_on() -> None:
    paused = {
        "variants": {"on": True, "off": False},
        "defaultVariant": "on",
        "targeting": {"fractional": [["on", 0], ["off", 100]]},
    }
    assert served_variants(paused) == {"off"}
    assert not flag_is_on(paused)
    rolled = {**paused, "targeting": {"fractional": [["on", 10], ["off", 90]]}}
    assert served_variants(rolled) == {"on", "off"}
    assert flag_is_on(rolled)
    assert flag_is_on({"variants": {"10sec": 10000, "off": 0}, "defaultVariant": "10sec"})
    assert not flag_is_on({"variants": {"on": 100, "off": 0}, "defaultVariant": "off"})
    disabled = {"variants": {"on": True, "off": False}, "defaultVariant": "on", "state": "DISABLED"}
    assert not flag_is_on(disabled)


def test_flags_concern_the_services_their_key_and_description_name() -> None:
    def concerns(key: str, description: str = "") -> set[str]:
        return flag_concerns(key, {"description": description}, SERVICES)

    assert concerns("productCatalogFailure") == {"product-catalog"}
    assert concerns("paymentUnreachable", "Payment service is unavailable") == {"payment"}
    assert concerns("adHighCpu") == {"ad"}
    assert concerns("imageSlowLoad", "slow loading images in the frontend") == {
        "image-provider",
        "frontend",
    }
    assert concerns("kafkaQueueProblems") == {"kafka"}
    assert concerns("loadGeneratorFloodHomepage") == {"load-generator"}


def test_an_address_is_broken_when_no_service_or_port_answers_it() -> None:
    services = {"payment": {"spec": {"ports": [{"port": 8080}]}}}
    assert address_broken("payment:8080", services) is None
    assert address_broken("http://payment:8080/charge", services) is None
    assert address_broken("payment-gateway:8080", services) == (
        "payment-gateway is no Service of the namespace"
    )
    assert address_broken("payment:9090", services) == "Service payment has no port 9090"


def test_a_service_whose_selector_or_target_port_misses_its_pods_is_fixed_narrowly() -> None:
    template = _template("demo:2.0.2", {})
    objects = _objects(
        deployments={"checkout": _deployment("checkout", 1, template)},
        services={
            "checkout": {
                "spec": {
                    "selector": {APP: "wrong"},
                    "ports": [{"name": "tcp-service", "port": 8080, "targetPort": 9999}],
                }
            }
        },
    )
    problems = dict(objects.service_problems("checkout", "checkout"))
    patches = list(problems.values())
    assert {"spec": {"selector": {APP: "checkout"}}} in patches
    assert {
        "spec": {"ports": [{"name": "tcp-service", "port": 8080, "targetPort": 8080}]}
    } in patches


def test_only_a_policy_that_leaves_a_served_port_out_is_blocking() -> None:
    template = _template("demo:2.0.2", {})
    team = {
        "metadata": {"name": "checkout-ingress"},
        "spec": {
            "podSelector": {"matchLabels": {APP: "checkout"}},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": {}}], "ports": [{"port": 8080}]}],
        },
    }
    deny = {
        "metadata": {"name": "checkout-deny"},
        "spec": {
            "podSelector": {"matchLabels": {APP: "checkout"}},
            "ingress": [
                {"ports": [{"port": 1, "endPort": 8079}, {"port": 8081, "endPort": 65535}]}
            ],
        },
    }
    deployments = {"checkout": _deployment("checkout", 1, template)}
    assert (
        _objects(deployments=deployments, policies=[team]).blocking_policies("checkout", []) == []
    )
    blocking = _objects(deployments=deployments, policies=[deny]).blocking_policies("checkout", [])
    assert [(p["metadata"]["name"], ports) for p, ports in blocking] == [("checkout-deny", [8080])]


def test_an_error_chain_names_the_service_that_saw_the_failure_and_its_peer() -> None:
    objects = _objects(
        deployments={s: {} for s in ("frontend", "checkout", "shipping")},
        services={s: {} for s in ("frontend", "checkout", "shipping")},
    )
    line = (
        '{"level":50,"msg":"POST /api/checkout failed: oteldemo.CheckoutService/PlaceOrder on '
        'checkout failed: dial tcp shipping:8080: i/o timeout"}'
    )
    failure = parse_failure("frontend", line, objects)
    assert (failure.reporter, failure.target, failure.kind) == ("checkout", "shipping", "timeout")
    own = parse_failure(
        "checkout", "PlaceOrder failed: dial tcp: lookup pay-gw: no such host", objects
    )
    assert (own.reporter, own.host, own.target, own.kind) == (
        "checkout",
        "pay-gw",
        None,
        "unresolvable",
    )


def _hpa(name: str, low: int, high: int, target: int, current: int) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "scaleTargetRef": {"kind": "Deployment", "name": name},
            "minReplicas": low,
            "maxReplicas": high,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": target},
                    },
                }
            ],
        },
        "status": {"currentReplicas": current},
    }


def test_an_autoscaler_at_its_ceiling_with_a_tiny_target_goes_back_to_its_earlier_bounds() -> None:
    peers = [_hpa("cart", 1, 3, 80, 1), _hpa("frontend", 1, 3, 80, 1)]
    verdict = judge_hpa(
        _hpa("recommendation", 2, 6, 2, 6), peers, {"minReplicas": 1, "maxReplicas": 3}
    )
    assert verdict is not None
    why, patch = verdict
    assert patch["spec"]["minReplicas"] == 1 and patch["spec"]["maxReplicas"] == 3
    target = patch["spec"]["metrics"][0]["resource"]["target"]
    assert target == {"type": "Utilization", "averageUtilization": 80}
    assert any("far below" in w for w in why)


def test_a_healthy_autoscaler_is_left_alone() -> None:
    peers = [_hpa("cart", 1, 3, 80, 1)]
    assert judge_hpa(_hpa("frontend", 1, 3, 80, 3), peers, {}) is None, "busy, not misconfigured"
    assert judge_hpa(_hpa("frontend", 1, 3, 5, 1), peers, {}) is None, "not at its ceiling"
