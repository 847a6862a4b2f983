"""The shop on the real control plane, for the tests of this directory: the namespace as the
stack playbook makes it (Pod Security labels included), the shop's objects from the twin's
baseline, and the Chaos Mesh CRDs of the pinned chart."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import kubernetes
import yaml

from itbench.environments.kube.faults import restorable
from itbench.environments.sim.objects import baseline_objects
from tests.chaos_mesh import chaos_crds
from tests.kube_controlplane import ControlPlane

ROOT = Path(__file__).resolve().parents[3]
INSTALL = ROOT / "itbench" / "environments" / "kube" / "playbooks" / "stack" / "install.yaml"
SKIPPED_KINDS = {"ClusterRole", "ClusterRoleBinding", "ServiceMonitor", "PrometheusRule"}
"""Baseline kinds the faults never touch (the cluster-scoped ones would clash between tests)."""


def namespace_labels() -> dict[str, str]:
    """The labels the stack playbook gives the shop's namespace (Pod Security's among them)."""
    for play in yaml.safe_load(INSTALL.read_text()):
        for task in play["tasks"]:
            definition = (task.get("kubernetes.core.k8s") or {}).get("definition") or {}
            if definition.get("kind") == "Namespace":
                return dict(definition["metadata"]["labels"])
    raise AssertionError(f"{INSTALL} creates no Namespace")


def load_shop(plane: ControlPlane, namespace: str) -> list[dict[str, Any]]:
    namespace_object = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": namespace, "labels": namespace_labels()},
    }
    plane.kubectl("apply", "-f", "-", stdin=json.dumps(namespace_object))
    objects = [
        restorable(o)
        for o in baseline_objects(namespace)
        if o["kind"] not in SKIPPED_KINDS and o["kind"] not in ("Node", "Namespace")
    ]
    for obj in objects:
        if obj["kind"] == "Service":
            # The twin's Services carry the addresses it allocated; a real API server allocates
            # its own (each namespace of these tests holds a copy of the shop).
            obj["spec"].pop("clusterIP", None)
            obj["spec"].pop("clusterIPs", None)
    plane.kubectl(
        "apply",
        "--server-side",
        "-f",
        "-",
        stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}),
    )
    plane.kubectl("rollout", "status", "deployment", "-n", namespace, "--timeout=120s", timeout=180)
    return objects


class ChaosStandIn:
    """Reports every Chaos Mesh experiment of a namespace AllInjected, as Chaos Mesh would."""

    def __init__(self, client: kubernetes.client.ApiClient, namespace: str) -> None:
        self.custom = kubernetes.client.CustomObjectsApi(client)
        self.namespace = namespace
        self.plurals = [c["spec"]["names"]["plural"] for c in chaos_crds()]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> ChaosStandIn:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _loop(self) -> None:
        while not self._stop.wait(0.3):
            for plural in self.plurals:
                listed = self.custom.list_namespaced_custom_object(
                    "chaos-mesh.org", "v1alpha1", self.namespace, plural
                )
                for obj in listed["items"]:
                    if (obj.get("status") or {}).get("conditions"):
                        continue
                    self.custom.patch_namespaced_custom_object_status(
                        "chaos-mesh.org",
                        "v1alpha1",
                        self.namespace,
                        plural,
                        obj["metadata"]["name"],
                        {
                            "status": {
                                "conditions": [{"type": "AllInjected", "status": "True"}],
                                "experiment": {"desiredPhase": "Run"},
                            }
                        },
                    )
