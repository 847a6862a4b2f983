"""Physics of the twin: each fault mechanism produces its symptom from object state, and the
generic remedy (changing the objects back) removes it through the same rules."""

from __future__ import annotations

from typing import Any

import pytest
from waiting import firing, inject, wait_for_alert, wait_until_clear

from itbench.core.models.observations import ActionVerb, AgentAction
from itbench.environments.sim import SimEnvironment
from itbench.environments.sim.cluster import _effective, _pod_amount, _quantity
from itbench.environments.sim.objects import template_hash


def act(twin: SimEnvironment, verb: ActionVerb, kind: str, name: str, **kw: Any) -> None:
    result = twin.act(AgentAction(verb=verb, kind=kind, name=name, **kw))
    assert result.ok, result.message


def pods_of(env: SimEnvironment, workload: str) -> list[dict[str, Any]]:
    return [
        p
        for p in env.get_objects("Pod")
        if p["metadata"]["labels"].get("opentelemetry.io/name") == workload
    ]


def waiting_reasons(env: SimEnvironment, workload: str) -> set[str]:
    out = set()
    for p in pods_of(env, workload):
        for cs in p["status"].get("containerStatuses", []):
            if "waiting" in cs["state"]:
                out.add(cs["state"]["waiting"]["reason"])
    return out


def test_nonexistent_image_backs_off_and_rollout_undo_restores(env: SimEnvironment) -> None:
    inject(env, "kubernetes.nonexistent-image", workload="checkout")
    assert wait_for_alert(env, "PodNotReady", {"deployment": "checkout"}, 300) is not None
    assert "ImagePullBackOff" in waiting_reasons(env, "checkout")
    # Rolling update keeps the old pod serving: checkout still works.
    assert env.snapshot().workload("checkout").ready_replicas == 1  # type: ignore[union-attr]
    act(env, ActionVerb.ROLLOUT_UNDO, "deployment", "checkout")
    assert wait_until_clear(env, 300) is not None
    assert waiting_reasons(env, "checkout") == set()
    assert len(pods_of(env, "checkout")) == 1


def test_wrong_architecture_image_crash_loops_until_image_is_fixed(env: SimEnvironment) -> None:
    good = env.get_objects("Deployment", "cart")[0]["spec"]["template"]["spec"]["containers"][0]
    inject(env, "kubernetes.wrong-arch-image", workload="cart")
    assert wait_for_alert(env, "PodCrashLooping", {"deployment": "cart"}, 300) is not None
    new = [
        p
        for p in pods_of(env, "cart")
        if p["spec"]["containers"][0]["image"].endswith("arm64:2.0.0")
    ]
    last = new[0]["status"]["containerStatuses"][0]["lastState"]["terminated"]
    assert last["reason"] == "Error"
    assert any("exec format error" in line for line in env.pod_logs(new[0]["metadata"]["name"], 50))
    act(env, ActionVerb.SET_IMAGE, "deployment", "cart", image=good["image"])
    assert wait_until_clear(env, 600) is not None


def test_memory_limit_below_working_set_is_oom_killed_until_raised(env: SimEnvironment) -> None:
    inject(env, "kubernetes.memory-limit", workload="ad", memory="16Mi")
    assert wait_for_alert(env, "ContainerOOMKilled", {"deployment": "ad"}, 120) is not None
    assert wait_for_alert(env, "PodCrashLooping", {"deployment": "ad"}, 300) is not None
    crashing = [
        p
        for p in pods_of(env, "ad")
        if p["spec"]["containers"][0]["resources"]["limits"]["memory"] == "16Mi"
    ]
    status = crashing[0]["status"]["containerStatuses"][0]
    assert status["lastState"]["terminated"]["reason"] == "OOMKilled"
    assert status["restartCount"] >= 2
    act(
        env,
        ActionVerb.SET_RESOURCES,
        "deployment",
        "ad",
        limits={"memory": "300Mi"},
        requests={"memory": "300Mi"},
    )
    assert wait_until_clear(env, 900) is not None


