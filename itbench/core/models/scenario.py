"""The Scenario kind: a catalog entry ⟨M, E, T, D⟩ with its faults and ground truth."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field, model_validator

from itbench.core.models.base import (
    ApiModel,
    ApiVersion,
    Complexity,
    Condition,
    Domain,
    ObjectMeta,
    TelemetryToggles,
)

FaultArgValue = int | str
"""Fault arguments are integers or strings on the wire; each fault's schema coerces them."""


class ScenarioEnvironment(ApiModel):
    """E: the testbed in which the problem occurs."""

    application: Literal["astronomy-shop"] = Field(
        default="astronomy-shop", description="The application under test."
    )
    namespace: str = Field(
        default="otel-demo", description="Namespace the application runs in.", min_length=1
    )
    telemetry: TelemetryToggles = Field(
        default_factory=TelemetryToggles,
        description="Which observability signals exist in this scenario (traces on/off ablation).",
    )
    technologies: list[str] = Field(
        default_factory=list,
        description="Technologies involved in the fault (e.g. nodejs, Java, Kubernetes); "
        "their count enters the complexity formula.",
    )


class ExpectedAlert(ApiModel):
    """T: an alert that must fire before the scenario counts as injected."""

    alertname: str = Field(description="The alertname label of the alert rule.", min_length=1)
    labels: dict[str, str] = Field(
        default_factory=dict,
        description="Labels the firing alert must carry (exact match), e.g. service_name.",
    )


class Triggers(ApiModel):
    """T: the triggering events the fault must raise."""

    alerts: list[ExpectedAlert] = Field(
        default_factory=list,
        description="Alerts that must all fire before the agent is told the scenario is ready. "
        "Empty for no-fault control scenarios and for CISO scenarios.",
    )
    timeout_seconds: int = Field(
        default=600,
        ge=1,
        le=7200,
        description="How long to wait for the alerts before the trial is Errored "
        "with reason FaultDidNotManifest.",
    )


class DesiredOutcome(ApiModel):
    """D: what counts as solving the scenario."""

    description: str = Field(default="", description="The desired outcome in words.")
    alerts_cleared: bool = Field(
        default=True, description="The triggering alerts must be cleared (SRE and FinOps)."
    )
    observation_window_seconds: int = Field(
        default=120,
        ge=0,
        le=3600,
        description="How long alerts must stay cleared and health stay at baseline to count.",
    )


class FaultSpec(ApiModel):
    """One fault to inject: a fault-library id and its arguments."""

    id: str = Field(description="Fault-library id, e.g. flagd.cart-failure.", min_length=1)
    args: dict[str, FaultArgValue] = Field(
        default_factory=dict,
        description="Arguments, validated against the fault's own schema "
        "(see `itbench faults list`).",
    )


class EntityKind(StrEnum):
    """Kinds of entity that ground truth and diagnoses may name."""

    SERVICE = "Service"
    DEPLOYMENT = "Deployment"
    STATEFUL_SET = "StatefulSet"
    REPLICA_SET = "ReplicaSet"
    POD = "Pod"
    NODE = "Node"
    CONFIG_MAP = "ConfigMap"
    SECRET = "Secret"
    NETWORK_POLICY = "NetworkPolicy"
    HPA = "HorizontalPodAutoscaler"
    NAMESPACE = "Namespace"
    FLAG = "Flag"
    ALERT_RULE = "AlertRule"
    NETWORK_CHAOS = "NetworkChaos"
    POD_CHAOS = "PodChaos"
    STRESS_CHAOS = "StressChaos"
    HTTP_CHAOS = "HTTPChaos"
    JVM_CHAOS = "JVMChaos"
    DAEMON_SET = "DaemonSet"
    RESOURCE_QUOTA = "ResourceQuota"
    PRIORITY_CLASS = "PriorityClass"
    PERSISTENT_VOLUME_CLAIM = "PersistentVolumeClaim"
    SCHEDULE = "Schedule"


INJECTOR_KINDS = frozenset(
    {"NetworkChaos", "PodChaos", "StressChaos", "HTTPChaos", "JVMChaos", "IOChaos", "Schedule"}
)
"""Kinds of the fault injector (Chaos Mesh): they exist for the platform only, never to an agent,
so ground truth naming them is not what a diagnosis is graded on."""


