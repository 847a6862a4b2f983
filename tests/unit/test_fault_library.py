"""The fault library: every agreed id, argument schemas, and effects as object changes."""

from __future__ import annotations

import json

import pytest

from itbench.core.faults import Mechanism, all_faults, fault_arg_errors, get_fault
from itbench.core.shop import FLAG_BY_KEY, FLAGD_CONFIGMAP, FLAGD_DEPLOYMENT
from itbench.environments.sim.registry import image_platforms
from itbench.stack import chart_objects

FLAGD = {
    "flagd.ad-failure": "adFailure",
    "flagd.ad-high-cpu": "adHighCpu",
    "flagd.ad-manual-gc": "adManualGc",
    "flagd.cart-failure": "cartFailure",
    "flagd.product-catalog-failure": "productCatalogFailure",
    "flagd.recommendation-cache-failure": "recommendationCacheFailure",
    "flagd.payment-failure": "paymentFailure",
    "flagd.payment-unreachable": "paymentUnreachable",
    "flagd.kafka-queue-problems": "kafkaQueueProblems",
    "flagd.email-memory-leak": "emailMemoryLeak",
    "flagd.load-generator-flood": "loadGeneratorFloodHomepage",
}

SAMPLE_ARGS: dict[str, dict[str, object]] = {
    "kubernetes.nonexistent-image": {"workload": "checkout"},
    "kubernetes.wrong-arch-image": {"workload": "cart"},
    "kubernetes.memory-limit": {"workload": "ad"},
    "kubernetes.cpu-limit": {"workload": "ad"},
    "kubernetes.block-ingress": {"workload": "cart", "port": 8080},
    "kubernetes.scale-to-zero": {"workload": "cart"},
    "kubernetes.service-selector": {"service": "cart"},
    "kubernetes.service-target-port": {"service": "cart", "port": 9999},
    "kubernetes.env-dependency-address": {
        "workload": "checkout",
        "variable": "CART_ADDR",
        "value": "cart:1",
    },
    "kubernetes.bad-readiness-probe": {"workload": "cart"},
    "kubernetes.nonexistent-node": {"workload": "cart"},
    "kubernetes.valkey-password": {},
    "kubernetes.hpa-misconfiguration": {"workload": "frontend", "cpuUtilization": 5},
    "kubernetes.deleted-service": {"service": "product-catalog"},
    "kubernetes.dns-policy": {"workload": "frontend"},
    "kubernetes.invalid-command": {"workload": "product-catalog"},
    "kubernetes.hanging-init-container": {"workload": "email"},
    "kubernetes.crashing-init-container": {"workload": "recommendation"},
    "kubernetes.resource-quota": {"workload": "ad"},
    "kubernetes.cordoned-node": {"workload": "payment"},
    "kubernetes.priority-preemption": {"workload": "kafka"},
    "kubernetes.anti-affinity": {"workload": "payment"},
    "kubernetes.secret-credentials": {"workload": "product-reviews"},
    "kubernetes.missing-volume-claim": {"workload": "postgresql"},
    "chaos.network-delay": {"workload": "cart", "latencyMs": 500},
    "chaos.network-loss": {"workload": "checkout", "target": "payment"},
    "chaos.http-patch": {"workload": "email", "method": "POST"},
    "chaos.jvm-heap-stress": {"workload": "ad"},
    "chaos.network-partition": {"workload": "checkout", "target": "payment"},
    "chaos.pod-failure": {"workload": "cart"},
    "chaos.cpu-stress": {"workload": "cart", "workers": 2, "load": 80},
    "chaos.memory-stress": {"workload": "cart", "size": "256MB"},
    "chaos.http-abort": {"workload": "email", "port": 8080},
    "chaos.http-tamper": {"workload": "email", "port": 8080, "path": "/send_order_confirmation"},
    "chaos.jvm-return": {"workload": "ad", "class": "oteldemo.AdService", "method": "getInstance"},
}
CLUSTER_SCOPED = {"Node", "PriorityClass"}


CISO = {"ciso.setting", "ciso.policy-set", "ciso.background"}
"""The CISO faults (tested in tests/unit/ciso)."""