def test_network_policy_blocking_the_port_fails_callers(env: SimEnvironment) -> None:
    inject(env, "kubernetes.block-ingress", workload="product-catalog", port=8080)
    assert wait_for_alert(env, "RequestErrorRate", {"service_name": "frontend"}, 300) is not None
    snap = env.snapshot()
    assert snap.workload("product-catalog").ready_replicas == 1  # type: ignore[union-attr]
    assert snap.workload("frontend").error_ratio > 0.3  # type: ignore[union-attr]
    act(env, ActionVerb.DELETE, "networkpolicy", "product-catalog-ingress")
    assert wait_until_clear(env, 600) is not None
    assert env.snapshot().workload("frontend").error_ratio == 0  # type: ignore[union-attr]


def test_network_policy_on_another_port_changes_nothing(env: SimEnvironment) -> None:
    inject(env, "kubernetes.block-ingress", workload="product-catalog", port=9999)
    env.advance(300)
    assert env.alerts() == []
    assert env.snapshot().workload("frontend").error_ratio == 0  # type: ignore[union-attr]


def test_wrong_service_selector_empties_endpoints(env: SimEnvironment) -> None:
    inject(env, "kubernetes.service-selector", service="cart", value="wrong")
    env.advance(15)
    assert env.get_objects("Endpoints", "cart")[0]["subsets"] == []
    assert wait_for_alert(env, "NoRequests", {"service_name": "cart"}, 300) is not None
    assert firing(env, "RequestErrorRate", {"service_name": "checkout"})
    act(
        env,
        ActionVerb.PATCH,
        "service",
        "cart",
        patch={"spec": {"selector": {"opentelemetry.io/name": "cart"}}},
    )
    env.advance(15)
    assert env.get_objects("Endpoints", "cart")[0]["subsets"][0]["addresses"]
    assert wait_until_clear(env, 600) is not None


def test_wrong_target_port_keeps_endpoints_but_refuses_calls(env: SimEnvironment) -> None:
    inject(env, "kubernetes.service-target-port", service="currency", port=9999)
    env.advance(15)
    subset = env.get_objects("Endpoints", "currency")[0]["subsets"][0]
    assert subset["ports"][0]["port"] == 9999
    assert subset["addresses"]
    assert wait_for_alert(env, "RequestErrorRate", {"service_name": "frontend"}, 300) is not None
    # Service ports merge by `port`, as kube-apiserver merges them: a patch naming the port
    # only by name is refused.
    refused = env.act(
        AgentAction(
            verb=ActionVerb.PATCH,
            kind="service",
            name="currency",
            patch={"spec": {"ports": [{"name": "tcp-service", "targetPort": 8080}]}},
        )
    )
    assert not refused.ok
    assert "does not contain declared merge key: port" in refused.message
    act(
        env,
        ActionVerb.PATCH,
        "service",
        "currency",
        patch={"spec": {"ports": [{"port": 8080, "targetPort": 8080}]}},
    )
    assert wait_until_clear(env, 600) is not None


def test_missing_node_leaves_the_new_pod_pending(env: SimEnvironment) -> None:
    inject(env, "kubernetes.nonexistent-node", workload="quote")
    assert wait_for_alert(env, "PodNotReady", {"deployment": "quote"}, 300) is not None
    phases = sorted(p["status"]["phase"] for p in pods_of(env, "quote"))
    assert phases == ["Pending", "Running"]
    assert any(e["reason"] == "FailedScheduling" for e in env.events())
    act(env, ActionVerb.ROLLOUT_UNDO, "deployment", "quote")
    assert wait_until_clear(env, 300) is not None
    assert [p["status"]["phase"] for p in pods_of(env, "quote")] == ["Running"]


def test_readiness_probe_on_a_closed_port_keeps_pods_unready(env: SimEnvironment) -> None:
    inject(env, "kubernetes.bad-readiness-probe", workload="shipping", port=9999)
    assert wait_for_alert(env, "PodNotReady", {"deployment": "shipping"}, 300) is not None
    assert any(e["reason"] == "Unhealthy" for e in env.events())
    act(
        env,
        ActionVerb.PATCH,
        "deployment",
        "shipping",
        patch={
            "spec": {
                "template": {
                    "spec": {
                        "containers": [
                            {"name": "shipping", "readinessProbe": {"tcpSocket": {"port": 8080}}}
                        ]
                    }
                }
            }
        },
    )
    assert wait_until_clear(env, 300) is not None