class FaultCategory(StrEnum):
    """What is wrong at a root cause, from a closed list (a diagnosis names one per root cause)."""

    BAD_IMAGE = "BadImage"
    """The container image cannot be pulled or cannot run (missing, wrong architecture)."""
    RESOURCE_LIMITS = "ResourceLimits"
    """CPU or memory limits or requests are too low for the workload."""
    BAD_CONFIGURATION = "BadConfiguration"
    """A wrong environment variable, command, argument or credential."""
    UNSCHEDULABLE = "Unschedulable"
    """Pods cannot be placed on a node."""
    BAD_PROBE = "BadProbe"
    """A health probe fails although the application works."""
    SCALED_DOWN = "ScaledDown"
    """Too few replicas (none) are asked for."""
    SERVICE_MISROUTED = "ServiceMisrouted"
    """A Service selects no or wrong pods, or targets a port nothing listens on."""
    TRAFFIC_BLOCKED = "TrafficBlocked"
    """A NetworkPolicy blocks traffic to the pods."""
    FEATURE_FLAG = "FeatureFlag"
    """A feature flag switches on faulty behaviour."""
    NETWORK_DEGRADED = "NetworkDegraded"
    """Latency, loss or a partition on the network path."""
    RESOURCE_STRESS = "ResourceStress"
    """Something inside the pods exhausts CPU or memory."""
    APPLICATION_FAILURE = "ApplicationFailure"
    """The application aborts, corrupts or wrongly answers requests."""
    PODS_DOWN = "PodsDown"
    """The pods run but serve nothing."""
    AUTOSCALING = "Autoscaling"
    """A HorizontalPodAutoscaler is misconfigured."""
    ALERTING_THRESHOLD = "AlertingThreshold"
    """An alert's threshold or budget is set wrong."""


class GroundTruthEntity(ApiModel):
    """An entity involved in the fault, named by kind and name, with accepted aliases."""

    id: str = Field(description="Local id used by propagation edges.", min_length=1)
    kind: EntityKind = Field(description="Kind of the entity.")
    name: str = Field(description="Name of the entity in the application namespace.", min_length=1)
    aliases: list[str] = Field(
        default_factory=list,
        description="Other names that identify the same fault location, as `Kind/name` "
        "with shell-style wildcards (e.g. `Pod/cart-*`, `Service/cart`).",
    )
    root_cause: bool = Field(default=False, description="Whether this entity is a root cause.")
    condition: str = Field(
        default="",
        description="The fault condition at this entity (e.g. `image does not exist`).",
    )
    category: FaultCategory | None = Field(
        default=None,
        description="What is wrong here, for a root cause (default: the category of the "
        "scenario's faults).",
    )


class PropagationEdge(ApiModel):
    """One step of the fault propagation chain."""

    source: str = Field(description="Ground-truth entity id the effect starts from.")
    target: str = Field(description="Ground-truth entity id the effect reaches.")
    condition: str = Field(default="", description="The condition at the source.")
    effect: str = Field(default="", description="The effect at the target.")


class MitigationStep(ApiModel):
    """One step of an accepted mitigation, as the gateway action that performs it."""

    action: Literal[
        "patch",
        "set-image",
        "set-resources",
        "scale",
        "rollout-undo",
        "rollout-restart",
        "delete",
        "apply",
        "set-flag",
        "set-env",
    ] = Field(description="The gateway action.")
    kind: EntityKind = Field(description="Kind of the target object.")
    name: str = Field(description="Name of the target object.", min_length=1)
    params: dict[str, FaultArgValue] = Field(
        default_factory=dict, description="Action parameters (e.g. image, replicas, flag, variant)."
    )
    patch: str = Field(
        default="", description="A JSON merge patch, for the `patch` action (JSON text)."
    )


class Mitigation(ApiModel):
    """An accepted way to resolve the scenario."""

    description: str = Field(description="The mitigation in words.", min_length=1)
    steps: list[MitigationStep] = Field(
        default_factory=list, description="The ordered gateway actions that perform it."
    )


class PostureResult(StrEnum):
    """The compliance posture of one control."""

    PASS = "pass"
    FAIL = "fail"


