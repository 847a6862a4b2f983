"""act(): kubectl-like verbs with kubectl's messages, and errors for what kubectl would reject."""

from __future__ import annotations

import json
from typing import Any

import pytest

from itbench.core.models.observations import ActionVerb, AgentAction
from itbench.environments.sim import SimEnvironment


def do(twin: SimEnvironment, verb: ActionVerb, kind: str, name: str = "", **kw: Any) -> Any:
    return twin.act(AgentAction(verb=verb, kind=kind, name=name, **kw))


def container(env: SimEnvironment, name: str) -> dict[str, Any]:
    spec = env.get_objects("Deployment", name)[0]["spec"]["template"]["spec"]
    first: dict[str, Any] = spec["containers"][0]
    return first


def revisions(env: SimEnvironment, name: str) -> dict[str, str]:
    return {
        rs["metadata"]["name"]: rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
        for rs in env.get_objects("ReplicaSet")
        if rs["metadata"]["name"].startswith(f"{name}-")
        and rs["metadata"]["ownerReferences"][0]["name"] == name
    }


def test_patch_merges_containers_by_name(env: SimEnvironment) -> None:
    result = do(
        env,
        ActionVerb.PATCH,
        "deployments.apps",
        "cart",
        patch={"spec": {"template": {"spec": {"containers": [{"name": "cart", "image": "x:1"}]}}}},
    )
    assert (result.ok, result.outcome, result.message) == (
        True,
        "applied",
        "deployment.apps/cart patched",
    )
    c = container(env, "cart")
    assert c["image"] == "x:1"
    assert {"name": "VALKEY_ADDR", "value": "valkey-cart:6379"} in c["env"]


def test_patch_without_change_is_unchanged(env: SimEnvironment) -> None:
    result = do(env, ActionVerb.PATCH, "deploy", "cart", patch={"spec": {"replicas": 1}})
    assert (result.ok, result.outcome) == (True, "unchanged")


def test_a_patch_cannot_turn_an_object_into_another_kind(env: SimEnvironment) -> None:
    rules = env.get_objects("PrometheusRule")
    result = do(
        env,
        ActionVerb.PATCH,
        "ConfigMap",
        "flagd-config",
        patch={"kind": "PrometheusRule", "spec": {"groups": []}},
    )
    assert (result.ok, result.outcome) == (False, "error")
    assert "kind cannot be changed" in result.message
    assert env.get_objects("PrometheusRule") == rules
    assert env.get_objects("ConfigMap", "flagd-config")[0]["kind"] == "ConfigMap"


def test_unknown_objects_and_kinds_are_kubectl_errors(env: SimEnvironment) -> None:
    result = do(env, ActionVerb.SCALE, "deployment", "nope", replicas=1)
    assert (result.ok, result.outcome) == (False, "error")
    assert result.message == 'Error from server (NotFound): deployments.apps "nope" not found'
    result = do(env, ActionVerb.DELETE, "widget", "x")
    assert result.message == 'error: the server doesn\'t have a resource type "widget"'
    result = do(env, ActionVerb.SCALE, "deployment", "cart", replicas=1, namespace="other")
    assert result.message == 'Error from server (NotFound): namespaces "other" not found'


def test_set_image_and_unknown_container(env: SimEnvironment) -> None:
    ok = do(
        env,
        ActionVerb.SET_IMAGE,
        "deployment",
        "cart",
        image="ghcr.io/open-telemetry/demo:2.0.1-cart",
    )
    assert ok.message == "deployment.apps/cart image updated"
    assert container(env, "cart")["image"].endswith("2.0.1-cart")
    bad = do(env, ActionVerb.SET_IMAGE, "deployment", "cart", image="a:b", container="sidecar")
    assert bad.message == 'error: unable to find container named "sidecar"'


def test_set_resources_validates_quantities(env: SimEnvironment) -> None:
    ok = do(env, ActionVerb.SET_RESOURCES, "deployment", "ad", limits={"memory": "512Mi"})
    assert ok.message == "deployment.apps/ad resource requirements updated"
    assert container(env, "ad")["resources"]["limits"]["memory"] == "512Mi"
    bad = do(env, ActionVerb.SET_RESOURCES, "deployment", "ad", limits={"memory": "lots"})
    assert not bad.ok and "invalid quantity" in bad.message


