"""The trial state machine: from Pending to Succeeded, Failed or Errored, as pure decisions.

`step` reads the trial's status and what the executor observed, and returns the next status with
idempotent actions (data) for an executor to carry out. It never reads a clock: time comes in.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Annotated, Literal, Protocol

from pydantic import Field

from itbench.core.decoys import Decoy, decoys_for
from itbench.core.faults import ObjectChange, get_fault
from itbench.core.models.agent_io import DiagnosisReport, MitigationReport, PostureReport
from itbench.core.models.base import (
    ApiModel,
    ConditionStatus,
    Domain,
    TelemetryToggles,
    set_condition,
)
from itbench.core.models.compliance import ComplianceEvaluation
from itbench.core.models.observations import Alert, AlertInterval, AlertState, EnvironmentSnapshot
from itbench.core.models.scenario import Scenario
from itbench.core.models.trial import (
    AgentOutput,
    TimelineEntry,
    TrialPhase,
    TrialScores,
    TrialSpec,
    TrialStatus,
)
from itbench.core.scoring.profile import DEFAULT_PROFILE, EvaluationProfile
from itbench.core.scoring.trial import TrialEvidence, grade_trial


class Reason(StrEnum):
    """Reasons the state machine records; final reasons decide the final phase."""

    CREATED = "Created"
    PROVISIONING = "ProvisioningEnvironment"
    BASELINE_TAKEN = "BaselineTaken"
    INJECTING = "InjectingFault"
    CONTROL = "ControlScenario"
    FAULT_INJECTED = "FaultInjected"
    AGENT_READY = "AgentMayStart"
    AGENT_STARTED = "AgentStarted"
    AGENT_FINISHED = "AgentFinished"
    AGENT_TIMEOUT = "AgentTimeout"
    AGENT_CRASHED = "AgentCrashed"
    AGENT_INDUCED_FAILURE = "AgentInducedFailure"
    TASKS_PASSED = "TasksPassed"
    TASKS_FAILED = "TasksFailed"
    FAULT_DID_NOT_MANIFEST = "FaultDidNotManifest"
    CONTROL_NOT_QUIET = "ControlNotQuiet"
    INJECTION_FAILED = "InjectionFailed"
    ENVIRONMENT_NOT_READY = "EnvironmentNotReady"
    ENVIRONMENT_FAILURE = "EnvironmentFailure"
    RECOVERY_FAILED = "RecoveryFailed"
    PLATFORM_ERROR = "PlatformError"
    CANCELLED = "Cancelled"


class Owner(StrEnum):
    """Who is responsible when a trial does not succeed."""

    AGENT = "agent"
    USER = "user"
    PLATFORM = "platform"
    ENVIRONMENT = "environment"
    FAULT_INJECTION = "fault injection"


OUTCOMES: dict[Reason, tuple[TrialPhase, Owner | None]] = {
    Reason.TASKS_PASSED: (TrialPhase.SUCCEEDED, None),
    Reason.TASKS_FAILED: (TrialPhase.FAILED, Owner.AGENT),
    Reason.AGENT_TIMEOUT: (TrialPhase.FAILED, Owner.AGENT),
    Reason.AGENT_CRASHED: (TrialPhase.FAILED, Owner.AGENT),
    # What the agent sent broke the environment: its failure, never out of the denominator.
    Reason.AGENT_INDUCED_FAILURE: (TrialPhase.FAILED, Owner.AGENT),
    Reason.FAULT_DID_NOT_MANIFEST: (TrialPhase.ERRORED, Owner.FAULT_INJECTION),
    Reason.INJECTION_FAILED: (TrialPhase.ERRORED, Owner.FAULT_INJECTION),
    Reason.CONTROL_NOT_QUIET: (TrialPhase.ERRORED, Owner.ENVIRONMENT),
    Reason.ENVIRONMENT_NOT_READY: (TrialPhase.ERRORED, Owner.ENVIRONMENT),
    Reason.ENVIRONMENT_FAILURE: (TrialPhase.ERRORED, Owner.ENVIRONMENT),
    Reason.RECOVERY_FAILED: (TrialPhase.ERRORED, Owner.ENVIRONMENT),
    Reason.PLATFORM_ERROR: (TrialPhase.ERRORED, Owner.PLATFORM),
    # The run was cancelled: the trial lands with the Errored ones, never blamed on the agent.
    Reason.CANCELLED: (TrialPhase.ERRORED, Owner.USER),
}
"""Final phase and owner of each reason that ends a trial."""

ALERTS_FIRING = "alerts firing: "
"""Prefix of the health problem that lists firing alerts."""

RESET_CONDITION = "EnvironmentReset"
"""Condition set once recovery has asked the environment to reset to its baseline."""


# ---- configuration ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RunnerConfig:
    """Timing constants of the state machine (seconds of environment time).

    Attributes:
        poll_seconds: How often to look again while waiting for something outside the runner.
        agent_poll_seconds: How often to look at the agent while it works (the embedded driver
            sets this to infinity: when its in-process agent returns, nothing else will happen).
        provision_timeout_seconds: How long the environment may take to become healthy.
        settle_seconds: Minimum time between provisioning and the baseline snapshot, so that
            traffic and metrics exist.
        control_window_seconds: How long a control scenario is watched for unexpected alerts.
        injection_timeout_seconds: How long injected keys may take to be confirmed.
        sample_count: Snapshots taken through the mitigation observation window (at least 1).
        reset_after_seconds: How long recovery waits for the baseline before resetting the
            environment (a reset undoes what the agent changed too).
        await_recovery: Whether a trial waits, after its faults are removed, until the
            environment is back at its baseline (Recovering), so the next trial finds it
            clean. False for an environment built for one trial and discarded after it (the
            embedded twin): its faults are removed and the trial ends at once.
    """

    poll_seconds: float = 15.0
    agent_poll_seconds: float = 15.0
    provision_timeout_seconds: float = 600.0
    settle_seconds: float = 30.0
    control_window_seconds: float = 60.0
    injection_timeout_seconds: float = 120.0
    sample_count: int = 4
    reset_after_seconds: float = 60.0
    await_recovery: bool = True


DEFAULT_CONFIG = RunnerConfig()


# ---- what the runner works on ----------------------------------------------------------------


@dataclass(frozen=True)
class TrialContext:
    """The fixed facts of a trial: identity, spec, scenario and agent.

    Attributes:
        uid: Unique id of the trial; every action key starts with it.
        name: The trial's name (the gateway session id).
        spec: The trial spec (timeouts, telemetry mask, oracle permission).
        scenario: The scenario being attempted (with its ground truth).
        agent_name: The agent working on it (sessions are published to this agent).
    """

    uid: str
    name: str
    spec: TrialSpec
    scenario: Scenario
    agent_name: str

    @property
    def namespace(self) -> str:
        """The application namespace of the scenario."""
        return self.scenario.spec.environment.namespace

    @property
    def session_id(self) -> str:
        """The id the agent knows the trial by (see `session_id_for`)."""
        return session_id_for(self.uid)

    def fault_keys(self) -> list[str]:
        """The idempotency keys of the scenario's fault injections, in order."""
        return [f"{self.uid}/inject/{i}" for i in range(len(self.scenario.spec.faults))]

    def decoys(self) -> list[Decoy]:
        """The trial's benign changes (drawn from its seed)."""
        return decoys_for(self.scenario, self.spec.seed)

    def injections(self) -> list[InjectFault]:
        """Every injection of the trial in order: decoys before the fault, the faults, decoys
        after it. Each is an idempotent action keyed by the trial's uid."""
        ns = self.namespace
        decoys = self.decoys()
        before = [
            InjectFault(key=f"{self.uid}/decoy/{i}", fault_id="decoy", changes=list(d.changes))
            for i, d in enumerate(decoys)
            if d.before_fault
        ]
        after = [
            InjectFault(key=f"{self.uid}/decoy/{i}", fault_id="decoy", changes=list(d.changes))
            for i, d in enumerate(decoys)
            if not d.before_fault
        ]
        faults = [
            InjectFault(key=key, fault_id=f.id, changes=get_fault(f.id).changes(f.args, ns))
            for key, f in zip(self.fault_keys(), self.scenario.spec.faults, strict=True)
        ]
        return [*before, *faults, *after]

    def inject_keys(self) -> list[str]:
        """The keys of every injection (decoys and faults), in the order they are applied.

        Computed without the faults' changes, so that a trial whose fault cannot be built can
        still be aborted and cleaned up.
        """
        decoys = self.decoys()
        before = [f"{self.uid}/decoy/{i}" for i, d in enumerate(decoys) if d.before_fault]
        after = [f"{self.uid}/decoy/{i}" for i, d in enumerate(decoys) if not d.before_fault]
        return [*before, *self.fault_keys(), *after]

    def agent_telemetry(self) -> TelemetryToggles:
        """Signals the agent may read: the scenario's, masked by the run."""
        return self.scenario.spec.environment.telemetry.masked_by(self.spec.telemetry)

    def alerts_timeout_seconds(self) -> float:
        """How long to wait for the triggering alerts."""
        if self.spec.timeouts.alerts_seconds is not None:
            return float(self.spec.timeouts.alerts_seconds)
        return float(self.scenario.spec.triggers.timeout_seconds)

    def window_seconds(self) -> float:
        """The mitigation observation window (0 for CISO, which has no mitigation task)."""
        if self.scenario.spec.domain == Domain.CISO:
            return 0.0
        return float(self.scenario.spec.desired_outcome.observation_window_seconds)


