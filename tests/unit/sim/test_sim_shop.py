"""The shop as data: programs, call graph, load, images, flags and cost, consistent with each other
and with the objects the twin runs (the comparison with upstream is tests/unit/test_fidelity.py)."""

from __future__ import annotations

from itbench.core.shop import (
    DEFAULT_COST_BUDGET_PER_HOUR,
    FLAGS,
    KAFKA_CONSUMERS,
    OPERATIONS,
    SERVICE_BY_NAME,
    flag_variants,
    proxy_request_rates,
    request_cost_per_hour,
    service_calls,
)
from itbench.environments.sim import SimEnvironment
from itbench.environments.sim.objects import baseline_objects, main_container
from itbench.environments.sim.registry import image_platforms, image_program


def _containers() -> dict[str, dict[str, object]]:
    out: dict[str, dict[str, object]] = {}
    for obj in baseline_objects("otel-demo"):
        if obj["kind"] == "Deployment":
            for container in obj["spec"]["template"]["spec"]["containers"]:
                out[container["name"]] = container
    return out


def test_every_container_of_the_chart_runs_a_known_program() -> None:
    containers = _containers()
    assert set(containers) == set(SERVICE_BY_NAME)
    assert SERVICE_BY_NAME["ad"].jvm and SERVICE_BY_NAME["fraud-detection"].jvm
    assert SERVICE_BY_NAME["flagd-ui"].deployment == "flagd"
    assert SERVICE_BY_NAME["accounting"].port is None


def test_every_call_targets_a_known_operation_through_an_address_the_caller_has() -> None:
    known = {(o.service, o.name) for o in OPERATIONS}
    containers = _containers()
    for op in OPERATIONS:
        env = {e["name"] for e in containers[op.service].get("env") or []}  # type: ignore[union-attr]
        for call in op.calls:
            assert (call.service, call.operation) in known, (op.name, call)
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
        ("product-catalog", "postgresql"),
        ("product-reviews", "llm"),
        ("kafka", "accounting"),
        ("kafka", "fraud-detection"),
        ("load-generator", "frontend-proxy"),
    } <= edges
    assert {k.service for k in KAFKA_CONSUMERS} == {"accounting", "fraud-detection"}


def test_load_generator_mix_and_flood() -> None:
    base = proxy_request_rates(0)
    flood = proxy_request_rates(100)
    assert 1 < sum(base.values()) < 4
    assert base["GET /api/products/{productId}"] > base["POST /api/checkout"] > 0
    assert flood["GET /"] > 50 * base["GET /"]


def test_images_of_the_chart_run_their_programs_on_both_architectures() -> None:
    for name, container in _containers().items():
        image = str(container["image"])
        assert image_program(image) == name
        assert image_platforms(image) == {"amd64", "arm64"}
    assert image_platforms("ghcr.io/open-telemetry/demo:9.9.9-cart") is None
    assert image_platforms("quay.io/it-bench/hello-bench-arm64:2.0.0") == {"arm64"}


def test_the_flagd_configmap_holds_every_flag_off() -> None:
    cm = next(
        o
        for o in baseline_objects("otel-demo")
        if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "flagd-config"
    )
    variants = flag_variants(cm["data"]["demo.flagd.json"])
    assert set(variants) == {f.key for f in FLAGS}


def test_baseline_cost_is_below_the_budget() -> None:
    env = SimEnvironment(seed=0)
    env.provision()
    snap = env.snapshot()
    assert snap.cost_per_hour == round(
        request_cost_per_hour(snap.cpu_requests_cores, snap.memory_requests_bytes), 6
    )
    assert snap.cost_per_hour < DEFAULT_COST_BUDGET_PER_HOUR
    assert all(w.ready_replicas == w.desired_replicas for w in snap.workloads)


def test_main_container_is_the_first() -> None:
    flagd = next(
        o
        for o in baseline_objects("otel-demo")
        if o["kind"] == "Deployment" and o["metadata"]["name"] == "flagd"
    )
    assert main_container(flagd["spec"]["template"]["spec"])["name"] == "flagd"


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def test_twins_share_the_strings_of_their_baseline_objects_not_the_objects() -> None:
    first = SimEnvironment(seed=1)
    second = SimEnvironment(seed=2)
    first.provision()
    second.provision()
    a = first.cluster.get("Deployment", "cart")
    b = second.cluster.get("Deployment", "cart")
    assert a is not None and b is not None
    # One string object per distinct string across twins (keys, labels, images) ...
    shared = {id(s) for s in _strings(a["spec"]["template"])}
    assert shared == {id(s) for s in _strings(b["spec"]["template"])}
    assert len(shared) < len(_strings(a["spec"]["template"]))
    # ... in objects that are each twin's own: a change to one is not seen by the other.
    a["spec"]["template"]["metadata"]["labels"]["changed"] = "yes"
    a["spec"]["template"]["spec"]["containers"][0]["image"] = "other:1"
    assert "changed" not in b["spec"]["template"]["metadata"]["labels"]
    assert b["spec"]["template"]["spec"]["containers"][0]["image"] != "other:1"
