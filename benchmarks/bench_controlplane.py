"""The tests' real control plane (tests/kube_controlplane.py): how long it takes to start
(etcd, kube-apiserver ready, the controllers, the scheduler and KWOK with two Ready Nodes and the
default ServiceAccount), and the platform's time per fault on it: one fault of the catalog
injected by its playbook into the shop's objects rolled out on KWOK's Nodes, removed, and every
object back at its baseline. Needs the built control plane (`make controlplane`)."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import Figure

START_TARGET_SECONDS = 20.0
"""Ready to use (a cold machine's first start pays the binaries' page-in)."""
FAULT_TARGET_SECONDS = 30.0
"""Inject + remove one patch fault through its playbooks, with the rollouts they wait for."""


def run() -> list[Figure]:
    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root))
    sys.path.insert(0, str(root / "tests" / "integration" / "kube"))
    import kubernetes
    from kube_shop import load_shop

    import itbench.core.fault_library  # noqa: F401 (registers the faults)
    from itbench.core.faults import get_fault
    from itbench.environments.kube.faults import (
        AnsiblePlaybookRunner,
        ClusterFaults,
        KubeObjectReader,
    )
    from tests.kube_collection import kubernetes_core
    from tests.kube_controlplane import cached_binaries, start

    binaries = cached_binaries()
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory() as tmp:
        began = time.monotonic()
        plane = start(Path(tmp), binaries=binaries)
        figures.append(
            Figure("control plane start", time.monotonic() - began, "s", START_TARGET_SECONDS)
        )
        try:
            began = time.monotonic()
            load_shop(plane, "bench-shop")
            figures.append(Figure("shop rolled out on KWOK", time.monotonic() - began, "s"))
            client = kubernetes.config.new_client_from_config(config_file=str(plane.kubeconfig))
            faults = ClusterFaults(
                reader=KubeObjectReader(client),
                runner=AnsiblePlaybookRunner(
                    kubeconfig=str(plane.kubeconfig), collections_path=kubernetes_core()
                ),
                rollout_timeout=60,
            )
            changes = get_fault("kubernetes.memory-limit").changes(
                {"workload": "cart", "memory": "20Mi"}, "bench-shop"
            )
            began = time.monotonic()
            faults.remove(faults.inject(changes))
            figures.append(
                Figure(
                    "fault inject + remove (real API)",
                    time.monotonic() - began,
                    "s",
                    FAULT_TARGET_SECONDS,
                )
            )
        finally:
            plane.stop()
    return figures
