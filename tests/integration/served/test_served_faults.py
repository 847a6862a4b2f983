"""The fault playbooks, run by the real ansible-runner with kubernetes.core against the served
twin: a fault is injected (the twin's controllers act on it) and removed, and every object is
then byte for byte at its baseline."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from served_lab import eventually

import itbench.core.fault_library  # noqa: F401 (registers the faults)
from itbench.core.faults import get_fault
from itbench.environments.kube.baseline import differences, read_baseline
from itbench.environments.kube.faults import (
    PLAYBOOK_FOR_OP,
    RESTORE_PLAYBOOK,
    AnsiblePlaybookRunner,
    ClusterFaults,
    KubeObjectReader,
)
from itbench.environments.served.server import ServedCluster
from itbench.environments.sim.environment import SimEnvironment
from tests.kube_collection import kubernetes_core

NS = "otel-demo"
CASES = [
    # flagd.yaml, rollout.yaml and restore.yaml (the flag, then flagd rolled out)
    ("flagd.cart-failure", {}),
    # object-create.yaml (waits for the twin's Chaos Mesh to report AllInjected), then a delete
    ("chaos.network-delay", {"workload": "cart"}),
    # object-patch.yaml (a strategic merge of one container), restore.yaml
    ("kubernetes.memory-limit", {"workload": "cart", "memory": "20Mi"}),
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServedCluster, Path]]:
    cluster = ServedCluster(SimEnvironment(seed=5, namespace=NS), speed=10.0).start()
    kubeconfig = tmp_path_factory.mktemp("faults") / "kubeconfig"
    cluster.kubeconfig(kubeconfig)
    try:
        yield cluster, kubeconfig
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def faults(served: tuple[ServedCluster, Path]) -> ClusterFaults:
    _, kubeconfig = served
    client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
    runner = AnsiblePlaybookRunner(kubeconfig=str(kubeconfig), collections_path=kubernetes_core())
    return ClusterFaults(
        reader=KubeObjectReader(client), runner=runner, rollout_timeout=120, chaos_timeout=60
    )


def test_the_cases_exercise_every_fault_playbook() -> None:
    used = {RESTORE_PLAYBOOK}
    for fault_id, args in CASES:
        used |= {PLAYBOOK_FOR_OP[c.op] for c in get_fault(fault_id).changes(args, NS)}
    assert used == {*PLAYBOOK_FOR_OP.values(), RESTORE_PLAYBOOK}


def _alerting(cluster: ServedCluster, service: str) -> bool:
    with cluster.store.lock:
        return any(a.labels.get("service_name") == service for a in cluster.env.alerts())


@pytest.mark.slow
@pytest.mark.parametrize(("fault_id", "args"), CASES, ids=[c[0] for c in CASES])
def test_inject_then_remove_leaves_every_object_byte_for_byte_at_its_baseline(
    served: tuple[ServedCluster, Path], faults: ClusterFaults, fault_id: str, args: dict[str, Any]
) -> None:
    cluster, kubeconfig = served
    client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
    before = read_baseline(client, NS)
    changes = get_fault(fault_id).changes(args, NS)
    applied = faults.inject(changes)
    injected = read_baseline(client, NS)
    touched = {(c.kind, c.name) for c in changes}
    changed = {(k[1], k[3]) for k in differences(before, injected)}
    assert touched <= changed, "every change is on the API"
    assert changed <= touched, "and nothing else changed"
    with cluster.store.lock:
        missing = [
            (c.kind, c.name)
            for c in changes
            if c.op in ("merge-patch", "create") and cluster.env.cluster.get(c.kind, c.name) is None
        ]
    assert missing == [], "the twin itself holds every changed object"
    if fault_id == "flagd.cart-failure":
        # flagd rolled out with the flag on: the twin's cart fails, its alert fires.
        eventually(lambda: _alerting(cluster, "cart"), "the twin's alert on cart", limit=120)
    faults.remove(applied)
    after = read_baseline(client, NS)
    assert differences(before, after) == []
    assert after == before
