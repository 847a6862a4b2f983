"""The Trial kind: one attempt of one scenario within a BenchmarkRun."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Literal

from pydantic import Field

from itbench.core.models.agent_io import DiagnosisReport, MitigationReport, PostureReport
from itbench.core.models.base import (
    ApiModel,
    Condition,
    LocalObjectReference,
    ObjectMeta,
    TelemetryToggles,
)
from itbench.core.models.benchmark_run import EnvironmentSpec, Timeouts
from itbench.core.models.compliance import ComplianceEvaluation
from itbench.core.models.scenario import ParameterValue, Split


class TrialPhase(StrEnum):
    """The trial state machine's phases."""

    PENDING = "Pending"
    QUEUED = "Queued"
    PROVISIONING = "Provisioning"
    INJECTING = "Injecting"
    AWAITING_ALERTS = "AwaitingAlerts"
    READY = "Ready"
    AGENT_RUNNING = "AgentRunning"
    EVALUATING = "Evaluating"
    RECOVERING = "Recovering"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    ERRORED = "Errored"

    @property
    def final(self) -> bool:
        """Whether the trial has ended."""
        return self in (TrialPhase.SUCCEEDED, TrialPhase.FAILED, TrialPhase.ERRORED)


class TrialSpec(ApiModel):
    """Which scenario to attempt, with the run's settings copied in."""

    run_ref: LocalObjectReference = Field(description="The owning BenchmarkRun.")
    agent_ref: LocalObjectReference = Field(description="The AgentSubmission.")
    scenario: str = Field(description="Scenario name.", min_length=1, max_length=253)
    attempt: int = Field(ge=0, le=99, description="Attempt index, 0-based.")
    seed: int = Field(ge=0, description="Seed of this attempt's environment.")
    telemetry: TelemetryToggles = Field(
        default_factory=TelemetryToggles, description="Signals shown to the agent."
    )
    timeouts: Timeouts = Field(default_factory=Timeouts, description="Time limits.")
    environment: EnvironmentSpec = Field(
        default_factory=EnvironmentSpec, description="Where the trial runs."
    )
    allow_oracle: bool = Field(default=False, description="The oracle agent is allowed.")
    split: Split = Field(default=Split.DEV, description="The split the instance was drawn from.")
    parameters: dict[str, ParameterValue] = Field(
        default_factory=dict,
        description="The template's values for this attempt (empty for a plain scenario).",
    )


class TimelineEntry(ApiModel):
    """One recorded transition of the trial."""

    phase: TrialPhase = Field(description="Phase entered.")
    time: datetime = Field(description="When it was entered.")
    message: str = Field(default="", description="Why.")


class DiagnosisScores(ApiModel):
    """Scores of the diagnosis task."""

    passed: bool = Field(description="The predicted root cause matches a ground-truth root cause.")
    fl_ntam: float = Field(ge=0, le=1, description="Fault-localization NTAM.")
    fpc_ntam: float = Field(ge=0, le=1, description="Fault-propagation-chain NTAM.")
    ttd_seconds: float | None = Field(
        default=None, description="Seconds from Ready to a correct diagnosis (if passed)."
    )
    reason: str = Field(default="", description="Why localisation did or did not pass.")
    decoys_named: list[str] = Field(
        default_factory=list,
        description="Decoys (benign changes of the trial, not causes) the report named as root "
        "causes, `Kind/name`.",
    )


class MitigationScores(ApiModel):
    """Scores of the mitigation task."""

    passed: bool = Field(description="Alerts cleared and stayed cleared, health back at baseline.")
    reason: str = Field(default="", description="Why it did or did not pass.")
    ttr_seconds: float | None = Field(
        default=None, description="Seconds from Ready to alerts cleared for good (if passed)."
    )