def session_id_for(uid: str) -> str:
    """The id an agent knows a trial by: a digest of its uid, so that it names neither the
    scenario nor the run (trial names do)."""
    return "trial-" + hashlib.sha256(uid.encode()).hexdigest()[:20]


class AgentProgressState(StrEnum):
    """Where the agent is in the run protocol (the gateway's session states)."""

    WAITING = "Waiting"
    READY = "Ready"
    STARTED = "Started"
    FINISHED = "Finished"
    CLOSED = "Closed"


@dataclass(frozen=True)
class AgentProgress:
    """What the agent has done so far, as the gateway session recorded it.

    Attributes:
        state: Protocol state.
        started_at: When it reported STARTED.
        finished_at: When it reported FINISHED.
        diagnosis: Its accepted diagnosis report.
        diagnosis_at: When the diagnosis was accepted.
        mitigation: Its accepted mitigation report.
        posture: Its accepted posture report.
        posture_at: When the posture report was accepted.
        compliance: The evaluation of its accepted CISO artefacts.
        compliance_at: When the artefacts were accepted.
        rejected_submissions: Submissions rejected by validation.
        error: Why the agent's process crashed, if it did.
    """

    state: AgentProgressState
    started_at: datetime | None = None
    finished_at: datetime | None = None
    diagnosis: DiagnosisReport | None = None
    diagnosis_at: datetime | None = None
    mitigation: MitigationReport | None = None
    posture: PostureReport | None = None
    posture_at: datetime | None = None
    compliance: ComplianceEvaluation | None = None
    compliance_at: datetime | None = None
    rejected_submissions: int = 0
    error: str = ""


