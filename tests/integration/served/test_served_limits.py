"""The served twin holds the lab's limits on every write path real kubectl takes: the scale
subresource, patches, apply and create; kubectl prints the API's refusal."""

from __future__ import annotations

import json

import yaml
from served_lab import Kubectl, eventually

from itbench.environments.served.server import ServedCluster
from itbench.environments.sim.limits import MAX_REPLICAS, OBJECT_QUOTA, POD_QUOTA, QUOTA_NAME

NS = "otel-demo"
API_MAX = 2**31 - 1


def settled(served: ServedCluster, name: str) -> bool:
    """Whether a Deployment's pods are as many as its replicas (the twin steps on its own)."""
    with served.store.lock:
        status = served.env.cluster.objects["Deployment"][name].get("status") or {}
        return status.get("replicas") == replicas(served, name)


def replicas(served: ServedCluster, name: str) -> int:
    return int(served.env.cluster.objects["Deployment"][name]["spec"]["replicas"])


def test_the_scale_subresource_refuses_the_apis_maximum_and_takes_the_bound(
    served: ServedCluster, kubectl: Kubectl
) -> None:
    refused = kubectl("scale", "deployment", "cart", "-n", NS, f"--replicas={API_MAX}", check=False)
    assert refused.returncode == 1
    assert (
        "deployments \"cart\" is invalid: : ValidatingAdmissionPolicy 'workload-replica-limit' "
        "with binding 'workload-replica-limit' denied request: spec.replicas must be no greater "
        f"than {MAX_REPLICAS} (requested {API_MAX})"
    ) in refused.stderr
    assert replicas(served, "cart") == 1
    kubectl("scale", "deployment", "cart", "-n", NS, f"--replicas={MAX_REPLICAS}")
    assert replicas(served, "cart") == MAX_REPLICAS
    kubectl("scale", "deployment", "cart", "-n", NS, "--replicas=1")
    eventually(lambda: settled(served, "cart"), "the cart back at one pod")


def test_a_patch_to_the_apis_maximum_is_refused(served: ServedCluster, kubectl: Kubectl) -> None:
    patch = json.dumps({"spec": {"replicas": API_MAX}})
    refused = kubectl("patch", "deployment", "ad", "-n", NS, "-p", patch, check=False)
    assert refused.returncode == 1
    assert f"spec.replicas must be no greater than {MAX_REPLICAS}" in refused.stderr
    assert replicas(served, "ad") == 1


def test_an_hpa_at_1000_replicas_is_refused_on_apply(
    served: ServedCluster, kubectl: Kubectl
) -> None:
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "ad-burst", "namespace": NS},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "ad"},
            "minReplicas": 1000,
            "maxReplicas": 1000,
        },
    }
    refused = kubectl("apply", "-f", "-", stdin=json.dumps(hpa), check=False)
    assert refused.returncode == 1
    assert 'horizontalpodautoscalers "ad-burst" is invalid' in refused.stderr
    assert f"spec.minReplicas must be no greater than {MAX_REPLICAS} (requested 1000)" in (
        refused.stderr
    )
    assert "ad-burst" not in served.env.cluster.objects.get("HorizontalPodAutoscaler", {})


def test_creating_past_the_count_quota_is_forbidden(
    served: ServedCluster, kubectl: Kubectl
) -> None:
    held = len(served.env.cluster.objects.get("ConfigMap", {}))
    items = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"notes-{i}", "namespace": NS},
        }
        for i in range(OBJECT_QUOTA - held + 1)
    ]
    refused = kubectl(
        "create", "-f", "-", stdin="---\n".join(yaml.safe_dump(i) for i in items), check=False
    )
    assert refused.returncode == 1
    last = items[-1]["metadata"]["name"]
    assert (
        f'Error from server (Forbidden): error when creating "STDIN": configmaps "{last}" is '
        f"forbidden: exceeded quota: {QUOTA_NAME}, requested: count/configmaps=1, used: "
        f"count/configmaps={OBJECT_QUOTA}, limited: count/configmaps={OBJECT_QUOTA}"
    ) in refused.stderr
    assert len(served.env.cluster.objects["ConfigMap"]) == OBJECT_QUOTA


def test_a_pod_created_directly_past_the_pod_quota_is_forbidden(
    served: ServedCluster, kubectl: Kubectl
) -> None:
    eventually(lambda: settled(served, "cart"), "the cart back at one pod")
    held = len(served.env.cluster.objects["Pod"])
    template = next(iter(served.env.cluster.objects["Deployment"].values()))["spec"]["template"]
    pods = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"by-hand-{i}", "namespace": NS},
            "spec": template["spec"],
        }
        for i in range(POD_QUOTA - held + 1)
    ]
    refused = kubectl(
        "create", "-f", "-", stdin="---\n".join(yaml.safe_dump(p) for p in pods), check=False
    )
    assert refused.returncode == 1
    last = pods[-1]["metadata"]["name"]
    assert (
        f'pods "{last}" is forbidden: exceeded quota: {QUOTA_NAME}, requested: pods=1, used: '
        f"pods={POD_QUOTA}, limited: pods={POD_QUOTA}"
    ) in refused.stderr
    assert len(served.env.cluster.objects["Pod"]) == POD_QUOTA
