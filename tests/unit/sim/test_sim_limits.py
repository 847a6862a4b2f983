"""The lab's limits hold on every path an agent can write through: apply, patch, the scale verb,
HPAs, DaemonSets and object counts; refusals name the object, the field and the bound."""

from __future__ import annotations

from typing import Any

import pytest

from itbench.core.models.observations import ActionResult, ActionVerb, AgentAction
from itbench.environments.sim import SimEnvironment
from itbench.environments.sim.limits import (
    MAX_REPLICAS,
    OBJECT_QUOTA,
    POD_QUOTA,
    QUOTA_NAME,
    REPLICA_POLICY,
)

API_MAX = 2**31 - 1
"""The largest `replicas` the Kubernetes API's int32 field takes."""


def act(
    env: SimEnvironment, verb: ActionVerb, kind: str, name: str = "", **kw: Any
) -> ActionResult:
    return env.act(AgentAction(verb=verb, kind=kind, name=name, **kw))


def hpa(name: str, target: str, minimum: int, maximum: int) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
            "minReplicas": minimum,
            "maxReplicas": maximum,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": 1},
                    },
                }
            ],
        },
    }


def replica_refusal(result: ActionResult, resource: str, name: str, field: str, asked: int) -> None:
    assert not result.ok and result.outcome == "error"
    assert result.message.startswith(f'The {resource} "{name}" is invalid: : ')
    assert f"ValidatingAdmissionPolicy '{REPLICA_POLICY}'" in result.message
    assert f"{field} must be no greater than {MAX_REPLICAS} (requested {asked})" in result.message


def replicas(env: SimEnvironment, name: str) -> int:
    return int(env.get_objects("Deployment", name)[0]["spec"]["replicas"])


@pytest.mark.parametrize("asked", [1000, MAX_REPLICAS + 1])
def test_the_scale_verb_past_the_bound_is_refused_and_changes_nothing(
    env: SimEnvironment, asked: int
) -> None:
    result = act(env, ActionVerb.SCALE, "Deployment", "cart", replicas=asked)
    replica_refusal(result, "deployments", "cart", "spec.replicas", asked)
    assert replicas(env, "cart") == 1


def test_the_scale_verb_at_the_bound_is_applied(env: SimEnvironment) -> None:
    result = act(env, ActionVerb.SCALE, "Deployment", "cart", replicas=MAX_REPLICAS)
    assert result.ok and result.outcome == "applied"
    assert replicas(env, "cart") == MAX_REPLICAS


def test_a_patch_to_the_apis_maximum_is_refused(env: SimEnvironment) -> None:
    result = act(env, ActionVerb.PATCH, "Deployment", "cart", patch={"spec": {"replicas": API_MAX}})
    replica_refusal(result, "deployments", "cart", "spec.replicas", API_MAX)
    assert replicas(env, "cart") == 1


def test_scaling_a_replicaset_past_the_bound_is_refused(env: SimEnvironment) -> None:
    rs = next(
        r["metadata"]["name"]
        for r in env.get_objects("ReplicaSet")
        if r["metadata"]["ownerReferences"][0]["name"] == "cart"
    )
    result = act(env, ActionVerb.SCALE, "ReplicaSet", rs, replicas=1000)
    replica_refusal(result, "replicasets", rs, "spec.replicas", 1000)


def test_applying_a_deployment_at_the_apis_maximum_is_refused_for_a_new_and_an_existing_one(
    env: SimEnvironment,
) -> None:
    existing = env.get_objects("Deployment", "cart")[0]
    manifest = {k: v for k, v in existing.items() if k != "status"}
    manifest["spec"] = {**existing["spec"], "replicas": API_MAX}
    replica_refusal(
        act(env, ActionVerb.APPLY, "Deployment", manifest=manifest),
        "deployments",
        "cart",
        "spec.replicas",
        API_MAX,
    )
    manifest["metadata"] = {"name": "cart-copy", "labels": {"app": "cart-copy"}}
    manifest["spec"] = {
        **existing["spec"],
        "replicas": API_MAX,
        "selector": {"matchLabels": {"app": "cart-copy"}},
        "template": {
            **existing["spec"]["template"],
            "metadata": {"labels": {"app": "cart-copy"}},
        },
    }
    replica_refusal(
        act(env, ActionVerb.APPLY, "Deployment", manifest=manifest),
        "deployments",
        "cart-copy",
        "spec.replicas",
        API_MAX,
    )
    assert env.get_objects("Deployment", "cart-copy") == []


