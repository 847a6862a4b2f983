"""Test-suite wide settings: e2e tests run only when asked for; the real control plane of
tests/integration/kube is one per run, started on first use and stopped here at the end."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from tests.kube_controlplane import stop_shared


def pytest_configure(config: pytest.Config) -> None:
    # The controlling process (not an xdist worker) names the run's control-plane directory;
    # workers are started after this and inherit it.
    if not hasattr(config, "workerinput") and "ITBENCH_CONTROLPLANE_RUN" not in os.environ:
        os.environ["ITBENCH_CONTROLPLANE_RUN"] = tempfile.mkdtemp(prefix="itbench-controlplane-")
        config.stash[_OWNED] = os.environ["ITBENCH_CONTROLPLANE_RUN"]


def pytest_unconfigure(config: pytest.Config) -> None:
    owned = config.stash.get(_OWNED, None)
    if owned:
        stop_shared(Path(owned))
        os.environ.pop("ITBENCH_CONTROLPLANE_RUN", None)


_OWNED = pytest.StashKey[str]()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("ITBENCH_E2E") == "1" or "e2e" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="needs a kind cluster: run `make e2e` (ITBENCH_E2E=1)")
    for item in items:
        if "e2e" in item.keywords:
            item.add_marker(skip)
