"""Shared fixture of the simulator tests: a provisioned, settled twin."""

from __future__ import annotations

import pytest

from itbench.environments.sim import SimEnvironment


@pytest.fixture
def env() -> SimEnvironment:
    """A provisioned twin that ran two healthy minutes."""
    twin = SimEnvironment(seed=7)
    twin.provision()
    twin.advance(120)
    return twin
