"""The real control plane (tests/kube_controlplane.py) for the tests of this directory: one per
test run, shared by every worker, stopped by the run's controlling process."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kube_controlplane import ControlPlane, ControlPlaneUnavailableError, shared

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    """kube-apiserver, etcd, kube-controller-manager, kube-scheduler and KWOK, as admin.

    A test that needs it and cannot get it fails naming the missing piece (never skips).
    """
    run_dir = os.environ.get("ITBENCH_CONTROLPLANE_RUN")
    if not run_dir:
        raise AssertionError(
            "ITBENCH_CONTROLPLANE_RUN is not set: tests/conftest.py sets it for every run"
        )
    try:
        plane = shared(Path(run_dir))
    except ControlPlaneUnavailableError as exc:
        pytest.fail(f"the real control plane is unavailable: {exc}", pytrace=False)
    plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(ROOT / "crds"))
    plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(ROOT / "crds"))
    yield plane