def test_scaled_to_zero_serves_nothing_until_scaled_back(env: SimEnvironment) -> None:
    inject(env, "kubernetes.scale-to-zero", workload="payment")
    assert wait_for_alert(env, "NoRequests", {"service_name": "payment"}, 300) is not None
    assert firing(env, "RequestErrorRate", {"service_name": "checkout"})
    act(env, ActionVerb.SCALE, "deployment", "payment", replicas=1)
    assert wait_until_clear(env, 600) is not None


def _flag_patch(flag: str, variant: str, env: SimEnvironment) -> dict[str, Any]:
    import json

    cm = env.get_objects("ConfigMap", "flagd-config")[0]
    doc = json.loads(cm["data"]["demo.flagd.json"])
    doc["flags"][flag]["defaultVariant"] = variant
    return {"data": {"demo.flagd.json": json.dumps(doc, indent=2) + "\n"}}


def test_a_flagd_config_edit_takes_effect_only_when_flagd_rolls_out(env: SimEnvironment) -> None:
    inject(env, "flagd.payment-failure", percent=100)
    assert wait_for_alert(env, "RequestErrorRate", {"service_name": "payment"}, 300) is not None
    assert env.snapshot().flags["paymentFailure"] == "100%"
    act(
        env,
        ActionVerb.PATCH,
        "configmap",
        "flagd-config",
        patch=_flag_patch("paymentFailure", "off", env),
    )
    # flagd serves the copy its init container made at pod start: nothing changes yet.
    env.advance(300)
    assert env.snapshot().flags["paymentFailure"] == "100%"
    assert firing(env, "RequestErrorRate", {"service_name": "payment"})
    act(env, ActionVerb.ROLLOUT_RESTART, "deployment", "flagd")
    assert wait_until_clear(env, 600) is not None
    assert env.snapshot().flags["paymentFailure"] == "off"


def test_set_flag_edits_the_configmap_and_rolls_flagd_so_the_fix_lasts(
    env: SimEnvironment,
) -> None:
    inject(env, "flagd.payment-failure", percent=100)
    assert wait_for_alert(env, "RequestErrorRate", {"service_name": "payment"}, 300) is not None
    act(env, ActionVerb.SET_FLAG, "configmap", "flagd-config", flag="paymentFailure", variant="off")
    cm = env.get_objects("ConfigMap", "flagd-config")[0]
    assert '"defaultVariant": "off"' in cm["data"]["demo.flagd.json"].split('"paymentFailure"')[1]
    assert wait_until_clear(env, 600) is not None
    assert env.snapshot().flags["paymentFailure"] == "off"
    # The ConfigMap holds the fix: another restart of flagd keeps it.
    act(env, ActionVerb.ROLLOUT_RESTART, "deployment", "flagd")
    env.advance(300)
    assert not firing(env, "RequestErrorRate", {"service_name": "payment"})
    assert env.snapshot().flags["paymentFailure"] == "off"


def test_flags_fall_back_to_defaults_while_flagd_is_down(env: SimEnvironment) -> None:
    inject(env, "flagd.cart-failure")
    inject(env, "kubernetes.scale-to-zero", key="flagd-down", workload="flagd")
    env.advance(300)
    assert not firing(env, "RequestErrorRate", {"service_name": "cart"})


def test_network_delay_raises_latency_until_the_chaos_object_is_removed(
    env: SimEnvironment,
) -> None:
    inject(env, "chaos.network-delay", workload="product-catalog", latencyMs=2000)
    assert wait_for_alert(env, "RequestLatencyHigh", {"service_name": "frontend"}, 300) is not None
    assert env.remove("fault")
    assert wait_until_clear(env, 600) is not None


def test_network_partition_cuts_only_the_targeted_pair(env: SimEnvironment) -> None:
    inject(env, "chaos.network-partition", workload="checkout", target="payment")
    assert wait_for_alert(env, "NoRequests", {"service_name": "payment"}, 300) is not None
    assert not firing(env, "RequestErrorRate", {"service_name": "cart"})
    assert env.remove("fault")
    assert wait_until_clear(env, 600) is not None