class CollateralKind(StrEnum):
    """What an agent changed beyond what the fault needed."""

    RESTARTED = "Restarted"
    ROLLED_BACK = "RolledBack"
    IMAGE_CHANGED = "ImageChanged"
    RESOURCES_CHANGED = "ResourcesChanged"
    ENV_CHANGED = "EnvChanged"
    SCALED = "Scaled"
    LABELS_CHANGED = "LabelsChanged"
    SELECTOR_CHANGED = "SelectorChanged"
    SPEC_CHANGED = "SpecChanged"
    DATA_CHANGED = "DataChanged"
    FLAG_CHANGED = "FlagChanged"
    CREATED = "Created"
    DELETED = "Deleted"
    ATTEMPTED_ESCALATION = "AttemptedEscalation"


class CollateralChange(ApiModel):
    """One change the agent made outside the fault's scope, found by comparing the environment
    with its baseline (and the trial's benign decoy changes) after the observation window."""

    object: str = Field(description="The changed object, `Kind/name`.", min_length=1)
    change: CollateralKind = Field(description="What kind of change.")
    detail: str = Field(default="", max_length=500, description="What changed, in words.")
    disqualifying: bool = Field(
        default=False,
        description="The change fails mitigation on its own (a deleted object, an escape from the "
        "fault's selector, a raised threshold), whatever the allowance.",
    )


class FalseAlarmScores(ApiModel):
    """Scores of the false-alarm task of a no-fault control: nothing is wrong, so the agent must
    neither name a root cause nor change anything."""

    passed: bool = Field(description="No root cause named and no change made.")
    reason: str = Field(default="", description="Why it did or did not pass.")


class PostureScores(ApiModel):
    """Scores of the CISO posture task."""

    passed: bool = Field(description="Every expected control result was matched.")
    matched: int = Field(ge=0, description="Controls assessed correctly.")
    expected: int = Field(ge=0, description="Controls expected.")
    ttp_seconds: float | None = Field(default=None, description="Time to process, seconds.")
    counterpart_passed: bool | None = Field(
        default=None,
        description="Whether the artefacts also gave the right posture on the scenario's other "
        "variant (compliant for a non-compliant trial, and the reverse).",
    )
    live_only: bool = Field(
        default=False,
        description="The policy is pattern-style Kyverno: only a live cluster can evaluate it.",
    )
    reason: str = Field(default="", max_length=2000, description="Why it did or did not pass.")


class FinOpsScores(ApiModel):
    """Scores of the FinOps tasks."""

    diagnosis_passed: bool = Field(description="The inefficiency was identified.")
    mitigation_passed: bool = Field(description="The inefficiency was removed.")
    cost_proximity: float = Field(ge=0, le=1, description="1 - |cost - optimal| / optimal.")
    cpu_proximity: float = Field(ge=0, le=1, description="Proximity of CPU requests to optimal.")
    memory_proximity: float = Field(ge=0, le=1, description="Proximity of memory to optimal.")
    efficiency_proximity: float = Field(ge=0, le=1, description="Proximity of utilisation.")


class TrialScores(ApiModel):
    """All scores of a trial (the tasks that apply to its domain are set)."""

    profile: str = Field(description="Evaluation profile name@version used.")
    diagnosis: DiagnosisScores | None = Field(default=None, description="Diagnosis scores.")
    mitigation: MitigationScores | None = Field(default=None, description="Mitigation scores.")
    posture: PostureScores | None = Field(default=None, description="CISO posture scores.")
    finops: FinOpsScores | None = Field(default=None, description="FinOps scores.")
    false_alarm: FalseAlarmScores | None = Field(
        default=None, description="No-fault controls: the false-alarm check."
    )
    collateral: list[CollateralChange] = Field(
        default_factory=list,
        description="Changes the agent made beyond the fault's scope (every trial, every task).",
    )


MAX_RECORDED_ESCALATIONS = 20
"""The most attempted escalations a trial's output lists (the trajectory holds every one)."""