def test_set_env_replaces_or_adds(env: SimEnvironment) -> None:
    result = do(
        env, ActionVerb.SET_ENV, "deployment", "checkout", env={"CART_ADDR": "cart:1", "X": "1"}
    )
    assert result.message == "deployment.apps/checkout env updated"
    env_list = container(env, "checkout")["env"]
    assert {"name": "CART_ADDR", "value": "cart:1"} in env_list
    assert {"name": "X", "value": "1"} in env_list
    assert sum(1 for e in env_list if e["name"] == "CART_ADDR") == 1


def test_scale_changes_replicas_and_pods_follow(env: SimEnvironment) -> None:
    assert do(env, ActionVerb.SCALE, "deployment", "quote", replicas=3).message == (
        "deployment.apps/quote scaled"
    )
    env.advance(30)
    assert env.snapshot().workload("quote").ready_replicas == 3  # type: ignore[union-attr]


def test_rollout_restart_replaces_pods(env: SimEnvironment) -> None:
    before = {
        p["metadata"]["name"]
        for p in env.get_objects("Pod")
        if p["metadata"]["name"].startswith("email-")
    }
    assert do(env, ActionVerb.ROLLOUT_RESTART, "deployment", "email").message == (
        "deployment.apps/email restarted"
    )
    env.advance(45)
    after = {
        p["metadata"]["name"]
        for p in env.get_objects("Pod")
        if p["metadata"]["name"].startswith("email-")
    }
    assert len(after) == 1 and after.isdisjoint(before)


def test_rollout_undo_returns_to_the_previous_template_and_reuses_its_replicaset(
    env: SimEnvironment,
) -> None:
    first = container(env, "shipping")["image"]
    original = set(revisions(env, "shipping"))
    do(
        env,
        ActionVerb.SET_IMAGE,
        "deployment",
        "shipping",
        image="ghcr.io/open-telemetry/demo:2.0.1-shipping",
    )
    env.advance(30)
    assert len(revisions(env, "shipping")) == 2
    assert do(env, ActionVerb.ROLLOUT_UNDO, "deployment", "shipping").message == (
        "deployment.apps/shipping rolled back"
    )
    env.advance(30)
    assert container(env, "shipping")["image"] == first
    revs = revisions(env, "shipping")
    assert len(revs) == 2
    (reused,) = original
    assert revs[reused] == "3"


def test_rollout_undo_without_history_is_an_error(env: SimEnvironment) -> None:
    result = do(env, ActionVerb.ROLLOUT_UNDO, "deployment", "quote")
    assert result.message == 'error: no rollout history found for deployment "quote"'


def test_delete_pod_is_recreated_by_its_replicaset(env: SimEnvironment) -> None:
    pod = next(
        p["metadata"]["name"]
        for p in env.get_objects("Pod")
        if p["metadata"]["name"].startswith("cart-")
    )
    assert do(env, ActionVerb.DELETE, "pod", pod).message == f'pod "{pod}" deleted'
    env.advance(30)
    pods = [
        p["metadata"]["name"]
        for p in env.get_objects("Pod")
        if p["metadata"]["name"].startswith("cart-")
    ]
    assert len(pods) == 1 and pods[0] != pod


def test_apply_creates_then_configures_then_is_unchanged(env: SimEnvironment) -> None:
    manifest = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "allow-all"},
        "spec": {"podSelector": {}, "ingress": [{}]},
    }
    assert do(env, ActionVerb.APPLY, "NetworkPolicy", manifest=manifest).message == (
        "networkpolicy.networking.k8s.io/allow-all created"
    )
    assert do(env, ActionVerb.APPLY, "NetworkPolicy", manifest=manifest).outcome == "unchanged"
    manifest["spec"] = {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{}]}
    assert do(env, ActionVerb.APPLY, "NetworkPolicy", manifest=manifest).message == (
        "networkpolicy.networking.k8s.io/allow-all configured"
    )