class ExpectedPosture(ApiModel):
    """CISO ground truth: the expected result of one control on one target."""

    control_id: str = Field(description="Control id, e.g. CIS 5.2.5.", min_length=1)
    target: str = Field(description="What the control is assessed on (`Kind/name` or host).")
    result: PostureResult = Field(description="Expected assessment: pass or fail.")


class FinOpsTarget(ApiModel):
    """FinOps ground truth: the optimal resource footprint after mitigation."""

    cpu_cores: float = Field(gt=0, description="Optimal total CPU request, in cores.")
    memory_bytes: int = Field(gt=0, description="Optimal total memory request, in bytes.")
    cost_per_hour: float = Field(gt=0, description="Optimal cost of the workload per hour.")
    efficiency: float = Field(
        default=1.0, gt=0, le=1, description="Optimal utilisation ratio (used / requested)."
    )


class GroundTruth(ApiModel):
    """What really happened: never shown to an agent."""

    entities: list[GroundTruthEntity] = Field(
        default_factory=list, description="Entities involved, root causes flagged."
    )
    propagation: list[PropagationEdge] = Field(
        default_factory=list, description="The fault propagation chain."
    )
    mitigations: list[Mitigation] = Field(
        default_factory=list, description="Accepted mitigations (any one resolves the scenario)."
    )
    posture: list[ExpectedPosture] = Field(
        default_factory=list, description="CISO: expected posture per control and target."
    )
    finops: FinOpsTarget | None = Field(
        default=None, description="FinOps: the optimal footprint after mitigation."
    )

    def root_causes(self) -> list[GroundTruthEntity]:
        """The root-cause entities."""
        return [e for e in self.entities if e.root_cause]

    def resolution_steps(self) -> int:
        """Steps of the shortest accepted mitigation (at least 1)."""
        counts = [len(m.steps) for m in self.mitigations if m.steps]
        return min(counts) if counts else 1

    def propagation_length(self) -> int:
        """Entities on the propagation chain (at least 1: the root cause alone)."""
        ids = {e.source for e in self.propagation} | {e.target for e in self.propagation}
        return max(len(ids), 1)

    @model_validator(mode="after")
    def _edges_name_entities(self) -> GroundTruth:
        ids = [e.id for e in self.entities]
        seen: set[str] = set()
        for i in ids:
            if i in seen:
                raise ValueError(f"entities: duplicate entity id {i!r}")
            seen.add(i)
        for n, edge in enumerate(self.propagation):
            for end in ("source", "target"):
                ref = getattr(edge, end)
                if ref not in seen:
                    raise ValueError(
                        f"propagation[{n}].{end}: {ref!r} is not an entity id "
                        f"(known: {', '.join(sorted(seen)) or 'none'})"
                    )
        return self


class Split(StrEnum):
    """Which instances of the catalog's templates a run draws.

    dev: the files as expanded with the run's public seed. test: each trial's instance drawn
    from a key derived from a secret no agent sees (HMAC of secret, scenario and attempt).
    """

    DEV = "dev"
    TEST = "test"


ParameterValue = int | str
"""A parameter's value: one of its choices, or an integer of its range."""


class ParameterRange(ApiModel):
    """An integer range of parameter values: min, min + step, ... up to max (inclusive)."""

    min: int = Field(description="The smallest value.")
    max: int = Field(description="The largest value (included when min + k * step reaches it).")
    step: int = Field(default=1, ge=1, description="Distance between consecutive values.")

    @model_validator(mode="after")
    def _ordered(self) -> ParameterRange:
        if self.max < self.min:
            raise ValueError(f"max: {self.max} is below min {self.min}")
        return self

    def values(self) -> list[int]:
        """Every value of the range, ascending."""
        return list(range(self.min, self.max + 1, self.step))