def test_pod_failure_chaos_runs_pause_and_leaves_the_pods_ready(env: SimEnvironment) -> None:
    inject(env, "chaos.pod-failure", workload="currency")
    # Chaos Mesh swaps the images for pause; with no readiness probe the pods stay Ready and
    # the callers' requests fail.
    assert wait_for_alert(env, "RequestErrorRate", {"service_name": "frontend"}, 300) is not None
    assert not firing(env, "PodNotReady", {"deployment": "currency"})
    (pod,) = pods_of(env, "currency")
    status = pod["status"]["containerStatuses"][0]
    assert pod["spec"]["containers"][0]["image"] == "gcr.io/google-containers/pause:latest"
    assert status["ready"] and status["restartCount"] == 1
    assert (
        "chaos-mesh-currency-pod-failure-pod-failure-currency-normal-image"
        in str(pod["metadata"]["annotations"])
        or "currency-normal" in pod["metadata"]["annotations"]
    )
    # Chaos Mesh kinds are the platform's: removal, not the agent, deletes the experiment.
    assert env.remove("fault")
    assert wait_until_clear(env, 600) is not None
    (pod,) = pods_of(env, "currency")
    assert pod["spec"]["containers"][0]["image"].endswith("2.2.0-currency")


def test_jvm_chaos_only_affects_jvm_workloads(env: SimEnvironment) -> None:
    inject(env, "chaos.jvm-return", key="go", workload="checkout")
    env.advance(300)
    assert env.alerts() == []
    inject(env, "chaos.jvm-return", key="java", workload="ad")
    assert wait_for_alert(env, "RequestErrorRate", {"service_name": "ad"}, 300) is not None


def test_http_chaos_only_affects_http_servers(env: SimEnvironment) -> None:
    inject(env, "chaos.http-abort", key="grpc", workload="cart", port=8080)
    env.advance(300)
    assert env.alerts() == []
    inject(env, "chaos.http-tamper", key="http", workload="shipping", port=8080)
    assert wait_for_alert(env, "RequestErrorRate", {"service_name": "checkout"}, 300) is not None


def test_cpu_limit_throttles_and_raising_it_recovers(env: SimEnvironment) -> None:
    inject(env, "kubernetes.cpu-limit", workload="frontend", cpu="10m")
    assert wait_for_alert(env, "CPUThrottlingHigh", {"deployment": "frontend"}, 400) is not None
    act(
        env,
        ActionVerb.SET_RESOURCES,
        "deployment",
        "frontend",
        limits={"cpu": "500m"},
        requests={"cpu": "100m"},
    )
    assert wait_until_clear(env, 900) is not None


def test_valkey_password_breaks_the_cart_until_credentials_match(env: SimEnvironment) -> None:
    inject(env, "kubernetes.valkey-password", password="s3cret")
    assert wait_for_alert(env, "RequestErrorRate", {"service_name": "cart"}, 300) is not None
    act(
        env,
        ActionVerb.SET_ENV,
        "deployment",
        "cart",
        env={"VALKEY_ADDR": "valkey-cart:6379,password=s3cret"},
    )
    assert wait_until_clear(env, 600) is not None


def test_dependency_address_points_nowhere_until_restored(env: SimEnvironment) -> None:
    inject(
        env,
        "kubernetes.env-dependency-address",
        workload="checkout",
        variable="CART_ADDR",
        value="cart:9999",
    )
    assert wait_for_alert(env, "RequestErrorRate", {"service_name": "checkout"}, 300) is not None
    act(env, ActionVerb.SET_ENV, "deployment", "checkout", env={"CART_ADDR": "cart:8080"})
    assert wait_until_clear(env, 600) is not None