@dataclass(frozen=True)
class Observation:
    """What the executor observed for one step (only what the current phase needs is filled).

    Attributes:
        snapshot: The environment's health now.
        alerts: Active alerts now.
        alert_history: Every firing interval since provisioning.
        injected: Keys the environment has ever applied.
        baseline: The stored baseline snapshot, once taken.
        samples: Stored observation-window snapshots by sample key.
        agent: The agent's progress, while a gateway session exists.
        topology_objects: Kubernetes objects of the application (for the topology).
        service_calls: The service call graph (for the topology).
    """

    snapshot: EnvironmentSnapshot | None = None
    alerts: Sequence[Alert] = ()
    alert_history: Sequence[AlertInterval] = ()
    injected: frozenset[str] = frozenset()
    baseline: EnvironmentSnapshot | None = None
    samples: dict[str, EnvironmentSnapshot] = field(default_factory=dict)
    agent: AgentProgress | None = None
    topology_objects: Sequence[dict[str, object]] = ()
    service_calls: Sequence[tuple[str, str]] = ()


class ObservationNeeds(StrEnum):
    """Which observation groups a phase reads, so executors gather only those."""

    SNAPSHOT = "snapshot"
    ALERTS = "alerts"
    INJECTED = "injected"
    EVIDENCE = "evidence"
    AGENT = "agent"
    TOPOLOGY = "topology"  # the scoring inputs: alert history and topology


PHASE_NEEDS: dict[TrialPhase, frozenset[ObservationNeeds]] = {
    TrialPhase.PENDING: frozenset(),
    TrialPhase.QUEUED: frozenset(),
    TrialPhase.PROVISIONING: frozenset({ObservationNeeds.SNAPSHOT, ObservationNeeds.EVIDENCE}),
    TrialPhase.INJECTING: frozenset({ObservationNeeds.INJECTED}),
    TrialPhase.AWAITING_ALERTS: frozenset({ObservationNeeds.ALERTS}),
    TrialPhase.READY: frozenset({ObservationNeeds.AGENT}),
    TrialPhase.AGENT_RUNNING: frozenset({ObservationNeeds.AGENT}),
    TrialPhase.EVALUATING: frozenset({ObservationNeeds.EVIDENCE, ObservationNeeds.TOPOLOGY}),
    TrialPhase.RECOVERING: frozenset({ObservationNeeds.SNAPSHOT, ObservationNeeds.EVIDENCE}),
    TrialPhase.SUCCEEDED: frozenset(),
    TrialPhase.FAILED: frozenset(),
    TrialPhase.ERRORED: frozenset(),
}
"""The observation groups each phase's step reads."""


# ---- actions ---------------------------------------------------------------------------------


class _Action(ApiModel):
    """What every action carries: the key that makes carrying it out twice change nothing."""

    key: str = Field(description="Idempotency key.")


class ProvisionEnvironment(_Action):
    """Bring the environment to its healthy baseline (idempotent)."""

    type: Literal["ProvisionEnvironment"] = Field(
        default="ProvisionEnvironment", description="Action type."
    )


class TakeBaseline(_Action):
    """Store the environment's snapshot as the trial's baseline (first write wins)."""

    type: Literal["TakeBaseline"] = Field(default="TakeBaseline", description="Action type.")


class InjectFault(_Action):
    """Apply one fault's changes under a key (the environment applies a key once)."""

    type: Literal["InjectFault"] = Field(default="InjectFault", description="Action type.")
    key: str = Field(description="Idempotency key: `<uid>/inject/<i>`.")
    fault_id: str = Field(description="Fault-library id.")
    changes: list[ObjectChange] = Field(description="The object changes to apply.")


class OpenSession(_Action):
    """Open the trial's gateway session (no-op when it is open)."""

    type: Literal["OpenSession"] = Field(default="OpenSession", description="Action type.")
    trial_id: str = Field(description="Session id (the trial name).")
    agent_name: str = Field(description="The agent the trial is published to.")
    telemetry: TelemetryToggles = Field(description="Signals the agent may read.")
    allow_oracle: bool = Field(description="Whether the oracle endpoint answers.")


class MarkReady(_Action):
    """Let the agent in, with its deadline (environment time)."""

    type: Literal["MarkReady"] = Field(default="MarkReady", description="Action type.")
    trial_id: str = Field(description="Session id.")
    deadline: datetime = Field(description="When the agent's time is up.")


class RecordTopology(_Action):
    """Store the application's objects and call graph as the agent finds them (first write
    wins): diagnoses are scored against the system as it was when the agent was let in."""

    type: Literal["RecordTopology"] = Field(default="RecordTopology", description="Action type.")
    kinds: list[str] = Field(description="Object kinds to record.")


class CloseSession(_Action):
    """Store the agent's output and audit trail, then revoke the session's token."""

    type: Literal["CloseSession"] = Field(default="CloseSession", description="Action type.")
    trial_id: str = Field(description="Session id.")


class CollectSample(_Action):
    """Store a snapshot of the environment under a sample key (first write wins)."""

    type: Literal["CollectSample"] = Field(default="CollectSample", description="Action type.")
    key: str = Field(description="Sample key: `<uid>/sample/<i>`.")


class RemoveFault(_Action):
    """Undo the changes injected under a key (no-op when nothing is there)."""

    type: Literal["RemoveFault"] = Field(default="RemoveFault", description="Action type.")
    key: str = Field(description="The injection key to remove.")


