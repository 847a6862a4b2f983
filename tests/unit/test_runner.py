"""The trial state machine, driven step by step over a fake world with a fake clock."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

import pytest

from itbench.core.models.base import LocalObjectReference
from itbench.core.models.benchmark_run import Timeouts
from itbench.core.models.observations import (
    Alert,
    AlertInterval,
    AlertState,
    EnvironmentSnapshot,
    WorkloadHealth,
)
from itbench.core.models.scenario import Scenario
from itbench.core.models.trial import (
    DiagnosisScores,
    MitigationScores,
    TrialPhase,
    TrialScores,
    TrialSpec,
    TrialStatus,
)
from itbench.core.runner.actions import (
    Action,
    CloseSession,
    CollectSample,
    InjectFault,
    MarkForRebuild,
    MarkReady,
    OpenSession,
    ProvisionEnvironment,
    RemoveFault,
    ResetEnvironment,
    TakeBaseline,
)
from itbench.core.runner.context import (
    PHASE_NEEDS,
    AgentProgress,
    AgentProgressState,
    Observation,
    Reason,
    RunnerConfig,
    TrialContext,
)
from itbench.core.runner.evaluation import EvaluationInput, baseline_differences, unhealthy
from itbench.core.runner.machine import abort, new_status, step, trial_outcome

T0 = datetime(2026, 1, 1, tzinfo=UTC)
UID = "uid-1"
CONFIG = RunnerConfig(poll_seconds=15, agent_poll_seconds=15, settle_seconds=30)


def scenario(*, control: bool = False) -> Scenario:
    spec: dict[str, object] = {
        "description": "cart fails",
        "domain": "SRE",
        "class": "NoFault" if control else "CacheFailure",
        "control": control,
        "triggers": {
            "alerts": []
            if control
            else [{"alertname": "RequestErrorRate", "labels": {"service_name": "cart"}}],
            "timeoutSeconds": 300,
        },
        "desiredOutcome": {"observationWindowSeconds": 120},
        "faults": [] if control else [{"id": "flagd.cart-failure"}],
    }
    return Scenario.model_validate({"metadata": {"name": "cart-failure"}, "spec": spec})


def context(
    *, control: bool = False, agent_seconds: int = 600, recovery_seconds: int = 300
) -> TrialContext:
    spec = TrialSpec(
        run_ref=LocalObjectReference(name="run"),
        agent_ref=LocalObjectReference(name="agent"),
        scenario="cart-failure",
        attempt=0,
        seed=1,
        timeouts=Timeouts(agent_seconds=agent_seconds, recovery_seconds=recovery_seconds),
    )
    return TrialContext(
        uid=UID, name="trial-0", spec=spec, scenario=scenario(control=control), agent_name="a"
    )


@dataclass
class FakeWorld:
    """An environment, a gateway session and an evidence store, as plain state."""

    now: datetime = T0
    fault_manifests: bool = True
    alert_delay: float = 30.0
    heals_on_removal: bool = True
    heals_on_reset: bool = True
    noisy: bool = False
    injected: list[str] = field(default_factory=list)
    injected_at: datetime | None = None
    removed: bool = False
    broken_by_agent: bool = False
    provisions: int = 0
    resets: int = 0
    baseline: EnvironmentSnapshot | None = None
    samples: dict[str, EnvironmentSnapshot] = field(default_factory=dict)
    agent: AgentProgress | None = None
    closed: AgentProgress | None = None
    rebuild: str | None = None
    applied: list[Action] = field(default_factory=list)

    def firing(self) -> list[Alert]:
        alerts = []
        if self.noisy:
            alerts.append(self._alert("RequestLatencyHigh", "frontend"))
        faults = [k for k in self.injected if "/inject/" in k]  # decoys cause nothing
        active = faults and not (self.removed and self.heals_on_removal)
        manifests = active and self.fault_manifests and self.injected_at is not None
        if manifests and (self.now - self.injected_at).total_seconds() >= self.alert_delay:
            alerts.append(self._alert("RequestErrorRate", "cart"))
        return alerts

    def _alert(self, name: str, service: str) -> Alert:
        return Alert(
            alertname=name,
            labels={"service_name": service},
            state=AlertState.FIRING,
            active_at=self.now,
        )

    def snapshot(self) -> EnvironmentSnapshot:
        ready = 0 if self.broken_by_agent else 1
        return EnvironmentSnapshot(
            time=self.now,
            workloads=[
                WorkloadHealth(
                    kind="Deployment", name="cart", desired_replicas=1, ready_replicas=ready
                )
            ],
            firing_alerts=self.firing(),
            alert_rules_fingerprint="rules-1",
            frontend_requests_per_second=10.0,
        )

    def observe(self, status: TrialStatus) -> Observation:
        needs = {n.value for n in PHASE_NEEDS[status.phase]}
        return Observation(
            snapshot=self.snapshot() if "snapshot" in needs else None,
            alerts=self.firing() if "alerts" in needs else (),
            alert_history=[AlertInterval(alertname="RequestErrorRate", start=T0)],
            injected=frozenset(self.injected),
            baseline=self.baseline,
            samples=dict(self.samples),
            agent=self.agent if self.agent is not None else self.closed,
        )

    def apply(self, actions: list[Action]) -> None:
        for action in actions:
            self.applied.append(action)
            if isinstance(action, ProvisionEnvironment):
                self.provisions += 1
            elif isinstance(action, TakeBaseline):
                self.baseline = self.baseline or self.snapshot()
            elif isinstance(action, InjectFault):
                if action.key not in self.injected:
                    self.injected.append(action.key)
                    if "/inject/" in action.key:
                        self.injected_at = self.now
            elif isinstance(action, CollectSample):
                self.samples.setdefault(action.key, self.snapshot())
            elif isinstance(action, RemoveFault):
                self.removed = True
            elif isinstance(action, ResetEnvironment):
                self.resets += 1
                if self.heals_on_reset:
                    self.broken_by_agent = False
            elif isinstance(action, OpenSession):
                if self.agent is None and self.closed is None:
                    self.agent = AgentProgress(state=AgentProgressState.WAITING)
            elif isinstance(action, MarkReady):
                if self.agent is not None and self.agent.state == AgentProgressState.WAITING:
                    self.agent = replace(self.agent, state=AgentProgressState.READY)
            elif isinstance(action, CloseSession):
                if self.agent is not None:
                    self.closed = self.agent
                    self.agent = None
            elif isinstance(action, MarkForRebuild):
                self.rebuild = action.reason


def passing_scorer(evaluation: EvaluationInput) -> tuple[TrialScores, list[str]]:
    return (
        TrialScores(
            profile="test@1",
            diagnosis=DiagnosisScores(passed=True, fl_ntam=1.0, fpc_ntam=1.0),
            mitigation=MitigationScores(passed=True, ttr_seconds=60.0),
        ),
        [],
    )


def failing_scorer(evaluation: EvaluationInput) -> tuple[TrialScores, list[str]]:
    return (
        TrialScores(
            profile="test@1",
            diagnosis=DiagnosisScores(passed=False, fl_ntam=0.0, fpc_ntam=0.0),
            mitigation=MitigationScores(passed=False, reason="AlertsStillFiring"),
        ),
        ["SRE diagnosis: the root cause was not named", "SRE mitigation: AlertsStillFiring"],
    )


AgentScript = str  # "finish", "never-start", "hang", "crash"


def run(
    ctx: TrialContext,
    world: FakeWorld,
    *,
    agent: AgentScript = "finish",
    scorer=passing_scorer,
    max_steps: int = 500,
    config: RunnerConfig = CONFIG,
) -> tuple[TrialStatus, list[TrialStatus]]:
    """Drive the machine over the fake world; the agent acts when the trial is Ready."""
    status = new_status(world.now)
    history = [status]
    for _ in range(max_steps):
        if status.phase.final:
            return status, history
        decision = step(ctx, status, world.observe(status), world.now, scorer=scorer, config=config)
        world.apply(decision.actions)
        status = decision.status
        history.append(status)
        if agent_waits(status, world):
            play_agent(world, agent)
        world.now += timedelta(seconds=decision.wait_seconds)
    raise AssertionError(f"not final after {max_steps} steps: {status.phase}")


def agent_waits(status: TrialStatus, world: FakeWorld) -> bool:
    agent = world.agent
    return status.phase == TrialPhase.READY and agent is not None and agent.state == "Ready"


def play_agent(world: FakeWorld, agent: AgentScript) -> None:
    assert world.agent is not None
    if agent == "never-start":
        return
    started = world.now + timedelta(seconds=5)
    if agent == "hang":
        world.agent = replace(world.agent, state=AgentProgressState.STARTED, started_at=started)
        return
    if agent == "crash":
        world.agent = replace(
            world.agent,
            state=AgentProgressState.STARTED,
            started_at=started,
            error="RuntimeError: boom",
        )
        return
    finished = world.now + timedelta(seconds=90)
    world.agent = replace(
        world.agent,
        state=AgentProgressState.FINISHED,
        started_at=started,
        finished_at=finished,
        diagnosis_at=world.now + timedelta(seconds=40),
    )
    world.now = finished
    if agent == "break-things":
        world.broken_by_agent = True


def phases(status: TrialStatus) -> list[TrialPhase]:
    return [entry.phase for entry in status.timeline]


def test_trial_passes_through_every_phase_in_order_and_succeeds() -> None:
    world = FakeWorld()
    ctx = context()
    final, _ = run(ctx, world)
    assert phases(final) == [
        TrialPhase.PENDING,
        TrialPhase.PROVISIONING,
        TrialPhase.INJECTING,
        TrialPhase.AWAITING_ALERTS,
        TrialPhase.READY,
        TrialPhase.AGENT_RUNNING,
        TrialPhase.EVALUATING,
        TrialPhase.RECOVERING,
        TrialPhase.SUCCEEDED,
    ]
    assert final.reason == Reason.TASKS_PASSED
    assert final.injections == 1
    assert world.injected == ctx.inject_keys()
    assert f"{UID}/inject/0" in world.injected
    assert all(k.startswith(f"{UID}/decoy/") for k in world.injected if "/inject/" not in k)
    assert final.scores is not None and final.scores.profile == "test@1"
    assert final.ready_at is not None and final.agent_started_at == final.ready_at + timedelta(
        seconds=5
    )
    assert final.alerts_cleared_at == final.ready_at + timedelta(seconds=60)
    times = [entry.time for entry in final.timeline]
    assert times == sorted(times)


@pytest.mark.parametrize(("agent", "phase"), [("finish", "Succeeded"), ("crash", "Failed")])
def test_a_discarded_environment_has_its_faults_removed_and_the_trial_ends_at_once(
    agent: AgentScript, phase: str
) -> None:
    world = FakeWorld(heals_on_reset=False)
    disposable = replace(CONFIG, await_recovery=False)
    final, _ = run(context(), world, agent=agent, config=disposable)
    assert final.phase == TrialPhase(phase)
    assert TrialPhase.RECOVERING not in phases(final)
    removed = [a.key for a in world.applied if isinstance(a, RemoveFault)]
    assert removed == list(reversed(context().inject_keys()))
    assert world.rebuild is None


def test_every_action_is_keyed_by_the_trial_uid() -> None:
    world = FakeWorld()
    run(context(), world)
    kinds = {type(a).__name__ for a in world.applied}
    assert {
        "ProvisionEnvironment",
        "TakeBaseline",
        "InjectFault",
        "OpenSession",
        "MarkReady",
        "CloseSession",
        "CollectSample",
        "RemoveFault",
    } <= kinds
    assert all(a.key.startswith(f"{UID}/") for a in world.applied)


def test_baseline_is_taken_only_once_the_environment_has_settled() -> None:
    world = FakeWorld()
    ctx = context()
    status = step(ctx, new_status(T0), world.observe(new_status(T0)), T0, config=CONFIG).status
    assert status.phase == TrialPhase.PROVISIONING
    early = step(ctx, status, world.observe(status), T0 + timedelta(seconds=10), config=CONFIG)
    assert early.actions == [] and early.wait_seconds == pytest.approx(20)
    settled = step(ctx, status, world.observe(status), T0 + timedelta(seconds=30), config=CONFIG)
    assert [type(a) for a in settled.actions] == [TakeBaseline]


def test_unhealthy_environment_is_errored_by_the_environment_not_the_agent() -> None:
    world = FakeWorld(noisy=True)
    final, _ = run(context(), world)
    assert final.phase == TrialPhase.ERRORED
    assert final.reason == Reason.ENVIRONMENT_NOT_READY
    assert final.message.startswith("environment:")
    assert world.injected == []


def test_trial_is_errored_not_failed_when_fault_never_manifests() -> None:
    world = FakeWorld(fault_manifests=False)
    final, _ = run(context(), world)
    assert final.phase == TrialPhase.ERRORED
    assert final.reason == Reason.FAULT_DID_NOT_MANIFEST
    assert final.message.startswith("fault injection:")
    assert "RequestErrorRate" in final.message
    assert TrialPhase.READY not in phases(final)
    assert world.removed, "the fault must be removed even though it never manifested"
    waited = final.timeline[-2].time - final.timeline[3].time
    assert waited >= timedelta(seconds=300)


def test_agent_that_never_starts_ends_failed_with_agent_timeout() -> None:
    world = FakeWorld()
    final, _ = run(context(agent_seconds=120), world, agent="never-start")
    assert final.phase == TrialPhase.FAILED
    assert final.reason == Reason.AGENT_TIMEOUT
    assert final.message.startswith("agent:")


def test_agent_exceeding_its_time_limit_is_failed_not_errored() -> None:
    world = FakeWorld()
    final, _ = run(context(agent_seconds=120), world, agent="hang")
    assert final.phase == TrialPhase.FAILED
    assert final.reason == Reason.AGENT_TIMEOUT
    assert "120 s" in final.message
    assert final.scores is not None, "a timed-out trial is still scored"
    evaluating = next(e for e in final.timeline if e.phase == TrialPhase.EVALUATING)
    assert final.ready_at is not None
    assert evaluating.time == final.ready_at + timedelta(seconds=120)
    assert world.agent is None and world.closed is not None, "the session was revoked"


def test_timeout_replayed_after_the_session_closed_is_still_a_timeout() -> None:
    world = FakeWorld()
    ctx = context(agent_seconds=120)
    _, history = run(ctx, world, agent="hang")
    running = next(s for s in history if s.phase == TrialPhase.AGENT_RUNNING)
    assert running.ready_at is not None
    at_deadline = running.ready_at + timedelta(seconds=120)
    # The session is gone (closed by the first execution); its record says Started.
    obs = Observation(agent=world.closed)
    assert world.closed is not None and world.closed.state == AgentProgressState.STARTED
    replay = step(ctx, running, obs, at_deadline, config=CONFIG)
    assert replay.status.phase == TrialPhase.EVALUATING
    assert replay.status.reason == Reason.AGENT_TIMEOUT


def test_agent_crash_ends_failed_as_the_agents_fault() -> None:
    world = FakeWorld()
    final, _ = run(context(), world, agent="crash")
    assert final.phase == TrialPhase.FAILED
    assert final.reason == Reason.AGENT_CRASHED
    assert "RuntimeError: boom" in final.message
    assert world.removed


def test_failed_tasks_end_failed_naming_each_failed_task() -> None:
    final, _ = run(context(), FakeWorld(), scorer=failing_scorer)
    assert final.phase == TrialPhase.FAILED
    assert final.reason == Reason.TASKS_FAILED
    assert "SRE diagnosis" in final.message and "AlertsStillFiring" in final.message


def test_observation_window_is_sampled_evenly_before_scoring() -> None:
    world = FakeWorld()
    seen: list[EvaluationInput] = []

    def scorer(evaluation: EvaluationInput) -> tuple[TrialScores, list[str]]:
        seen.append(evaluation)
        return passing_scorer(evaluation)

    run(context(), world, scorer=scorer)
    assert len(seen) == 1
    times = [s.time for s in seen[0].samples]
    assert len(times) == CONFIG.sample_count + 1
    gaps = {(b - a).total_seconds() for a, b in itertools.pairwise(times)}
    assert gaps == {120 / CONFIG.sample_count}
    assert seen[0].window_seconds == 120


def test_recovery_resets_the_environment_once_when_the_agent_broke_it() -> None:
    world = FakeWorld()
    final, _ = run(context(), world, agent="break-things")
    assert final.phase == TrialPhase.SUCCEEDED
    assert world.resets == 1


def test_recovery_failure_after_a_failed_agent_stays_failed_and_marks_a_rebuild() -> None:
    world = FakeWorld(heals_on_reset=False)
    final, _ = run(
        context(recovery_seconds=200), world, agent="break-things", scorer=failing_scorer
    )
    assert final.phase == TrialPhase.FAILED, "breaking the environment does not dodge a failure"
    assert final.reason == Reason.TASKS_FAILED
    assert "baseline not restored" in final.message
    assert world.rebuild is not None


def test_faults_are_removed_last_in_first_out() -> None:
    doc = scenario().model_dump(mode="json", by_alias=True)
    doc["spec"]["faults"] = [
        {"id": "flagd.cart-failure"},
        {"id": "flagd.cart-failure"},
        {"id": "flagd.cart-failure"},
    ]
    ctx = replace(context(), scenario=Scenario.model_validate(doc))
    decision = abort(ctx, new_status(T0), T0, Reason.PLATFORM_ERROR, "x")
    removed = [a.key for a in decision.actions if isinstance(a, RemoveFault)]
    assert removed == list(reversed(ctx.inject_keys()))
    faults = [k for k in removed if "/inject/" in k]
    assert faults == [f"{UID}/inject/2", f"{UID}/inject/1", f"{UID}/inject/0"]


def test_recovery_that_never_restores_the_baseline_is_errored_and_marks_a_rebuild() -> None:
    world = FakeWorld(heals_on_reset=False)
    final, _ = run(context(recovery_seconds=200), world, agent="break-things")
    assert final.phase == TrialPhase.ERRORED
    assert final.reason == Reason.RECOVERY_FAILED
    assert final.message.startswith("environment:")
    assert "Deployment/cart 0/1 ready" in final.message
    assert world.rebuild is not None and "Deployment/cart" in world.rebuild
    assert world.resets == 1


def test_control_scenario_injects_only_decoys_and_waits_a_quiet_window() -> None:
    world = FakeWorld()
    ctx = context(control=True)
    final, _ = run(ctx, world)
    assert final.phase == TrialPhase.SUCCEEDED
    assert world.injected == ctx.inject_keys()
    assert world.injected and all("/decoy/" in k for k in world.injected)
    awaiting = next(e for e in final.timeline if e.phase == TrialPhase.AWAITING_ALERTS)
    ready = next(e for e in final.timeline if e.phase == TrialPhase.READY)
    assert ready.time - awaiting.time == timedelta(seconds=CONFIG.control_window_seconds)


def test_control_scenario_with_firing_alerts_is_errored_by_the_environment() -> None:
    world = FakeWorld()
    ctx = context(control=True)
    _, history = run(ctx, world, max_steps=500)
    awaiting = next(s for s in history if s.phase == TrialPhase.AWAITING_ALERTS)
    world.noisy = True
    decision = step(ctx, awaiting, world.observe(awaiting), world.now, config=CONFIG)
    assert decision.status.phase == TrialPhase.RECOVERING
    assert trial_outcome(decision.status.reason)[0] == TrialPhase.ERRORED
    assert decision.status.reason == Reason.CONTROL_NOT_QUIET
    assert decision.status.message == (
        "environment: alerts fired in a no-fault control: RequestLatencyHigh"
    )
    kinds = [type(a) for a in decision.actions]
    assert set(kinds) == {RemoveFault}
    assert [a.key for a in decision.actions] == list(reversed(ctx.inject_keys()))


def test_replaying_any_step_yields_the_same_decision_and_injects_once() -> None:
    world = FakeWorld()
    ctx = context()
    status = new_status(world.now)
    steps = 0
    while not status.phase.final:
        obs = world.observe(status)
        first = step(ctx, status, obs, world.now, scorer=passing_scorer, config=CONFIG)
        replay = step(ctx, status, obs, world.now, scorer=passing_scorer, config=CONFIG)
        assert replay == first
        world.apply(first.actions)
        world.apply(replay.actions)  # a crash after executing, before persisting
        status = first.status
        if agent_waits(status, world):
            play_agent(world, "finish")
        world.now += timedelta(seconds=first.wait_seconds)
        steps += 1
    assert status.phase == TrialPhase.SUCCEEDED
    assert world.injected == ctx.inject_keys()
    assert len(world.injected) == len(set(world.injected))
    assert status.injections == 1
    assert steps > 10


def test_lost_gateway_session_is_published_again() -> None:
    world = FakeWorld()
    ctx = context()
    _, history = run(ctx, world)
    ready = next(s for s in history if s.phase == TrialPhase.READY)
    decision = step(ctx, ready, Observation(agent=None), ready.timeline[-1].time, config=CONFIG)
    assert decision.status == ready
    kinds = [type(a) for a in decision.actions]
    assert kinds == [OpenSession, MarkReady]
    mark = decision.actions[1]
    assert isinstance(mark, MarkReady) and ready.ready_at is not None
    assert mark.deadline == ready.ready_at + timedelta(seconds=600)


def test_final_phases_do_nothing() -> None:
    world = FakeWorld()
    final, _ = run(context(), world)
    decision = step(context(), final, Observation(), world.now)
    assert decision.status == final and decision.actions == [] and decision.done


def test_abort_removes_the_fault_marks_a_rebuild_and_names_the_owner() -> None:
    ctx = context()
    status = new_status(T0)
    decision = abort(ctx, status, T0, Reason.PLATFORM_ERROR, "KeyError: x")
    assert decision.status.phase == TrialPhase.ERRORED
    assert decision.status.message == "platform: KeyError: x"
    kinds = [type(a) for a in decision.actions]
    assert kinds == [RemoveFault] * len(ctx.inject_keys()) + [CloseSession, MarkForRebuild]
    env_abort = abort(ctx, status, T0, Reason.ENVIRONMENT_FAILURE, "unreachable")
    assert env_abort.status.message == "environment: unreachable"
    cancelled = abort(ctx, status, T0, Reason.CANCELLED, "the run was cancelled")
    assert cancelled.status.phase == TrialPhase.ERRORED
    assert cancelled.status.reason == "Cancelled"
    assert cancelled.status.message == "user: the run was cancelled"


@pytest.mark.parametrize(
    ("reason", "phase", "owner"),
    [
        ("TasksPassed", TrialPhase.SUCCEEDED, None),
        ("TasksFailed", TrialPhase.FAILED, "agent"),
        ("AgentTimeout", TrialPhase.FAILED, "agent"),
        ("FaultDidNotManifest", TrialPhase.ERRORED, "fault injection"),
        ("RecoveryFailed", TrialPhase.ERRORED, "environment"),
        ("Cancelled", TrialPhase.ERRORED, "user"),
        ("NoSuchReason", TrialPhase.ERRORED, "platform"),
    ],
)
def test_reasons_map_to_outcomes_with_owners(
    reason: str, phase: TrialPhase, owner: str | None
) -> None:
    assert trial_outcome(reason) == (phase, owner)


def test_unhealthy_lists_unready_workloads_and_firing_alerts() -> None:
    world = FakeWorld(noisy=True, broken_by_agent=True)
    problems = unhealthy(world.snapshot())
    assert problems == ["Deployment/cart 0/1 ready", "alerts firing: RequestLatencyHigh"]
    assert unhealthy(None) == ["no snapshot observed"]


def test_baseline_differences_catch_scaling_rules_and_flags() -> None:
    base = FakeWorld().snapshot().model_copy(update={"flags": {"cartFailure": "off"}})
    same = base.model_copy()
    assert baseline_differences(base, same) == []
    scaled = base.model_copy(
        update={
            "workloads": [
                WorkloadHealth(kind="Deployment", name="cart", desired_replicas=0, ready_replicas=0)
            ],
            "alert_rules_fingerprint": "tampered",
            "flags": {"cartFailure": "on"},
        }
    )
    diffs = baseline_differences(base, scaled)
    assert diffs == [
        "Deployment/cart replicas 0 != baseline 1",
        "alert rules differ from the baseline",
        "flags differ from the baseline: cartFailure",
    ]
    missing = base.model_copy(update={"workloads": []})
    assert baseline_differences(base, missing) == ["Deployment/cart is missing"]


def test_the_agent_knows_the_trial_by_an_id_that_names_neither_scenario_nor_run() -> None:
    ctx = context()
    assert ctx.session_id == context().session_id, "stable for one trial"
    assert ctx.scenario.name not in ctx.session_id and ctx.name not in ctx.session_id
    _, history = run(ctx, FakeWorld(), max_steps=500)
    ready = next(s for s in history if s.phase == TrialPhase.READY)
    decision = step(ctx, ready, Observation(agent=None), ready.timeline[-1].time, config=CONFIG)
    opened = next(a for a in decision.actions if isinstance(a, OpenSession))
    assert opened.trial_id == ctx.session_id
