"""What the runner works on: the trial's fixed facts, what the executor observes of it, the
reasons and owners a trial ends with, and the runner's timing constants."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from itbench.core.decoys import Decoy, decoys_for
from itbench.core.faults import get_fault
from itbench.core.models.agent_io import DiagnosisReport, MitigationReport, PostureReport
from itbench.core.models.base import Domain, TelemetryToggles
from itbench.core.models.compliance import ComplianceEvaluation
from itbench.core.models.observations import Alert, AlertInterval, EnvironmentSnapshot
from itbench.core.models.scenario import Scenario
from itbench.core.models.trial import AttemptedEscalation, TrialPhase, TrialSpec
from itbench.core.runner.actions import InjectFault


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
    AGENT_EXITED = "AgentExitedWithoutFinish"
    AGENT_CRASHED = "AgentCrashed"
    MODEL_UNAVAILABLE = "ModelUnavailable"
    AGENT_INDUCED_FAILURE = "AgentInducedFailure"
    DEADLINE_EXCEEDED = "DeadlineExceeded"
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
    MODEL_ENDPOINT = "model endpoint"


OUTCOMES: dict[Reason, tuple[TrialPhase, Owner | None]] = {
    Reason.TASKS_PASSED: (TrialPhase.SUCCEEDED, None),
    Reason.TASKS_FAILED: (TrialPhase.FAILED, Owner.AGENT),
    Reason.AGENT_TIMEOUT: (TrialPhase.FAILED, Owner.AGENT),
    Reason.AGENT_EXITED: (TrialPhase.FAILED, Owner.AGENT),
    Reason.AGENT_CRASHED: (TrialPhase.FAILED, Owner.AGENT),
    # The agent's model endpoint refused, failed or timed out: infrastructure, not the agent.
    Reason.MODEL_UNAVAILABLE: (TrialPhase.ERRORED, Owner.MODEL_ENDPOINT),
    # What the agent sent broke the environment: its failure, never out of the denominator.
    Reason.AGENT_INDUCED_FAILURE: (TrialPhase.FAILED, Owner.AGENT),
    # The trial held its worker past its deadline plus grace after the agent changed the
    # environment (the twin's limits bound the rest): the agent's, in the denominator. An
    # overrun without any change of the agent's is a PlatformError.
    Reason.DEADLINE_EXCEEDED: (TrialPhase.FAILED, Owner.AGENT),
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

AGENT_END_REASONS = frozenset(
    {Reason.AGENT_TIMEOUT, Reason.AGENT_EXITED, Reason.AGENT_CRASHED, Reason.MODEL_UNAVAILABLE}
)
"""Reasons the agent's turn can end with other than FINISHED; a trial keeps such a reason through
evaluation (its reports are still scored, for the record)."""


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


@functools.lru_cache(maxsize=4096)
def session_id_for(uid: str) -> str:
    """The id an agent knows a trial by: a digest of its uid, so that it names neither the
    scenario nor the run (trial names do). Remembered: the trial's steps ask for it often."""
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
        attempted_escalations: Actions refused as attempted privilege escalations.
        error: Why the agent's turn ended without FINISHED, if the runner saw it end so.
        error_reason: Which way it ended (AgentCrashed, AgentTimeout, AgentExitedWithoutFinish
            or ModelUnavailable).
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
    attempted_escalations: tuple[AttemptedEscalation, ...] = ()
    error: str = ""
    error_reason: Reason = Reason.AGENT_CRASHED


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