class ResetEnvironment(_Action):
    """Bring the environment back to its baseline, undoing the agent's changes too."""

    type: Literal["ResetEnvironment"] = Field(
        default="ResetEnvironment", description="Action type."
    )


class MarkForRebuild(_Action):
    """The environment could not be restored: take it out of service until rebuilt."""

    type: Literal["MarkForRebuild"] = Field(default="MarkForRebuild", description="Action type.")
    reason: str = Field(description="What was still different from the baseline.")


Action = Annotated[
    ProvisionEnvironment
    | TakeBaseline
    | InjectFault
    | OpenSession
    | MarkReady
    | RecordTopology
    | CloseSession
    | CollectSample
    | RemoveFault
    | ResetEnvironment
    | MarkForRebuild,
    Field(discriminator="type"),
]
"""Every effect the state machine asks for."""


@dataclass(frozen=True)
class Decision:
    """The result of one step.

    Attributes:
        status: The trial's next status (persist it after executing the actions).
        actions: Idempotent effects to carry out, in order.
        wait_seconds: How much environment time should pass before the next step
            (0: step again at once).
    """

    status: TrialStatus
    actions: list[Action] = field(default_factory=list)
    wait_seconds: float = 0.0

    @property
    def done(self) -> bool:
        """Whether the trial has reached a final phase."""
        return self.status.phase.final


# ---- scoring seam ----------------------------------------------------------------------------


@dataclass(frozen=True)
class EvaluationInput:
    """Everything the scorer may use; nothing the agent merely claims is trusted.

    Attributes:
        context: The trial.
        output: What the agent submitted.
        ready_at: When the agent was let in.
        agent_finished_at: When the agent finished (or its time ran out).
        baseline: The environment's snapshot before injection.
        samples: Snapshots through the observation window, in time order.
        alert_history: Every firing interval since provisioning.
        topology_objects: Kubernetes objects of the application.
        service_calls: The service call graph.
        window_seconds: The observation window.
    """

    context: TrialContext
    output: AgentOutput
    ready_at: datetime
    agent_finished_at: datetime
    baseline: EnvironmentSnapshot
    samples: list[EnvironmentSnapshot]
    alert_history: list[AlertInterval]
    topology_objects: list[dict[str, object]]
    service_calls: list[tuple[str, str]]
    window_seconds: float


class TrialScorer(Protocol):
    """Scores one trial and says whether its tasks passed."""

    def __call__(self, evaluation: EvaluationInput) -> tuple[TrialScores, list[str]]:
        """Return the scores and the names of the tasks that failed (empty when all passed)."""
        ...


# ---- the state machine -----------------------------------------------------------------------


def new_status(now: datetime) -> TrialStatus:
    """The status of a trial that has just been created."""
    return TrialStatus(
        phase=TrialPhase.PENDING,
        reason=Reason.CREATED,
        timeline=[TimelineEntry(phase=TrialPhase.PENDING, time=now, message="trial created")],
    )


def step(
    ctx: TrialContext,
    status: TrialStatus,
    obs: Observation,
    now: datetime,
    *,
    scorer: TrialScorer | None = None,
    config: RunnerConfig = DEFAULT_CONFIG,
) -> Decision:
    """Advance a trial by one step.

    Replaying a step with the same status and observation yields the same decision, and every
    action is keyed by the trial's uid and step, so an executor may replay after a crash.

    Args:
        ctx: The trial.
        status: Its current status.
        obs: What the executor observed (see `PHASE_NEEDS`).
        now: The environment's current time.
        scorer: Scores the trial in Evaluating (defaults to the scoring core's `score_trial`).
        config: Timing constants.

    Returns:
        The next status, the actions to execute, and how long to wait before the next step.
    """
    handler = _HANDLERS.get(status.phase)
    if handler is None:
        return Decision(status=status)
    return handler(ctx, status, obs, now, scorer or score_trial, config)


def abort(
    ctx: TrialContext, status: TrialStatus, now: datetime, reason: Reason, message: str
) -> Decision:
    """End a trial at once because the platform or the environment broke (owner in the message).

    The injected faults are removed and the environment marked for rebuild, best effort.

    Args:
        ctx: The trial.
        status: Its current status.
        now: The current time.
        reason: An Errored reason (EnvironmentFailure, PlatformError or Cancelled).
        message: What went wrong.
    """
    if status.phase.final:
        return Decision(status=status)
    phase, owner = OUTCOMES.get(reason, (TrialPhase.ERRORED, Owner.PLATFORM))
    text = f"{owner.value if owner else 'platform'}: {message}"
    actions: list[Action] = [RemoveFault(key=k) for k in reversed(ctx.inject_keys())]
    actions.append(CloseSession(key=f"{ctx.uid}/close", trial_id=ctx.session_id))
    actions.append(MarkForRebuild(key=f"{ctx.uid}/rebuild", reason=text))
    return Decision(status=_enter(status, phase, now, reason, text), actions=actions)


def trial_outcome(reason: str) -> tuple[TrialPhase, str | None]:
    """The final phase and owner a reason leads to (Errored, platform, for unknown reasons)."""
    try:
        phase, owner = OUTCOMES[Reason(reason)]
    except (ValueError, KeyError):
        return TrialPhase.ERRORED, Owner.PLATFORM.value
    return phase, owner.value if owner else None


_Handler = Callable[
    [TrialContext, TrialStatus, Observation, datetime, TrialScorer, RunnerConfig], Decision
]


def _pending(
    ctx: TrialContext,
    status: TrialStatus,
    obs: Observation,
    now: datetime,
    scorer: TrialScorer,
    config: RunnerConfig,
) -> Decision:
    return Decision(
        status=_enter(
            status, TrialPhase.PROVISIONING, now, Reason.PROVISIONING, "provisioning environment"
        ),
        actions=[ProvisionEnvironment(key=f"{ctx.uid}/provision")],
    )