def test_hpa_with_a_tiny_target_scales_to_max_and_costs_more(env: SimEnvironment) -> None:
    before = env.snapshot().cost_per_hour
    inject(env, "kubernetes.hpa-misconfiguration", workload="frontend", maxReplicas=8)
    assert (
        wait_for_alert(env, "HPAMaxedOut", {"horizontalpodautoscaler": "frontend"}, 300) is not None
    )
    snap = env.snapshot()
    assert snap.workload("frontend").desired_replicas == 8  # type: ignore[union-attr]
    assert snap.cost_per_hour > before
    assert firing(env, "CostBudgetExceeded", {"namespace": "otel-demo"})
    act(
        env,
        ActionVerb.PATCH,
        "hpa",
        "frontend",
        patch={
            "spec": {
                "maxReplicas": 3,
                "metrics": [
                    {
                        "type": "Resource",
                        "resource": {
                            "name": "cpu",
                            "target": {"type": "Utilization", "averageUtilization": 80},
                        },
                    }
                ],
            }
        },
    )
    assert wait_until_clear(env, 900) is not None
    env.advance(600)  # the downscale stabilisation window lets replicas fall step by step
    assert env.snapshot().workload("frontend").desired_replicas == 1  # type: ignore[union-attr]


def test_remove_restores_the_objects_an_injection_touched(env: SimEnvironment) -> None:
    baseline = env.get_objects("Deployment", "checkout")[0]["spec"]["template"]
    inject(env, "kubernetes.nonexistent-image", key="k", workload="checkout")
    inject(env, "kubernetes.block-ingress", key="np", workload="cart", port=8080)
    assert env.remove("k") and env.remove("np")
    assert not env.remove("k")
    assert env.get_objects("Deployment", "checkout")[0]["spec"]["template"] == baseline
    assert env.get_objects("NetworkPolicy") == []
    assert wait_until_clear(env, 300) is not None
    assert env.injections() == ["k", "np"]


def test_autoscaler_does_not_undo_a_scale_to_zero(env: SimEnvironment) -> None:
    inject(env, "kubernetes.scale-to-zero", workload="frontend")
    env.advance(300)
    assert env.snapshot().workload("frontend").desired_replicas == 0  # type: ignore[union-attr]
    assert firing(env, "NoRequests", {"service_name": "frontend"})


def test_a_pod_template_hash_depends_on_the_template_not_on_key_order_or_earlier_hashes() -> None:
    template = {"metadata": {"labels": {"app": "cart"}}, "spec": {"containers": [{"name": "c"}]}}
    reordered = {"spec": {"containers": [{"name": "c"}]}, "metadata": {"labels": {"app": "cart"}}}
    changed = {"metadata": {"labels": {"app": "cart"}}, "spec": {"containers": [{"name": "d"}]}}
    first = template_hash(template)
    assert len(first) == 10
    assert template_hash(template) == template_hash(reordered) == first
    assert template_hash(changed) != first
    assert template_hash(template) == first


def _amount_by_effective(spec: dict[str, Any], section: str, resource: str) -> float:
    def one(c: dict[str, Any]) -> float:
        raw = (_effective(c).get(section) or {}).get(resource)
        return _quantity(raw, resource) if raw is not None else 0.0

    main = sum(one(c) for c in spec.get("containers") or [])
    init = max((one(c) for c in spec.get("initContainers") or []), default=0.0)
    return max(main, init)


@pytest.mark.parametrize(
    "spec",
    [
        {"containers": [{"resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]},
        {"containers": [{"resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]},
        {"containers": [{"resources": {"requests": {"cpu": None}, "limits": {"cpu": "2"}}}]},
        {"containers": [{}, {"resources": {"requests": {"cpu": "250m"}}}]},
        {
            "containers": [{"resources": {"requests": {"cpu": "100m", "memory": "10Mi"}}}],
            "initContainers": [
                {"resources": {"limits": {"cpu": "300m"}}},
                {"resources": {"requests": {"cpu": "200m", "memory": "2Gi"}}},
            ],
        },
        {"containers": [{"resources": {"requests": {"cpu": "bogus"}}}]},
    ],
)
def test_a_pods_amount_is_its_containers_sum_or_its_largest_init(spec: dict[str, Any]) -> None:
    # A request a container leaves out defaults to its limit, as the API server sets it.
    for section in ("requests", "limits", "other"):
        for resource in ("cpu", "memory"):
            assert repr(_pod_amount(spec, section, resource)) == repr(
                _amount_by_effective(spec, section, resource)
            )