def test_every_agreed_fault_id_is_registered() -> None:
    ids = {f.id for f in all_faults()}
    assert set(FLAGD) | set(SAMPLE_ARGS) | CISO <= ids
    assert len(ids) == len(FLAGD) + len(SAMPLE_ARGS) + len(CISO)


def _variants(flag: str) -> dict[str, object]:
    cm = next(o for o in chart_objects() if o["metadata"]["name"] == FLAGD_CONFIGMAP)
    variants: dict[str, object] = json.loads(cm["data"]["demo.flagd.json"])["flags"][flag][
        "variants"
    ]
    return variants


@pytest.mark.parametrize(("fault_id", "flag"), sorted(FLAGD.items()))
def test_flag_faults_set_a_flag_the_chart_defines_then_roll_flagd(fault_id: str, flag: str) -> None:
    fault = get_fault(fault_id)
    change, rollout = fault.changes({}, "otel-demo")
    assert fault.mechanism == Mechanism.FLAGD
    assert (change.op, change.kind, change.name, change.flag) == (
        "set-flag",
        "ConfigMap",
        FLAGD_CONFIGMAP,
        flag,
    )
    assert change.variant in _variants(flag)
    assert change.variant != "off"
    assert flag in FLAG_BY_KEY and FLAG_BY_KEY[flag].effect != "none"
    # flagd reads a copy made at pod start: the fault rolls it to take effect.
    assert (rollout.op, rollout.kind, rollout.name) == ("rollout", "Deployment", FLAGD_DEPLOYMENT)


@pytest.mark.parametrize("fault_id", sorted(SAMPLE_ARGS))
def test_object_faults_produce_namespaced_changes(fault_id: str) -> None:
    fault = get_fault(fault_id)
    changes = fault.changes(SAMPLE_ARGS[fault_id], "shop")
    assert changes
    for change in changes:
        assert change.namespace == (None if change.kind in CLUSTER_SCOPED else "shop")
        if change.op == "create":
            assert change.body["metadata"]["name"] == change.name
            assert change.body["kind"] == change.kind
        if fault.mechanism == Mechanism.CHAOS_MESH:
            assert change.api_version == "chaos-mesh.org/v1alpha1"
            assert change.body["spec"]["selector"]["namespaces"] == ["shop"]
    json.dumps([c.model_dump() for c in changes])


def test_payment_failure_maps_percent_to_the_chart_variant() -> None:
    change, _ = get_fault("flagd.payment-failure").changes({"percent": 25}, "otel-demo")
    assert change.variant == "25%"
    errors = fault_arg_errors("flagd.payment-failure", {"percent": 33})
    assert errors and errors[0][0] == "args.percent"


def test_block_ingress_allows_every_port_but_the_blocked_one() -> None:
    (change,) = get_fault("kubernetes.block-ingress").changes(
        {"workload": "cart", "port": 8080}, "otel-demo"
    )
    ports = change.body["spec"]["ingress"][0]["ports"]
    assert ports == [
        {"protocol": "TCP", "port": 1, "endPort": 8079},
        {"protocol": "TCP", "port": 8081, "endPort": 65535},
    ]


def test_wrong_arch_default_image_is_published_for_the_other_architecture_only() -> None:
    (change,) = get_fault("kubernetes.wrong-arch-image").changes({"workload": "cart"}, "x")
    image = change.body["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image_platforms(image) == frozenset({"arm64"})
    assert image_platforms("ghcr.io/open-telemetry/demo:2.2.0-cart") == frozenset(
        {"amd64", "arm64"}
    )
    # The demo publishes no single-architecture tags (review point 8).
    assert image_platforms("ghcr.io/open-telemetry/demo:2.2.0-cart-arm64") is None


def test_unknown_arguments_and_ids_are_reported_with_paths() -> None:
    assert fault_arg_errors("kubernetes.scale-to-zero", {"workload": "a", "extra": 1}) == [
        ("args.extra", "Extra inputs are not permitted")
    ]
    ((path, reason),) = fault_arg_errors("flagd.cart-failur", {})
    assert path == "id" and "flagd.cart-failure" in reason