def _provisioning(
    ctx: TrialContext,
    status: TrialStatus,
    obs: Observation,
    now: datetime,
    scorer: TrialScorer,
    config: RunnerConfig,
) -> Decision:
    elapsed = _elapsed(status, now)
    if obs.baseline is not None:
        if not ctx.inject_keys():
            return Decision(
                status=_enter(
                    status,
                    TrialPhase.AWAITING_ALERTS,
                    now,
                    Reason.CONTROL if ctx.scenario.spec.control else Reason.FAULT_INJECTED,
                    "nothing to inject",
                )
            )
        return _start_injecting(ctx, status, now)
    problems = unhealthy(obs.snapshot)
    if not problems and elapsed >= config.settle_seconds:
        return Decision(status=status, actions=[TakeBaseline(key=f"{ctx.uid}/baseline")])
    if elapsed >= config.provision_timeout_seconds:
        return _recover_then(
            ctx,
            status,
            now,
            Reason.ENVIRONMENT_NOT_READY,
            f"environment: not healthy after {elapsed:.0f} s: {'; '.join(problems)}",
            inject=False,
            config=config,
        )
    wait = config.settle_seconds - elapsed if not problems else config.poll_seconds
    return Decision(status=status, wait_seconds=max(wait, 0.0) or config.poll_seconds)


def _start_injecting(ctx: TrialContext, status: TrialStatus, now: datetime) -> Decision:
    actions: list[Action] = list(ctx.injections())
    ids = ", ".join(f.id for f in ctx.scenario.spec.faults) or "nothing"
    return Decision(
        status=_enter(status, TrialPhase.INJECTING, now, Reason.INJECTING, f"injecting {ids}"),
        actions=actions,
    )


def _injecting(
    ctx: TrialContext,
    status: TrialStatus,
    obs: Observation,
    now: datetime,
    scorer: TrialScorer,
    config: RunnerConfig,
) -> Decision:
    missing = [k for k in ctx.inject_keys() if k not in obs.injected]
    if not missing:
        if ctx.scenario.spec.control or not ctx.scenario.spec.faults:
            return Decision(
                status=_enter(
                    status,
                    TrialPhase.AWAITING_ALERTS,
                    now,
                    Reason.CONTROL if ctx.scenario.spec.control else Reason.FAULT_INJECTED,
                    "nothing to inject",
                )
            )
        entered = _enter(
            status,
            TrialPhase.AWAITING_ALERTS,
            now,
            Reason.FAULT_INJECTED,
            "fault injected; waiting for the triggering alerts",
        )
        return Decision(status=entered.model_copy(update={"injections": 1}))
    if _elapsed(status, now) >= config.injection_timeout_seconds:
        return _recover_then(
            ctx,
            status,
            now,
            Reason.INJECTION_FAILED,
            f"fault injection: not confirmed for {', '.join(missing)}",
            inject=True,
            config=config,
        )
    redo = _start_injecting(ctx, status, now).actions
    return Decision(
        status=status,
        actions=[a for a in redo if isinstance(a, InjectFault) and a.key in missing],
        wait_seconds=config.poll_seconds,
    )


def _awaiting_alerts(
    ctx: TrialContext,
    status: TrialStatus,
    obs: Observation,
    now: datetime,
    scorer: TrialScorer,
    config: RunnerConfig,
) -> Decision:
    elapsed = _elapsed(status, now)
    spec = ctx.scenario.spec
    firing = [a for a in obs.alerts if a.state == AlertState.FIRING]
    if spec.control:
        if firing:
            names = ", ".join(sorted({a.alertname for a in firing}))
            return _recover_then(
                ctx,
                status,
                now,
                Reason.CONTROL_NOT_QUIET,
                f"environment: alerts fired in a no-fault control: {names}",
                inject=True,
                config=config,
            )
        window = min(config.control_window_seconds, ctx.alerts_timeout_seconds())
        if elapsed < window:
            return Decision(status=status, wait_seconds=min(config.poll_seconds, window - elapsed))
        return _make_ready(ctx, status, now, "control window passed quietly")
    expected = spec.triggers.alerts
    pending = [e for e in expected if not any(a.matches(e.alertname, e.labels) for a in firing)]
    if not pending:
        names = ", ".join(e.alertname for e in expected) or "none expected"
        return _make_ready(ctx, status, now, f"triggering alerts firing: {names}")
    timeout = ctx.alerts_timeout_seconds()
    if elapsed >= timeout:
        names = ", ".join(e.alertname + (f"{e.labels}" if e.labels else "") for e in pending)
        return _recover_then(
            ctx,
            status,
            now,
            Reason.FAULT_DID_NOT_MANIFEST,
            f"fault injection: expected alerts did not fire within {timeout:.0f} s: {names}",
            inject=True,
            config=config,
        )
    return Decision(status=status, wait_seconds=min(config.poll_seconds, timeout - elapsed))


def _make_ready(ctx: TrialContext, status: TrialStatus, now: datetime, message: str) -> Decision:
    deadline = now + timedelta(seconds=ctx.spec.timeouts.agent_seconds)
    entered = _enter(status, TrialPhase.READY, now, Reason.AGENT_READY, message)
    topology = RecordTopology(key=f"{ctx.uid}/topology", kinds=topology_kinds(ctx.scenario))
    return Decision(
        status=entered.model_copy(update={"ready_at": now}),
        actions=[topology, *_session_actions(ctx, deadline)],
    )