@pytest.mark.parametrize(
    ("minimum", "maximum", "field", "asked"),
    [
        (1000, 1000, "spec.minReplicas", 1000),
        (1, API_MAX, "spec.maxReplicas", API_MAX),
    ],
)
def test_an_hpa_asking_for_more_replicas_than_the_bound_is_refused(
    env: SimEnvironment, minimum: int, maximum: int, field: str, asked: int
) -> None:
    result = act(
        env,
        ActionVerb.APPLY,
        "HorizontalPodAutoscaler",
        manifest=hpa("cart-burst", "cart", minimum, maximum),
    )
    replica_refusal(result, "horizontalpodautoscalers", "cart-burst", field, asked)
    assert env.get_objects("HorizontalPodAutoscaler", "cart-burst") == []


def test_patching_an_existing_hpa_past_the_bound_is_refused(env: SimEnvironment) -> None:
    result = act(
        env,
        ActionVerb.PATCH,
        "HorizontalPodAutoscaler",
        "cart",
        patch={"spec": {"minReplicas": 1000, "maxReplicas": 1000}},
    )
    replica_refusal(result, "horizontalpodautoscalers", "cart", "spec.minReplicas", 1000)


def test_an_hpa_at_the_bound_scales_no_further_than_it(env: SimEnvironment) -> None:
    result = act(
        env,
        ActionVerb.APPLY,
        "HorizontalPodAutoscaler",
        manifest=hpa("ad-burst", "ad", MAX_REPLICAS, MAX_REPLICAS),
    )
    assert result.ok
    env.advance(120)
    assert replicas(env, "ad") == MAX_REPLICAS
    assert len(env.get_objects("Pod")) <= POD_QUOTA


def test_pods_stop_at_the_namespace_quota_with_failed_create_warnings(
    env: SimEnvironment,
) -> None:
    for d in env.get_objects("Deployment"):
        act(env, ActionVerb.SCALE, "Deployment", d["metadata"]["name"], replicas=MAX_REPLICAS)
    env.advance(300)
    assert len(env.get_objects("Pod")) == POD_QUOTA
    refusals = [
        e["message"]
        for e in env.events("ReplicaSet")
        if e["reason"] == "FailedCreate" and e["type"] == "Warning"
    ]
    assert refusals
    assert (
        f"forbidden: exceeded quota: {QUOTA_NAME}, requested: pods=1, used: pods={POD_QUOTA}, "
        f"limited: pods={POD_QUOTA}"
    ) in refusals[-1]


def test_daemonset_pods_are_held_to_the_pod_quota(env: SimEnvironment) -> None:
    for d in env.get_objects("Deployment"):
        act(env, ActionVerb.SCALE, "Deployment", d["metadata"]["name"], replicas=MAX_REPLICAS)
    env.advance(60)
    template = env.get_objects("Deployment", "cart")[0]["spec"]["template"]
    daemon = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "node-agent"},
        "spec": {"selector": {"matchLabels": {"app": "node-agent"}}, "template": template},
    }
    assert act(env, ActionVerb.APPLY, "DaemonSet", manifest=daemon).ok
    env.advance(60)
    assert len(env.get_objects("Pod")) == POD_QUOTA
    assert any(
        e["reason"] == "FailedCreate" and "exceeded quota" in e["message"]
        for e in env.events("DaemonSet", "node-agent")
    )


def test_objects_of_a_kind_stop_at_the_count_quota(env: SimEnvironment) -> None:
    held = len(env.get_objects("ConfigMap"))
    for i in range(OBJECT_QUOTA - held):
        manifest = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"notes-{i}"}}
        assert act(env, ActionVerb.APPLY, "ConfigMap", manifest=manifest).ok
    over = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "one-too-many"}}
    result = act(env, ActionVerb.APPLY, "ConfigMap", manifest=over)
    assert not result.ok
    assert result.message == (
        'Error from server (Forbidden): error when creating "STDIN": configmaps "one-too-many" '
        f"is forbidden: exceeded quota: {QUOTA_NAME}, requested: count/configmaps=1, used: "
        f"count/configmaps={OBJECT_QUOTA}, limited: count/configmaps={OBJECT_QUOTA}"
    )
    assert len(env.get_objects("ConfigMap")) == OBJECT_QUOTA
    existing = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "notes-0"},
        "data": {"k": "v"},
    }
    assert act(env, ActionVerb.APPLY, "ConfigMap", manifest=existing).ok


def test_the_fault_library_fits_within_the_limits() -> None:
    from itbench.core.fault_library import HpaArgs, PreemptionArgs

    hpa_bound = HpaArgs.model_fields["max_replicas"].metadata
    greedy_bound = PreemptionArgs.model_fields["replicas"].metadata
    assert max(getattr(m, "le", 0) or 0 for m in hpa_bound) <= MAX_REPLICAS
    assert max(getattr(m, "le", 0) or 0 for m in greedy_bound) <= MAX_REPLICAS
