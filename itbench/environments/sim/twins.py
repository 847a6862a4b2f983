"""Which twin a scenario runs in: the Astronomy Shop simulator, or the compliance twin for CISO."""

from __future__ import annotations

from datetime import datetime

from itbench.core.models.base import Domain
from itbench.core.models.scenario import Scenario
from itbench.environments.port import Environment
from itbench.environments.sim.compliance import ComplianceEnvironment
from itbench.environments.sim.environment import DEFAULT_START, SimEnvironment


def twin_for(scenario: Scenario, *, seed: int = 0, start: datetime = DEFAULT_START) -> Environment:
    """A fresh, unprovisioned twin for a scenario: the compliance twin for CISO scenarios,
    the simulated shop for every other."""
    if scenario.spec.domain == Domain.CISO:
        return ComplianceEnvironment.for_scenario(scenario, seed=seed, start=start)
    return SimEnvironment.for_scenario(scenario, seed=seed, start=start)