TOPOLOGY_KINDS = (
    "Node",
    "Deployment",
    "StatefulSet",
    "ReplicaSet",
    "Pod",
    "Service",
    "ConfigMap",
    "Secret",
    "HorizontalPodAutoscaler",
    "NetworkPolicy",
)
"""Object kinds every topology records."""


INJECTOR_ENTITY_KINDS = frozenset(
    {"NetworkChaos", "PodChaos", "StressChaos", "HTTPChaos", "JVMChaos"}
)
"""Kinds of the fault injector: never part of what an agent can observe."""


def topology_kinds(scenario: Scenario) -> list[str]:
    """The kinds to record for a scenario's topology: the usual ones plus every kind its
    ground truth names, so that the truth's entities are nodes (never the injector's kinds)."""
    kinds = list(TOPOLOGY_KINDS)
    for entity in scenario.spec.ground_truth.entities:
        if entity.kind.value in INJECTOR_ENTITY_KINDS:
            continue
        if entity.kind.value not in kinds:
            kinds.append(entity.kind.value)
    return kinds


def _session_actions(ctx: TrialContext, deadline: datetime) -> list[Action]:
    return [
        OpenSession(
            key=f"{ctx.uid}/session",
            trial_id=ctx.session_id,
            agent_name=ctx.agent_name,
            telemetry=ctx.agent_telemetry(),
            allow_oracle=ctx.spec.allow_oracle,
        ),
        MarkReady(key=f"{ctx.uid}/ready", trial_id=ctx.session_id, deadline=deadline),
    ]


def _deadline(ctx: TrialContext, status: TrialStatus) -> datetime:
    ready_at = status.ready_at or status.timeline[-1].time
    return ready_at + timedelta(seconds=ctx.spec.timeouts.agent_seconds)


def _ready(
    ctx: TrialContext,
    status: TrialStatus,
    obs: Observation,
    now: datetime,
    scorer: TrialScorer,
    config: RunnerConfig,
) -> Decision:
    deadline = _deadline(ctx, status)
    agent = obs.agent
    if agent is None:
        # The session is gone (e.g. the gateway restarted): publish it again.
        return Decision(status=status, actions=_session_actions(ctx, deadline))
    if agent.error:
        return _to_evaluating(ctx, status, agent, now, Reason.AGENT_CRASHED, agent.error)
    if agent.state in (AgentProgressState.STARTED, AgentProgressState.FINISHED):
        started = agent.started_at or now
        entered = _enter(
            status, TrialPhase.AGENT_RUNNING, started, Reason.AGENT_STARTED, "agent started"
        )
        return Decision(status=entered.model_copy(update={"agent_started_at": started}))
    if now >= deadline:
        return _to_evaluating(
            ctx, status, agent, now, Reason.AGENT_TIMEOUT, "the agent never started"
        )
    remaining = (deadline - now).total_seconds()
    return Decision(status=status, wait_seconds=min(config.agent_poll_seconds, remaining))


def _agent_running(
    ctx: TrialContext,
    status: TrialStatus,
    obs: Observation,
    now: datetime,
    scorer: TrialScorer,
    config: RunnerConfig,
) -> Decision:
    deadline = _deadline(ctx, status)
    agent = obs.agent
    if agent is None:
        return Decision(status=status, actions=_session_actions(ctx, deadline))
    if agent.error:
        return _to_evaluating(ctx, status, agent, now, Reason.AGENT_CRASHED, agent.error)
    if agent.state == AgentProgressState.FINISHED:
        return _to_evaluating(ctx, status, agent, now, Reason.AGENT_FINISHED, "agent finished")
    if agent.state == AgentProgressState.CLOSED and now < deadline:
        return _to_evaluating(
            ctx,
            status,
            agent,
            now,
            Reason.AGENT_TIMEOUT,
            "the agent's session was closed before it finished",
        )
    if now >= deadline:
        limit = ctx.spec.timeouts.agent_seconds
        return _to_evaluating(
            ctx,
            status,
            agent,
            now,
            Reason.AGENT_TIMEOUT,
            f"the agent did not finish within its {limit} s limit",
        )
    remaining = (deadline - now).total_seconds()
    return Decision(status=status, wait_seconds=min(config.agent_poll_seconds, remaining))


def _to_evaluating(
    ctx: TrialContext,
    status: TrialStatus,
    agent: AgentProgress,
    now: datetime,
    reason: Reason,
    message: str,
) -> Decision:
    output = AgentOutput(
        diagnosis=agent.diagnosis,
        mitigation=agent.mitigation,
        posture=agent.posture,
        compliance=agent.compliance,
        compliance_submitted_at=agent.compliance_at,
        diagnosis_submitted_at=agent.diagnosis_at,
        rejected_submissions=agent.rejected_submissions,
    )
    finished = agent.finished_at if reason == Reason.AGENT_FINISHED and agent.finished_at else now
    timeline = list(status.timeline)
    if status.phase == TrialPhase.READY and agent.started_at is not None:
        timeline.append(
            TimelineEntry(
                phase=TrialPhase.AGENT_RUNNING, time=agent.started_at, message="agent started"
            )
        )
    base = status.model_copy(
        update={
            "timeline": timeline,
            "agent_output": output,
            "agent_started_at": status.agent_started_at or agent.started_at,
            "agent_finished_at": finished,
        }
    )
    return Decision(
        status=_enter(base, TrialPhase.EVALUATING, now, reason, message),
        actions=[CloseSession(key=f"{ctx.uid}/close", trial_id=ctx.session_id)],
    )


