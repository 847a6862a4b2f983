"""Fixtures: a loopback Kubernetes API with the ITBench CRDs, and a lab to run the operator in."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from operator_lab import Cluster, Lab, new_lab, start_cluster


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A fresh loopback API with the CRDs from crds/ installed."""
    cluster = start_cluster(tmp_path)
    try:
        yield cluster
    finally:
        cluster.api.api_client.close()
        cluster.server.stop()


@pytest_asyncio.fixture
async def lab(cluster: Cluster) -> AsyncIterator[Lab]:
    """A lab with the simulator as the environment; every operator is cancelled at teardown."""
    lab = new_lab(cluster)
    try:
        yield lab
    finally:
        for handle in lab.operators:
            await handle.kill()
