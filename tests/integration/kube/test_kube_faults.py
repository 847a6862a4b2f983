"""Every fault of the catalog through its Ansible playbook (kubernetes.core, run by
ansible-runner) on the real control plane: the shop's objects as the pinned chart makes them, its
Deployments rolled out by the real controllers onto KWOK's Nodes, the fault injected, then
removed, and every object it touched back exactly as it was.

Chaos Mesh cannot run here (it needs containers): its CRDs are the pinned chart's, and a stand-in
reports each experiment AllInjected, which is all the playbooks wait for."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from kube_shop import ChaosStandIn, chaos_crds, load_shop

import itbench.core.fault_library  # noqa: F401 (registers the faults)
from itbench.catalog_files import load_catalog
from itbench.core.faults import ObjectChange, get_fault
from itbench.core.models.base import Domain
from itbench.environments.kube.faults import (
    AnsiblePlaybookRunner,
    ClusterFaults,
    KubeObjectReader,
    restorable,
)
from itbench.environments.sim.objects import baseline_objects
from tests.kube_collection import kubernetes_core
from tests.kube_controlplane import NODE_TEMPLATE, ControlPlane

ROOT = Path(__file__).resolve().parents[3]


def _faults() -> list[tuple[str, str, dict[str, Any]]]:
    catalog, problems = load_catalog(ROOT / "scenarios")
    assert not problems
    out: dict[str, tuple[str, str, dict[str, Any]]] = {}
    for scenario in catalog:
        if scenario.spec.domain == Domain.CISO:
            continue
        for spec in scenario.spec.faults:
            out.setdefault(spec.id, (spec.id, scenario.metadata.name, dict(spec.args)))
    return sorted(out.values())


FAULTS = _faults()


@pytest.fixture(scope="module")
def shop_cluster(control_plane: ControlPlane) -> ControlPlane:
    """The Chaos Mesh CRDs, and the kind Nodes the shop's baseline names, kept Ready by KWOK."""
    control_plane.kubectl(
        "apply",
        "--server-side",
        "-f",
        "-",
        stdin=json.dumps(
            {
                "apiVersion": "v1",
                "kind": "List",
                "items": chaos_crds(),
            }
        ),
    )
    for obj in baseline_objects("otel-demo"):
        if obj["kind"] == "Node":
            node = json.loads(json.dumps(NODE_TEMPLATE))
            node["metadata"]["name"] = obj["metadata"]["name"]
            node["metadata"]["labels"].update(obj["metadata"].get("labels") or {})
            control_plane.kubectl("apply", "-f", "-", stdin=json.dumps(node))
    control_plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
    return control_plane


def _read(plane: ControlPlane, change: ObjectChange, namespace: str) -> dict[str, Any] | None:
    kind = change.kind.lower() + (
        ""
        if "." in change.api_version or "/" not in change.api_version
        else "." + change.api_version.split("/")[0]
    )
    args = ["get", kind, change.name, "-o", "json"]
    if change.namespace:
        args += ["-n", namespace]
    done = plane.kubectl(*args, check=False)
    return json.loads(done.stdout) if done.returncode == 0 else None


def _comparable(obj: dict[str, Any] | None) -> Any:
    if obj is None:
        return None
    out = restorable(obj)
    meta = out["metadata"]
    for key in ("generation", "managedFields", "finalizers"):
        meta.pop(key, None)
    annotations = {
        k: v
        for k, v in (meta.get("annotations") or {}).items()
        if k != "deployment.kubernetes.io/revision"
    }
    meta["annotations"] = annotations
    template = (out.get("spec") or {}).get("template") or {}
    template_annotations = (template.get("metadata") or {}).get("annotations") or {}
    template_annotations.pop("kubectl.kubernetes.io/restartedAt", None)
    return out


@pytest.mark.parametrize(("fault", "scenario", "args"), FAULTS, ids=[f[0] for f in FAULTS])
def test_a_fault_is_injected_and_removal_restores_every_object(
    shop_cluster: ControlPlane, fault: str, scenario: str, args: dict[str, Any]
) -> None:
    namespace = "f-" + re.sub(r"[^a-z0-9]+", "-", fault.lower())[:40].strip("-")
    load_shop(shop_cluster, namespace)
    changes = get_fault(fault).changes(args, namespace)
    touched = [c for c in changes if c.op != "delete" or "*" not in c.name]
    before = {(c.kind, c.name): _comparable(_read(shop_cluster, c, namespace)) for c in touched}
    client = kubernetes.config.new_client_from_config(config_file=str(shop_cluster.kubeconfig))
    faults = ClusterFaults(
        reader=KubeObjectReader(client),
        runner=AnsiblePlaybookRunner(
            kubeconfig=str(shop_cluster.kubeconfig), collections_path=kubernetes_core()
        ),
        rollout_timeout=60,
        chaos_timeout=30,
    )
    with ChaosStandIn(client, namespace):
        applied = faults.inject(changes)
        during = {(c.kind, c.name): _comparable(_read(shop_cluster, c, namespace)) for c in touched}
        assert during != before, f"{fault} ({scenario}) changed nothing"
        faults.remove(applied)
    after = {(c.kind, c.name): _comparable(_read(shop_cluster, c, namespace)) for c in touched}
    for key, was in before.items():
        assert after[key] == was, f"{fault}: {key} not restored"
    shop_cluster.kubectl("delete", "namespace", namespace, "--wait=false")
