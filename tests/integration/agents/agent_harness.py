"""Runs one baseline agent on one catalog scenario in the simulator, through a real gateway.

The harness does what the trial runner does up to the agent's turn (provision, inject, wait for the
expected alerts, open a session, mark it ready) directly on the Environment port, so the agents are
tested apart from the runner.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest

from agents import AgentFn
from itbench.client import ITBenchClient
from itbench.core.faults import get_fault
from itbench.core.models.observations import AlertState
from itbench.core.models.scenario import Scenario
from itbench.environments.sim.environment import SimEnvironment
from itbench.environments.sim.twins import twin_for
from itbench.gateway.app import create_app
from itbench.gateway.sessions import SessionRegistry, TrialSession

ROOT = Path(__file__).resolve().parents[3]
SCRAPE_SECONDS = 15.0
WARMUP_SECONDS = 120.0
AGENT_SECONDS = 900.0


def catalog() -> list[Scenario]:
    """Every scenario of the shipped catalog."""
    from itbench.catalog_files import load_catalog

    loaded, problems = load_catalog(ROOT / "scenarios")
    assert problems == [], problems
    return sorted(loaded, key=lambda s: s.name)


@dataclass
class Attempt:
    """What one agent left behind on one scenario."""

    scenario: Scenario
    session: TrialSession
    env: SimEnvironment

    def expected_alerts_firing(self) -> list[str]:
        """The scenario's triggering alerts that fire now."""
        firing = [a for a in self.env.alerts() if a.state == AlertState.FIRING]
        return [
            e.alertname
            for e in self.scenario.spec.triggers.alerts
            if any(a.matches(e.alertname, e.labels) for a in firing)
        ]


class FaultDidNotManifestError(Exception):
    """The scenario's expected alerts never fired in the simulator."""


class Harness:
    """One gateway (registry and app) shared by the attempts of a test module."""

    def __init__(self) -> None:
        self.registry = SessionRegistry()
        self.app = create_app(self.registry)
        self.count = 0

    def attempt(
        self, scenario: Scenario, agent: AgentFn, *, seed: int = 7, allow_oracle: bool = False
    ) -> Attempt:
        """Prepare a trial of the scenario, let the agent work it, close the session.

        Raises:
            FaultDidNotManifestError: The scenario's alerts never fired.
        """
        self.count += 1
        ns = scenario.spec.environment.namespace
        env = twin_for(scenario, seed=seed)
        env.provision()
        env.advance(WARMUP_SECONDS)
        for i, fault in enumerate(scenario.spec.faults):
            env.inject(f"t{self.count}-fault-{i}", get_fault(fault.id).changes(fault.args, ns))
        deadline = env.now() + timedelta(seconds=scenario.spec.triggers.timeout_seconds)
        trial_id = f"t{self.count}"
        session = TrialSession(
            trial_id=trial_id,
            token=f"token-{trial_id}",
            scenario=scenario,
            env=env,
            telemetry=scenario.spec.environment.telemetry,
            agent_name="baseline",
            allow_oracle=allow_oracle,
        )
        attempt_ = Attempt(scenario, session, env)
        while len(attempt_.expected_alerts_firing()) < len(scenario.spec.triggers.alerts):
            if env.now() >= deadline:
                # The simulator's self-test owns this failure; the agents cannot be judged here.
                raise FaultDidNotManifestError(scenario.name)
            env.advance(SCRAPE_SECONDS)
        self.registry.open(session)
        self.registry.mark_ready(trial_id, env.now() + timedelta(seconds=AGENT_SECONDS))
        client = ITBenchClient.in_process(self.app, session.token)
        try:
            agent(client)
        finally:
            client.close()
            self.registry.close(trial_id)
        return attempt_

    def attempt_or_skip(
        self, scenario: Scenario, agent: AgentFn, *, allow_oracle: bool = False
    ) -> Attempt:
        """Like `attempt`, but skips the test when the simulator cannot manifest the fault."""
        try:
            return self.attempt(scenario, agent, allow_oracle=allow_oracle)
        except FaultDidNotManifestError:
            pytest.skip(f"{scenario.name}: the fault did not manifest in the simulator")
