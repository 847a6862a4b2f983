"""The shop as data: components, call graph, load, images, flags, baseline objects and cost."""

from __future__ import annotations

import json

from itbench.core.shop import (
    FLAGS,
    OPERATIONS,
    SERVICE_BY_NAME,
    SERVICES,
    default_flagd_config_text,
    image_platforms,
    image_program,
    proxy_request_rates,
    request_cost_per_hour,
    service_calls,
)
from itbench.environments.sim import SimEnvironment

CHART_COMPONENTS = {
    "frontend", "frontend-proxy", "cart", "checkout", "currency", "email", "payment",
    "product-catalog", "quote", "recommendation", "shipping", "ad", "accounting",
    "fraud-detection", "image-provider", "load-generator", "kafka", "valkey-cart", "flagd",
}  # fmt: skip


def test_components_match_the_chart() -> None:
    assert {s.name for s in SERVICES} == CHART_COMPONENTS
    assert SERVICE_BY_NAME["ad"].language == "Java"
    assert SERVICE_BY_NAME["cart"].language == ".NET"
    assert SERVICE_BY_NAME["checkout"].language == "Go"
    assert SERVICE_BY_NAME["image-provider"].port == 8081
    assert SERVICE_BY_NAME["accounting"].port is None


def test_every_call_targets_a_known_operation() -> None:
    known = {(o.service, o.name) for o in OPERATIONS}
    for op in OPERATIONS:
        for call in op.calls:
            assert (call.service, call.operation) in known, (op.name, call)
            env = dict(SERVICE_BY_NAME[op.service].env)
            assert call.address_env in env, (op.service, call.address_env)


def test_call_graph_has_the_order_path_and_kafka_consumers() -> None:
    edges = set(service_calls())
    assert {
        ("frontend", "checkout"),
        ("checkout", "payment"),
        ("checkout", "cart"),
        ("cart", "valkey-cart"),
        ("shipping", "quote"),
        ("recommendation", "product-catalog"),
        ("kafka", "accounting"),
        ("kafka", "fraud-detection"),
        ("load-generator", "frontend-proxy"),
    } <= edges


def test_load_generator_mix_and_flood() -> None:
    base = proxy_request_rates(0)
    flood = proxy_request_rates(100)
    assert 3 < sum(base.values()) < 6
    assert base["GET /api/products/{productId}"] > base["POST /api/checkout"] > 0
    assert flood["GET /"] > 50 * base["GET /"]


def test_images_programs_and_flags() -> None:
    assert image_program("ghcr.io/open-telemetry/demo:2.0.2-cart") == "cart"
    assert image_program("ghcr.io/open-telemetry/demo:2.0.2-cart-arm64") == "cart"
    assert image_platforms("ghcr.io/open-telemetry/demo:9.9.9-cart") is None
    doc = json.loads(default_flagd_config_text())
    assert {f.key for f in FLAGS} == set(doc["flags"])
    assert {f["defaultVariant"] for f in doc["flags"].values()} == {"off"}


def test_baseline_cost_is_below_the_budget() -> None:
    env = SimEnvironment(seed=0)
    env.provision()
    snap = env.snapshot()
    assert snap.cpu_requests_cores == sum(s.cpu_request_m for s in SERVICES) / 1000
    assert snap.cost_per_hour == round(
        request_cost_per_hour(snap.cpu_requests_cores, snap.memory_requests_bytes), 6
    )
    budget = env.get_objects("ConfigMap", "cost-alert-config")[0]["data"]["budgetPerHour"]
    assert snap.cost_per_hour < float(budget)
    assert all(w.ready_replicas == w.desired_replicas == 1 for w in snap.workloads)
