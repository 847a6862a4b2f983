"""Every fault of the library manifests in the twin as the alert an SRE would see, and removing
the injection brings the shop back to a quiet baseline."""

from __future__ import annotations

import pytest
from waiting import inject, wait_for_alert, wait_until_clear

from itbench.core.faults import all_faults
from itbench.environments.sim import SimEnvironment

CASES: list[tuple[str, dict[str, object], str, dict[str, str]]] = [
    ("flagd.ad-failure", {}, "RequestErrorRate", {"service_name": "ad"}),
    ("flagd.ad-high-cpu", {}, "CPUThrottlingHigh", {"deployment": "ad"}),
    ("flagd.ad-manual-gc", {}, "RequestLatencyHigh", {"service_name": "ad"}),
    ("flagd.cart-failure", {}, "RequestErrorRate", {"service_name": "cart"}),
    ("flagd.product-catalog-failure", {}, "RequestErrorRate", {"service_name": "product-catalog"}),
    (
        "flagd.recommendation-cache-failure",
        {},
        "RequestLatencyHigh",
        {"service_name": "recommendation"},
    ),
    ("flagd.payment-failure", {"percent": 50}, "RequestErrorRate", {"service_name": "payment"}),
    ("flagd.payment-unreachable", {}, "RequestErrorRate", {"service_name": "checkout"}),
    ("flagd.kafka-queue-problems", {}, "KafkaConsumerLag", {"consumer_group": "fraud-detection"}),
    ("flagd.email-memory-leak", {}, "ContainerOOMKilled", {"deployment": "email"}),
    ("flagd.load-generator-flood", {}, "HPAMaxedOut", {"horizontalpodautoscaler": "frontend"}),
    (
        "kubernetes.nonexistent-image",
        {"workload": "checkout"},
        "PodNotReady",
        {"deployment": "checkout"},
    ),
    (
        "kubernetes.wrong-arch-image",
        {"workload": "cart"},
        "PodCrashLooping",
        {"deployment": "cart"},
    ),
    ("kubernetes.memory-limit", {"workload": "ad"}, "ContainerOOMKilled", {"deployment": "ad"}),
    (
        "kubernetes.cpu-limit",
        {"workload": "frontend"},
        "CPUThrottlingHigh",
        {"deployment": "frontend"},
    ),
    (
        "kubernetes.block-ingress",
        {"workload": "product-catalog", "port": 8080},
        "RequestErrorRate",
        {"service_name": "frontend"},
    ),
    (
        "kubernetes.scale-to-zero",
        {"workload": "payment"},
        "NoRequests",
        {"service_name": "payment"},
    ),
    ("kubernetes.service-selector", {"service": "cart"}, "NoRequests", {"service_name": "cart"}),
    (
        "kubernetes.service-target-port",
        {"service": "currency", "port": 9999},
        "RequestErrorRate",
        {"service_name": "frontend"},
    ),
    (
        "kubernetes.env-dependency-address",
        {"workload": "checkout", "variable": "CART_ADDR", "value": "cart:9999"},
        "RequestErrorRate",
        {"service_name": "checkout"},
    ),
    (
        "kubernetes.bad-readiness-probe",
        {"workload": "shipping"},
        "PodNotReady",
        {"deployment": "shipping"},
    ),
    ("kubernetes.nonexistent-node", {"workload": "quote"}, "PodNotReady", {"deployment": "quote"}),
    ("kubernetes.valkey-password", {}, "RequestErrorRate", {"service_name": "cart"}),
    (
        "kubernetes.hpa-misconfiguration",
        {"workload": "frontend"},
        "HPAMaxedOut",
        {"horizontalpodautoscaler": "frontend"},
    ),
    (
        "kubernetes.deleted-service",
        {"service": "product-catalog"},
        "RequestErrorRate",
        {"service_name": "frontend"},
    ),
    (
        "kubernetes.dns-policy",
        {"workload": "frontend"},
        "RequestErrorRate",
        {"service_name": "frontend"},
    ),
    (
        "kubernetes.invalid-command",
        {"workload": "product-catalog"},
        "PodCrashLooping",
        {"deployment": "product-catalog"},
    ),
    (
        "kubernetes.hanging-init-container",
        {"workload": "email"},
        "PodNotReady",
        {"deployment": "email"},
    ),
    (
        "kubernetes.crashing-init-container",
        {"workload": "recommendation"},
        "PodNotReady",
        {"deployment": "recommendation"},
    ),
    ("kubernetes.resource-quota", {"workload": "ad"}, "PodNotReady", {"deployment": "ad"}),
    ("kubernetes.cordoned-node", {"workload": "payment"}, "PodNotReady", {"deployment": "payment"}),
    (
        "kubernetes.priority-preemption",
        {"workload": "kafka"},
        "PodNotReady",
        {"deployment": "kafka"},
    ),
    ("kubernetes.anti-affinity", {"workload": "payment"}, "PodNotReady", {"deployment": "payment"}),
    (
        "kubernetes.secret-credentials",
        {"workload": "product-reviews"},
        "RequestErrorRate",
        {"service_name": "product-reviews"},
    ),
    (
        "kubernetes.missing-volume-claim",
        {"workload": "postgresql"},
        "PodNotReady",
        {"deployment": "postgresql"},
    ),
    (
        "chaos.network-delay",
        {"workload": "product-catalog", "latencyMs": 2000},
        "RequestLatencyHigh",
        {"service_name": "frontend"},
    ),
    (
        "chaos.network-partition",
        {"workload": "checkout", "target": "payment"},
        "RequestErrorRate",
        {"service_name": "checkout"},
    ),
    (
        "chaos.network-loss",
        {"workload": "checkout", "target": "payment"},
        "RequestErrorRate",
        {"service_name": "checkout"},
    ),
    (
        "chaos.pod-failure",
        {"workload": "currency"},
        "RequestErrorRate",
        {"service_name": "frontend"},
    ),
    (
        "chaos.cpu-stress",
        {"workload": "recommendation"},
        "CPUThrottlingHigh",
        {"deployment": "recommendation"},
    ),
    ("chaos.memory-stress", {"workload": "cart"}, "ContainerOOMKilled", {"deployment": "cart"}),
    ("chaos.http-abort", {"workload": "quote"}, "RequestErrorRate", {"service_name": "shipping"}),
    (
        "chaos.http-tamper",
        {"workload": "shipping"},
        "RequestErrorRate",
        {"service_name": "checkout"},
    ),
    (
        "chaos.http-patch",
        {"workload": "email", "method": "POST"},
        "RequestErrorRate",
        {"service_name": "email"},
    ),
    ("chaos.jvm-return", {"workload": "ad"}, "RequestErrorRate", {"service_name": "ad"}),
    ("chaos.jvm-heap-stress", {"workload": "ad"}, "RequestErrorRate", {"service_name": "ad"}),
]


def test_every_fault_of_the_library_has_a_case() -> None:
    from itbench.core.ciso.faults import BACKGROUND_FAULT, POLICY_SET_FAULT, SETTING_FAULT

    # The CISO faults change the compliance twin's objects and fire no alert (tests/unit/ciso).
    shop = {f.id for f in all_faults()} - {SETTING_FAULT, POLICY_SET_FAULT, BACKGROUND_FAULT}
    assert {c[0] for c in CASES} == shop


@pytest.mark.parametrize(
    ("fault_id", "args", "alertname", "labels"), CASES, ids=[c[0] for c in CASES]
)
def test_fault_fires_its_alert_and_removal_restores_quiet(
    env: SimEnvironment,
    fault_id: str,
    args: dict[str, object],
    alertname: str,
    labels: dict[str, str],
) -> None:
    inject(env, fault_id, key="f", **args)
    assert wait_for_alert(env, alertname, labels, 900) is not None
    assert env.remove("f")
    assert wait_until_clear(env, 1200) is not None
    snap = env.snapshot()
    assert all(w.ready_replicas == w.desired_replicas for w in snap.workloads)
