"""Pod Security admission on the real API server, in the shop's namespace as the stack playbook
labels it: the shop's pods are admitted and roll out, a privileged pod is refused by the API server
itself, and a privileged DaemonSet gets no pod (its controller's creations are refused), so a
workload the gateway's guardrails refuse is refused on a cluster as well."""

from __future__ import annotations

import json
import time
from typing import Any

from kube_shop import load_shop, namespace_labels

from tests.kube_controlplane import ControlPlane

PRIVILEGED_POD_SPEC: dict[str, Any] = {
    "hostPID": True,
    "hostNetwork": True,
    "serviceAccountName": "default",
    "containers": [
        {
            "name": "probe",
            "image": "busybox:1.36",
            "securityContext": {"privileged": True},
            "volumeMounts": [{"name": "root", "mountPath": "/host"}],
        }
    ],
    "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
}


def test_the_playbook_enforces_the_baseline_standard() -> None:
    labels = namespace_labels()
    assert labels["pod-security.kubernetes.io/enforce"] == "baseline"
    assert labels["pod-security.kubernetes.io/audit"] == "restricted"


def test_the_shop_is_admitted_and_a_privileged_pod_or_daemonset_is_not(
    control_plane: ControlPlane,
) -> None:
    ns = "psa-shop"
    load_shop(control_plane, ns)  # every Deployment rolled out: the shop's pods are admitted
    pods = json.loads(control_plane.kubectl("get", "pods", "-n", ns, "-o", "json").stdout)
    assert len(pods["items"]) >= 20

    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "probe", "namespace": ns},
        "spec": PRIVILEGED_POD_SPEC,
    }
    refused = control_plane.kubectl("apply", "-f", "-", stdin=json.dumps(pod), check=False)
    assert refused.returncode == 1
    assert 'violates PodSecurity "baseline:latest"' in refused.stderr
    for what in ("privileged", "hostPath volumes", "host namespaces"):
        assert what in refused.stderr, refused.stderr

    daemonset = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "probe-ds", "namespace": ns},
        "spec": {
            "selector": {"matchLabels": {"app": "probe-ds"}},
            "template": {"metadata": {"labels": {"app": "probe-ds"}}, "spec": PRIVILEGED_POD_SPEC},
        },
    }
    created = control_plane.kubectl("apply", "-f", "-", stdin=json.dumps(daemonset))
    # Admitted with the warn level's warning: Pod Security enforces on pods, not on workloads.
    assert "daemonset.apps/probe-ds created" in created.stdout
    assert 'Warning: would violate PodSecurity "restricted:latest"' in created.stderr
    deadline = time.monotonic() + 60
    messages: list[str] = []
    while time.monotonic() < deadline and not messages:
        events = json.loads(
            control_plane.kubectl(
                "get",
                "events",
                "-n",
                ns,
                "--field-selector",
                "involvedObject.name=probe-ds,reason=FailedCreate",
                "-o",
                "json",
            ).stdout
        )["items"]
        messages = [e["message"] for e in events]
        time.sleep(0.5)
    assert messages and all("violates PodSecurity" in m for m in messages), messages
    pods = json.loads(
        control_plane.kubectl("get", "pods", "-n", ns, "-l", "app=probe-ds", "-o", "json").stdout
    )
    assert pods["items"] == []
