"""Agents cannot stall the platform: an agent scaling every Deployment to the API's maximum (or
1000, or an HPA at 1000) is refused with the admission policy's answer and its trial ends
normally, in the report's denominator; a trial that still runs past its deadline plus grace ends
at once, DeadlineExceeded (Failed) after the agent's changes, PlatformError (Errored) without."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from benchmarks.limit_agents import API_MAX, SCALE_MAX
from itbench.client import ITBenchClient
from itbench.core.models.observations import ActionVerb, AgentAction
from itbench.core.models.scenario import Scenario
from itbench.core.models.trial import TrialPhase, TrialStatus
from itbench.core.runner.machine import new_status
from itbench.core.scoring.aggregate import build_report
from itbench.core.scoring.profile import DEFAULT_PROFILE
from itbench.environments.sim.limits import MAX_REPLICAS, REPLICA_POLICY
from itbench.environments.sim.twins import twin_for
from itbench.execution.agents import from_callable
from itbench.execution.artefacts import RunStore
from itbench.execution.benchmark import TRIAL_TWIN_CONFIG
from itbench.execution.driver import drive_trial
from itbench.execution.embedded import BenchmarkOptions, run_benchmark, trial_record
from itbench.execution.evidence import MemoryEvidenceStore
from itbench.execution.executor import TrialExecutor
from itbench.execution.plan import TrialPlan, plan_trials
from itbench.gateway.app import create_app
from itbench.gateway.sessions import SessionRegistry

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def cart_scenario() -> Scenario:
    doc = yaml.safe_load((ROOT / "scenarios/sre/cart-flagd-failure/scenario.yaml").read_text())
    return Scenario.model_validate(doc)


def acts(trajectory: list[dict[str, Any]], verb: str) -> list[dict[str, Any]]:
    """The results the twin gave to the agent's actions of one verb."""
    return [
        e["detail"]["result"]
        for e in trajectory
        if e.get("action") == f"act.{verb}" and "result" in (e.get("detail") or {})
    ]


def test_an_agent_scaling_every_deployment_to_the_apis_maximum_is_refused_and_its_trial_counts(
    tmp_path: Path,
) -> None:
    agent = from_callable("benchmarks.limit_agents:scale_everything")
    options = BenchmarkOptions(
        run="stall", agents=[agent], scenarios=[cart_scenario()], trials=1, seed=42, workers=1
    )
    result = run_benchmark(options, tmp_path, created_at=T0)
    (plan,) = result.plans
    status = result.statuses[plan.name]
    assert status.phase == TrialPhase.FAILED
    assert status.reason == "TasksFailed"
    trajectory = RunStore(result.root).load_trajectory(plan.name)
    scales, patches, applies = (acts(trajectory, v) for v in ("scale", "patch", "apply"))
    assert len(scales) == len(patches) >= 20
    for answer, asked in [*((s, SCALE_MAX) for s in scales), *((p, API_MAX) for p in patches)]:
        assert not answer["ok"]
        assert f"ValidatingAdmissionPolicy '{REPLICA_POLICY}'" in answer["message"]
        assert (
            f"spec.replicas must be no greater than {MAX_REPLICAS} (requested {asked})"
            in answer["message"]
        )
    (hpa,) = applies
    assert not hpa["ok"]
    assert hpa["message"].startswith('The horizontalpodautoscalers "cart-burst" is invalid')
    assert f"spec.minReplicas must be no greater than {MAX_REPLICAS}" in hpa["message"]
    report = result.report
    assert (report.trials, report.failed, report.errored.count) == (1, 1, 0)
    assert all(t.trials == 1 for t in report.tasks)


def test_an_agent_scaling_everything_to_the_bound_ends_its_trial_normally(
    tmp_path: Path,
) -> None:
    agent = from_callable("benchmarks.limit_agents:scale_to_the_bound")
    options = BenchmarkOptions(
        run="bound", agents=[agent], scenarios=[cart_scenario()], trials=1, seed=42, workers=1
    )
    result = run_benchmark(options, tmp_path, created_at=T0)
    (plan,) = result.plans
    status = result.statuses[plan.name]
    assert status.phase == TrialPhase.FAILED
    assert status.reason == "TasksFailed"
    scales = acts(RunStore(result.root).load_trajectory(plan.name), "scale")
    assert scales and all(s["ok"] for s in scales)
    assert result.report.errored.count == 0


@dataclass
class FakeClock:
    """A wall clock the test moves by hand."""

    now: float = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Trial:
    plan: TrialPlan
    executor: TrialExecutor
    app: Any


def twin_trial() -> Trial:
    agent = from_callable("benchmarks.limit_agents:scale_everything")
    (plan,) = plan_trials("deadline", [cart_scenario()], [agent], trials=1, seed=3)
    registry = SessionRegistry()
    env = twin_for(plan.scenario, seed=plan.seed)
    executor = TrialExecutor(plan.context(), env, registry, MemoryEvidenceStore())
    return Trial(plan=plan, executor=executor, app=create_app(registry))


def run_past_the_deadline(trial: Trial, *, change: bool) -> TrialStatus:
    """Drive the trial with an agent that (maybe) makes a legal change, then lets the wall
    clock pass the trial's deadline before it reports FINISHED."""
    clock = FakeClock()

    def agent(executor: TrialExecutor) -> None:
        session = executor.session()
        assert session is not None
        client = ITBenchClient.in_process(trial.app, session.token)
        client.use_trial(session.trial_id)
        client.started()
        if change:
            scaled = client.act(
                AgentAction(verb=ActionVerb.SCALE, kind="Deployment", name="cart", replicas=2)
            )
            assert scaled.outcome == "applied"
        clock.now = 1_000.0
        client.finished()
        client.close()

    saved: list[TrialStatus] = []
    final = drive_trial(
        new_status(trial.executor.now()),
        trial.executor,
        persist=saved.append,
        run_agent=agent,
        config=TRIAL_TWIN_CONFIG,
        deadline=100.0,
        clock=clock,
    )
    assert saved[-1] == final
    return final


@pytest.mark.parametrize(
    ("change", "phase", "reason", "ending"),
    [
        (True, TrialPhase.FAILED, "DeadlineExceeded", "while Ready, after the agent's changes"),
        (False, TrialPhase.ERRORED, "PlatformError", "while Ready"),
    ],
)
def test_a_trial_past_its_deadline_plus_grace_ends_at_once_with_its_owners_reason(
    change: bool, phase: TrialPhase, reason: str, ending: str
) -> None:
    trial = twin_trial()
    final = run_past_the_deadline(trial, change=change)
    assert final.phase == phase
    assert final.reason == reason
    owner = "agent" if change else "platform"
    assert final.message.startswith(f"{owner}: the trial ran past its deadline")
    assert final.message.endswith(ending)
    assert final.timeline[-1].phase == phase
    assert trial.executor.session() is None  # the session is closed: the agent is out
    report = build_report(
        [trial_record(trial.plan, final)], DEFAULT_PROFILE, agent="a", created_at=T0
    )
    assert report.trials == 1
    if phase == TrialPhase.FAILED:
        assert report.failures == {"DeadlineExceeded": 1}
        assert all(t.trials == 1 for t in report.tasks)  # in every task's denominator
    else:
        assert report.errored.count == 1
        assert report.errored.reasons == {"PlatformError": 1}