def test_set_flag_checks_flag_and_variant(env: SimEnvironment) -> None:
    ok = do(env, ActionVerb.SET_FLAG, "configmap", "flagd-config", flag="adFailure", variant="on")
    assert ok.ok and ok.outcome == "applied"
    doc = json.loads(env.get_objects("ConfigMap", "flagd-config")[0]["data"]["demo.flagd.json"])
    assert doc["flags"]["adFailure"]["defaultVariant"] == "on"
    again = do(env, ActionVerb.SET_FLAG, "Flag", "adFailure", variant="on")
    assert again.outcome == "unchanged"
    bad = do(env, ActionVerb.SET_FLAG, "Flag", "noSuchFlag", variant="on")
    assert not bad.ok and 'flag "noSuchFlag" not found' in bad.message
    bad = do(env, ActionVerb.SET_FLAG, "Flag", "paymentFailure", variant="33%")
    assert not bad.ok and 'no variant "33%"' in bad.message


def test_invalid_deployment_changes_are_rejected(env: SimEnvironment) -> None:
    result = do(env, ActionVerb.PATCH, "deployment", "cart", patch={"spec": {"replicas": -1}})
    assert not result.ok and "spec.replicas" in result.message
    assert env.get_objects("Deployment", "cart")[0]["spec"]["replicas"] == 1


@pytest.mark.parametrize("kind", ["Pod", "ReplicaSet", "Endpoints"])
def test_controller_owned_objects_cannot_be_patched(env: SimEnvironment, kind: str) -> None:
    name = env.get_objects(kind)[0]["metadata"]["name"]
    result = do(env, ActionVerb.PATCH, kind, name, patch={"metadata": {"labels": {"a": "b"}}})
    assert not result.ok and "managed by a controller" in result.message


def test_common_kinds_list_empty_and_unknown_kinds_are_errors(env: SimEnvironment) -> None:
    assert env.get_objects("statefulsets") == []
    assert env.get_objects("ns")[0]["metadata"]["name"] == "otel-demo"
    with pytest.raises(ValueError, match="widget"):
        env.get_objects("widget")


def test_deleting_the_node_leaves_every_pod_pending(env: SimEnvironment) -> None:
    assert do(env, ActionVerb.DELETE, "node", "kind-worker").ok
    env.advance(60)
    assert {p["status"]["phase"] for p in env.get_objects("Pod")} == {"Pending"}
    assert any(a.alertname == "PodNotReady" for a in env.alerts())


def test_deleting_the_namespace_removes_the_shop(env: SimEnvironment) -> None:
    assert do(env, ActionVerb.DELETE, "namespace", "otel-demo").ok
    env.advance(30)
    assert env.get_objects("Deployment") == []
    assert env.get_objects("Pod") == []
    assert env.snapshot().frontend_requests_per_second == 0


def test_snapshots_keep_what_the_objects_were_and_copy_only_what_changed(
    env: SimEnvironment,
) -> None:
    first = env.snapshot()
    env.advance(60)
    second = env.snapshot()
    # Nothing changed cart or the flags: the second snapshot holds the first one's copies.
    for ref, part in (("Deployment/cart", "spec"), ("ConfigMap/flagd-config", "data")):
        assert second.objects[ref] == first.objects[ref]
        assert second.objects[ref][part] is first.objects[ref][part]
    do(env, ActionVerb.PATCH, "deploy", "cart", patch={"spec": {"replicas": 2}})
    third = env.snapshot()
    assert third.objects["Deployment/cart"]["spec"]["replicas"] == 2
    assert third.objects["Deployment/cart"]["spec"] is not second.objects["Deployment/cart"]["spec"]
    # The earlier snapshots still show the object as it was, and none is the live object.
    assert second.objects["Deployment/cart"]["spec"]["replicas"] == 1
    live = env.get_objects("Deployment", "cart", copy=False)[0]
    assert third.objects["Deployment/cart"]["spec"] is not live["spec"]
    live["spec"]["replicas"] = 3
    assert third.objects["Deployment/cart"]["spec"]["replicas"] == 2