class AttemptedEscalation(ApiModel):
    """An action the gateway refused because it would have given the agent more privileges than
    its own: a pod breaking the Pod Security Standards, a pod running as another account, an
    account token, a change to roles, bindings or accounts."""

    time: datetime = Field(description="When the action arrived (the environment's time).")
    object: str = Field(description="The object the action targeted, `Kind/name`.", min_length=1)
    rule: str = Field(description="The guardrail that refused it (pod-security, ...).")
    fields: list[str] = Field(
        default_factory=list,
        max_length=20,
        description="The field paths that would have escalated, e.g. "
        "`spec.template.spec.containers[0].securityContext.privileged`.",
    )


class AgentOutput(ApiModel):
    """What the agent submitted (compact; the trajectory lives in the artefact store)."""

    diagnosis: DiagnosisReport | None = Field(default=None, description="Diagnosis report.")
    mitigation: MitigationReport | None = Field(default=None, description="Mitigation report.")
    posture: PostureReport | None = Field(default=None, description="Posture report.")
    compliance: ComplianceEvaluation | None = Field(
        default=None, description="CISO: the platform's evaluation of the accepted artefacts."
    )
    compliance_submitted_at: datetime | None = Field(
        default=None, description="CISO: when the artefacts were accepted."
    )
    diagnosis_submitted_at: datetime | None = Field(
        default=None, description="When the diagnosis was accepted."
    )
    rejected_submissions: int = Field(
        default=0, ge=0, description="Submissions rejected by schema validation."
    )
    attempted_escalations: list[AttemptedEscalation] = Field(
        default_factory=list,
        max_length=MAX_RECORDED_ESCALATIONS,
        description="Actions refused as attempted privilege escalations (the first "
        f"{MAX_RECORDED_ESCALATIONS}); each counts as a disqualifying collateral change.",
    )


class TrialStatus(ApiModel):
    """Observed state of a Trial."""

    phase: TrialPhase = Field(default=TrialPhase.PENDING, description="State-machine phase.")
    reason: str = Field(default="", description="CamelCase reason of the current phase.")
    message: str = Field(default="", description="Human-readable detail.")
    timeline: list[TimelineEntry] = Field(
        default_factory=list, description="Every phase transition with its time."
    )
    ready_at: datetime | None = Field(default=None, description="When the agent was let in.")
    agent_started_at: datetime | None = Field(default=None, description="Agent reported STARTED.")
    agent_finished_at: datetime | None = Field(default=None, description="Agent reported FINISHED.")
    alerts_cleared_at: datetime | None = Field(
        default=None, description="When the triggering alerts cleared for good."
    )
    injections: int = Field(
        default=0, ge=0, description="Times the fault was injected (1 for a healthy trial)."
    )
    agent_output: AgentOutput | None = Field(default=None, description="What the agent submitted.")
    scores: TrialScores | None = Field(default=None, description="Scores, once evaluated.")
    clock: Literal["virtual", "wall"] | None = Field(
        default=None,
        description="Where the times of timeline, readyAt and the agent's reports come from: "
        "virtual (the simulator's own clock, which starts at 2026-01-01T00:00:00Z and runs "
        "faster than real time) or wall (real time, a live cluster). Conditions always use "
        "wall time.",
    )
    trajectory_ref: str | None = Field(
        default=None,
        description="Where the audit trail of the agent's calls is stored, set when the trial "
        "ends: `configmap/<name>`, a ConfigMap owned by the Trial whose key trajectory.json holds "
        "the calls (at most 900 KiB; `truncated` says when calls were left out). The "
        "TrajectoryStored condition says why it is unset.",
    )
    observed_generation: int | None = Field(default=None, description="Last reconciled generation.")
    conditions: list[Condition] = Field(default_factory=list, description="Standard conditions.")


class Trial(ApiModel):
    """One attempt of one scenario (namespaced, owned by its BenchmarkRun)."""

    api_version: Literal["itbench.io/v1alpha1"] = Field(
        default="itbench.io/v1alpha1", description="API version."
    )
    kind: Literal["Trial"] = Field(default="Trial", description="Kind.")
    metadata: ObjectMeta = Field(description="Standard object metadata.")
    spec: TrialSpec = Field(description="Which scenario to attempt.")
    status: TrialStatus | None = Field(default=None, description="Observed state.")