def sample_keys(ctx: TrialContext, config: RunnerConfig = DEFAULT_CONFIG) -> list[str]:
    """Keys of the observation-window samples of a trial, in time order."""
    count = max(config.sample_count, 1) + 1 if ctx.window_seconds() > 0 else 1
    return [f"{ctx.uid}/sample/{i}" for i in range(count)]


def _evaluating(
    ctx: TrialContext,
    status: TrialStatus,
    obs: Observation,
    now: datetime,
    scorer: TrialScorer,
    config: RunnerConfig,
) -> Decision:
    entered_at = status.timeline[-1].time
    elapsed = (now - entered_at).total_seconds()
    window = ctx.window_seconds()
    keys = sample_keys(ctx, config)
    interval = window / (len(keys) - 1) if len(keys) > 1 else 0.0
    due = len(keys) if interval == 0 else min(math.floor(elapsed / interval + 1e-9) + 1, len(keys))
    missing = [k for k in keys[:due] if k not in obs.samples]
    if missing:
        return Decision(status=status, actions=[CollectSample(key=k) for k in missing])
    if due < len(keys):
        next_at = due * interval
        return Decision(status=status, wait_seconds=max(next_at - elapsed, 0.0))
    if obs.baseline is None:
        return _recover_then(
            ctx,
            status,
            now,
            Reason.PLATFORM_ERROR,
            "platform: the baseline snapshot of this trial is missing",
            inject=True,
            config=config,
        )
    output = status.agent_output or AgentOutput()
    evaluation = EvaluationInput(
        context=ctx,
        output=output,
        ready_at=status.ready_at or entered_at,
        agent_finished_at=status.agent_finished_at or entered_at,
        baseline=obs.baseline,
        samples=[obs.samples[k] for k in keys],
        alert_history=list(obs.alert_history),
        topology_objects=list(obs.topology_objects),
        service_calls=list(obs.service_calls),
        window_seconds=window,
    )
    scores, failed = scorer(evaluation)
    mitigation = scores.mitigation
    cleared_at: datetime | None = None
    if mitigation is not None and mitigation.passed and mitigation.ttr_seconds is not None:
        cleared_at = evaluation.ready_at + timedelta(seconds=mitigation.ttr_seconds)
    scored = status.model_copy(update={"scores": scores, "alerts_cleared_at": cleared_at})
    if status.reason in (Reason.AGENT_TIMEOUT, Reason.AGENT_CRASHED):
        reason = Reason(status.reason)
        message = status.message
    elif failed:
        reason = Reason.TASKS_FAILED
        message = "failed: " + "; ".join(failed)
    else:
        reason = Reason.TASKS_PASSED
        message = "every task passed"
    return _recover_then(ctx, scored, now, reason, message, inject=True, config=config)


def _recover_then(
    ctx: TrialContext,
    status: TrialStatus,
    now: datetime,
    reason: Reason,
    message: str,
    *,
    inject: bool,
    config: RunnerConfig,
) -> Decision:
    if not inject:
        # Nothing was injected: the environment itself is at fault and is rebuilt.
        phase, _owner = trial_outcome(reason)
        return Decision(
            status=_enter(status, phase, now, reason, message),
            actions=[MarkForRebuild(key=f"{ctx.uid}/rebuild", reason=message)],
        )
    # Later injections recorded the state the earlier ones left, so undo them last-in first-out.
    actions: list[Action] = [RemoveFault(key=k) for k in reversed(ctx.inject_keys())]
    if status.phase in (TrialPhase.READY, TrialPhase.AGENT_RUNNING):
        actions.append(CloseSession(key=f"{ctx.uid}/close", trial_id=ctx.session_id))
    if not config.await_recovery:
        # The environment is discarded after this trial: nothing will run on it again.
        phase, owner = trial_outcome(reason)
        final = _final_message(message, owner)
        return Decision(status=_enter(status, phase, now, reason, final), actions=actions)
    return Decision(
        status=_enter(status, TrialPhase.RECOVERING, now, reason, message), actions=actions
    )


def _recovering(
    ctx: TrialContext,
    status: TrialStatus,
    obs: Observation,
    now: datetime,
    scorer: TrialScorer,
    config: RunnerConfig,
) -> Decision:
    elapsed = _elapsed(status, now)
    if obs.baseline is None:
        # Nothing was measured before injection, so only health can be checked.
        differences = unhealthy(obs.snapshot)
    else:
        differences = baseline_differences(obs.baseline, obs.snapshot)
    phase, owner = trial_outcome(status.reason)
    if not differences:
        return Decision(
            status=_enter(
                status, phase, now, Reason(status.reason), _final_message(status.message, owner)
            )
        )
    if elapsed >= ctx.spec.timeouts.recovery_seconds:
        text = f"environment: baseline not restored after {elapsed:.0f} s: " + "; ".join(
            differences
        )
        rebuild = MarkForRebuild(key=f"{ctx.uid}/rebuild", reason=text)
        if phase == TrialPhase.FAILED:
            # The agent already failed; an environment it left broken must not turn its
            # failure into an Errored trial that the report leaves out of the denominators.
            message = f"{_final_message(status.message, owner)}; {text}"
            return Decision(
                status=_enter(status, phase, now, Reason(status.reason), message),
                actions=[rebuild],
            )
        return Decision(
            status=_enter(status, TrialPhase.ERRORED, now, Reason.RECOVERY_FAILED, text),
            actions=[rebuild],
        )
    actions: list[Action] = []
    conditions = status.conditions
    reset_done = any(c.type == RESET_CONDITION for c in conditions)
    # Alerts clear by themselves once the fault is gone; only changed objects need a reset.
    changed = [d for d in differences if not d.startswith(ALERTS_FIRING)]
    if changed and elapsed >= config.reset_after_seconds and not reset_done:
        actions.append(ResetEnvironment(key=f"{ctx.uid}/reset"))
        conditions = set_condition(
            conditions,
            type=RESET_CONDITION,
            status=ConditionStatus.TRUE,
            reason="BaselineNotRestored",
            message="; ".join(changed),
            now=now,
        )
    remaining = ctx.spec.timeouts.recovery_seconds - elapsed
    return Decision(
        status=status.model_copy(update={"conditions": conditions}),
        actions=actions,
        wait_seconds=max(min(config.poll_seconds, remaining), 0.0) or config.poll_seconds,
    )