class ScenarioParameter(ApiModel):
    """A template parameter: a list of choices or an integer range, drawn by a seed.

    Strings of the spec use it as `${name}`; with attributes, `${name.attribute}` is the
    attribute's entry at the drawn choice's position.
    """

    description: str = Field(description="What the parameter varies, in words.", min_length=1)
    choices: list[ParameterValue] | None = Field(
        default=None,
        min_length=1,
        description="The values to draw from (integers or strings, each once).",
    )
    range: ParameterRange | None = Field(
        default=None, description="An integer range to draw from, instead of choices."
    )
    attributes: dict[str, list[ParameterValue]] = Field(
        default_factory=dict,
        description="Values that go with each choice, by attribute name: one list per "
        "attribute, as long as `choices` (e.g. the language of each workload).",
    )

    @model_validator(mode="after")
    def _one_source(self) -> ScenarioParameter:
        if (self.choices is None) == (self.range is None):
            raise ValueError("choices: give either choices or range, not both or neither")
        if self.range is not None and self.attributes:
            raise ValueError("attributes: only a parameter with choices can have attributes")
        return self


class ScenarioSpec(ApiModel):
    """Scenario spec: metadata M, environment E, triggers T, desired outcome D, faults, truth."""

    title: str = Field(default="", description="Short human title.")
    description: str = Field(description="What goes wrong, in words.", min_length=1)
    domain: Domain = Field(description="Persona: SRE, CISO or FinOps.")
    scenario_class: str = Field(
        alias="class",
        description="Scenario class, e.g. CacheFailure, HighCPU, CorruptImage, Kyverno, "
        "AutoscalerMisconfiguration, or NoFault for a control.",
        min_length=1,
    )
    complexity: Complexity | None = Field(
        default=None,
        description="Easy, Medium or Hard. For SRE computed from the ground truth (Eq. 6) when "
        "omitted.",
    )
    control: bool = Field(
        default=False,
        description="A no-fault control scenario: nothing is injected and nothing must fire.",
    )
    environment: ScenarioEnvironment = Field(
        default_factory=ScenarioEnvironment, description="E: the testbed."
    )
    triggers: Triggers = Field(default_factory=Triggers, description="T: triggering events.")
    desired_outcome: DesiredOutcome = Field(
        default_factory=DesiredOutcome, description="D: the desired outcome."
    )
    faults: list[FaultSpec] = Field(
        default_factory=list, description="Faults to inject, in order.", max_length=16
    )
    ground_truth: GroundTruth = Field(
        default_factory=GroundTruth, description="What really happened (hidden from agents)."
    )
    parameters: dict[str, ScenarioParameter] = Field(
        default_factory=dict,
        description="Template parameters by name; `${name}` in any string of the spec is "
        "replaced by the value a seed draws (see scenarios/README.md). Empty for a plain "
        "scenario, which is its own single instance.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> ScenarioSpec:
        if self.control:
            if self.faults:
                raise ValueError("faults: a control scenario must not inject faults")
            if self.triggers.alerts:
                raise ValueError("triggers.alerts: a control scenario expects no alerts")
        elif not self.faults and self.domain != Domain.CISO:
            raise ValueError("faults: at least one fault is required (or set control: true)")
        return self


class ScenarioPhase(StrEnum):
    """Lifecycle of a Scenario object."""

    PENDING = "Pending"
    READY = "Ready"
    INVALID = "Invalid"


class ScenarioStatus(ApiModel):
    """Observed state of a Scenario."""

    phase: ScenarioPhase = Field(
        default=ScenarioPhase.PENDING, description="Pending, Ready or Invalid."
    )
    complexity: Complexity | None = Field(
        default=None, description="The effective complexity (given or computed)."
    )
    complexity_score: float | None = Field(
        default=None, description="Eq. 6 score: cbrt(propagation length x steps x technologies)."
    )
    observed_generation: int | None = Field(
        default=None, description="The .metadata.generation last reconciled."
    )
    conditions: list[Condition] = Field(default_factory=list, description="Standard conditions.")


class Scenario(ApiModel):
    """A benchmark scenario (cluster-scoped)."""

    api_version: ApiVersion = Field(default="itbench.io/v1alpha1", description="API version.")
    kind: Literal["Scenario"] = Field(default="Scenario", description="Scenario")
    metadata: ObjectMeta = Field(description="Standard object metadata.")
    spec: ScenarioSpec = Field(description="The scenario definition.")
    status: ScenarioStatus | None = Field(default=None, description="Observed state.")

    @property
    def name(self) -> str:
        """The scenario's name."""
        return self.metadata.name
