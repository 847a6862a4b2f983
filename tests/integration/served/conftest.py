"""Fixtures: a served twin (Kubernetes API over TLS, telemetry endpoints, a kubeconfig)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from served_lab import Kubectl

from itbench.environments.served.server import ServedCluster
from itbench.environments.sim.environment import SimEnvironment

NS = "otel-demo"
SPEED = 10.0
"""Twin seconds per wall second: a 15-second step every 1.5 s."""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedCluster]:
    """One served twin for a module's tests."""
    cluster = ServedCluster(SimEnvironment(seed=7, namespace=NS), speed=SPEED).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def kubeconfig(served: ServedCluster, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The served twin's kubeconfig (admin)."""
    path = tmp_path_factory.mktemp("kubeconfig") / "config"
    served.kubeconfig(path)
    return path


@pytest.fixture(scope="module")
def kubectl(kubeconfig: Path) -> Kubectl:
    """The real kubectl on the served twin."""
    return Kubectl(kubeconfig)