def _final_message(message: str, owner: str | None) -> str:
    if owner is None or message.startswith(f"{owner}:"):
        return message
    return f"{owner}: {message}"


_HANDLERS: dict[TrialPhase, _Handler] = {
    TrialPhase.PENDING: _pending,
    TrialPhase.QUEUED: _pending,
    TrialPhase.PROVISIONING: _provisioning,
    TrialPhase.INJECTING: _injecting,
    TrialPhase.AWAITING_ALERTS: _awaiting_alerts,
    TrialPhase.READY: _ready,
    TrialPhase.AGENT_RUNNING: _agent_running,
    TrialPhase.EVALUATING: _evaluating,
    TrialPhase.RECOVERING: _recovering,
}


# ---- health checks ---------------------------------------------------------------------------


def unhealthy(snapshot: EnvironmentSnapshot | None) -> list[str]:
    """Why an environment is not healthy (empty when every workload is ready and nothing fires).

    Args:
        snapshot: The environment's snapshot (None counts as not observed).
    """
    if snapshot is None:
        return ["no snapshot observed"]
    problems = [
        f"{w.kind}/{w.name} {w.ready_replicas}/{w.desired_replicas} ready"
        for w in snapshot.workloads
        if w.ready_replicas < w.desired_replicas
    ]
    if snapshot.firing_alerts:
        names = sorted({a.alertname for a in snapshot.firing_alerts})
        problems.append(f"{ALERTS_FIRING}{', '.join(names)}")
    return problems


def baseline_differences(
    baseline: EnvironmentSnapshot, current: EnvironmentSnapshot | None
) -> list[str]:
    """How the environment differs from its baseline (empty when restored).

    Args:
        baseline: The snapshot taken before injection.
        current: The snapshot now.
    """
    if current is None:
        return ["no snapshot observed"]
    out: list[str] = []
    for base in baseline.workloads:
        now_w = current.workload(base.name)
        if now_w is None:
            out.append(f"{base.kind}/{base.name} is missing")
            continue
        if now_w.desired_replicas != base.desired_replicas:
            out.append(
                f"{base.kind}/{base.name} replicas {now_w.desired_replicas} "
                f"!= baseline {base.desired_replicas}"
            )
        if now_w.ready_replicas < min(base.ready_replicas, now_w.desired_replicas):
            out.append(
                f"{base.kind}/{base.name} {now_w.ready_replicas}/{now_w.desired_replicas} ready"
            )
    was_firing = {(a.alertname, tuple(sorted(a.labels.items()))) for a in baseline.firing_alerts}
    new_alerts = sorted(
        {
            a.alertname
            for a in current.firing_alerts
            if (a.alertname, tuple(sorted(a.labels.items()))) not in was_firing
        }
    )
    if new_alerts:
        out.append(f"{ALERTS_FIRING}{', '.join(new_alerts)}")
    if current.alert_rules_fingerprint != baseline.alert_rules_fingerprint:
        out.append("alert rules differ from the baseline")
    changed = sorted(k for k, v in baseline.flags.items() if current.flags.get(k) != v)
    if changed:
        out.append(f"flags differ from the baseline: {', '.join(changed)}")
    return out


# ---- helpers of the machine ------------------------------------------------------------------


def _elapsed(status: TrialStatus, now: datetime) -> float:
    if not status.timeline:
        return 0.0
    return (now - status.timeline[-1].time).total_seconds()


def _enter(
    status: TrialStatus, phase: TrialPhase, now: datetime, reason: str, message: str
) -> TrialStatus:
    timeline = [*status.timeline, TimelineEntry(phase=phase, time=now, message=message)]
    return status.model_copy(
        update={"phase": phase, "reason": str(reason), "message": message, "timeline": timeline}
    )


# ---- the default scorer ----------------------------------------------------------------------


def score_trial(
    evaluation: EvaluationInput, profile: EvaluationProfile = DEFAULT_PROFILE
) -> tuple[TrialScores, list[str]]:
    """Score a trial with the scoring core (default evaluation profile).

    See `itbench.core.scoring.trial.grade_trial` for what each task needs.

    Args:
        evaluation: The trial's evidence and the agent's output.
        profile: The evaluation profile.

    Returns:
        The scores, and a description of each failed task (empty when every task passed).
    """
    ctx = evaluation.context
    return grade_trial(
        TrialEvidence(
            scenario=ctx.scenario,
            seed=ctx.spec.seed,
            output=evaluation.output,
            ready_at=evaluation.ready_at,
            agent_finished_at=evaluation.agent_finished_at,
            baseline=evaluation.baseline,
            samples=evaluation.samples,
            alert_history=evaluation.alert_history,
            topology_objects=evaluation.topology_objects,
            service_calls=evaluation.service_calls,
            window_seconds=evaluation.window_seconds,
        ),
        profile,
    )
