"""The BenchmarkRun kind: one agent over a set of scenarios, k trials each."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field, model_validator

from itbench.core.models.base import (
    ApiModel,
    Complexity,
    Condition,
    Domain,
    LocalObjectReference,
    ObjectMeta,
    TelemetryToggles,
)
from itbench.core.models.scenario import Split


class ScenarioSelector(ApiModel):
    """Select scenarios by their metadata; empty lists match everything."""

    domains: list[Domain] = Field(
        default_factory=list, max_length=10, description="Domains to include."
    )
    classes: list[Annotated[str, Field(min_length=1, max_length=128)]] = Field(
        default_factory=list, max_length=100, description="Scenario classes to include."
    )
    complexities: list[Complexity] = Field(
        default_factory=list, max_length=10, description="Complexities to include."
    )
    include_controls: bool = Field(default=True, description="Include no-fault control scenarios.")


class Sample(ApiModel):
    """Draw a seeded random sample of the selected scenarios."""

    size: int = Field(ge=1, le=10000, description="How many scenarios to draw.")
    seed: int = Field(default=0, ge=0, description="Seed of the draw.")


class ScenarioSelection(ApiModel):
    """Which scenarios a run covers: explicit names or a selector, optionally sampled."""

    # Bounded so the API server's CEL cost estimate of the spec-frozen rule stays in budget.
    names: list[Annotated[str, Field(min_length=1, max_length=253)]] = Field(
        default_factory=list, max_length=1000, description="Explicit scenario names."
    )
    selector: ScenarioSelector | None = Field(
        default=None, description="Select by domain, class and complexity."
    )
    sample: Sample | None = Field(default=None, description="Optional seeded random sample.")

    @model_validator(mode="after")
    def _one_of(self) -> ScenarioSelection:
        if bool(self.names) == (self.selector is not None):
            raise ValueError("scenarios: set exactly one of names or selector")
        return self


class Timeouts(ApiModel):
    """Time limits of each trial, in seconds."""

    agent_seconds: int = Field(
        default=900, ge=1, le=86400, description="How long the agent may work on one trial."
    )
    alerts_seconds: int | None = Field(
        default=None,
        ge=1,
        le=7200,
        description="Override of the scenario's wait for its triggering alerts.",
    )
    recovery_seconds: int = Field(
        default=600, ge=1, le=7200, description="How long recovery may take before Errored."
    )


class EnvironmentType(StrEnum):
    """Where trials run."""

    SIMULATOR = "simulator"
    CLUSTER = "cluster"


class Execution(StrEnum):
    """Where the operator runs a simulator trial."""

    PROCESS = "process"
    JOB = "job"


class EnvironmentSpec(ApiModel):
    """The environment to run trials in."""

    type: EnvironmentType = Field(
        default=EnvironmentType.SIMULATOR,
        description="simulator (the embedded digital twin) or cluster (a live cluster).",
    )
    execution: Execution = Field(
        default=Execution.PROCESS,
        description="For type simulator: process runs each trial in the operator's own process "
        "(small runs); job runs each trial in a Kubernetes Job of its own, in the Trial's "
        "namespace, which writes the results back to the Trial, so trials run in parallel "
        "across the cluster's nodes. Jobs run built-in and command agents; image and external "
        "agents need process.",
    )
    capacity: int | None = Field(
        default=None,
        ge=1,
        le=64,
        description="Trials the environment can host at once. Unset: the simulator hosts as many "
        "as spec.concurrency asks for, a live cluster one (it hosts one per application copy). "
        "On a cluster (each of kubeconfigSecretRefs) every trial leases one of its slots, shared "
        "by every run that targets the same API server.",
    )

    kubeconfig_secret_ref: LocalObjectReference | None = Field(
        default=None,
        description="For type cluster: a Secret in the run's namespace whose key kubeconfig holds "
        "the target cluster's kubeconfig. Unset (and no kubeconfigSecretRefs): the operator's own "
        "cluster.",
    )
    kubeconfig_secret_refs: list[LocalObjectReference] | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        description="For type cluster: several target clusters, one kubeconfig Secret each (key "
        "kubeconfig, in the run's namespace); each trial leases a free slot on any of them, so "
        "the run hosts capacity trials per cluster at once. Not together with "
        "kubeconfigSecretRef.",
    )

    @model_validator(mode="after")
    def _one_way_to_name_clusters(self) -> EnvironmentSpec:
        if self.kubeconfig_secret_ref is not None and self.kubeconfig_secret_refs is not None:
            raise ValueError(
                "spec.environment.kubeconfigSecretRefs and spec.environment.kubeconfigSecretRef "
                "are both set; name one cluster with kubeconfigSecretRef or several with "
                "kubeconfigSecretRefs"
            )
        names = [ref.name for ref in self.kubeconfig_secret_refs or []]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(
                f"spec.environment.kubeconfigSecretRefs names Secret(s) {', '.join(repeated)} "
                "more than once"
            )
        return self

    def secret_names(self) -> list[str]:
        """The kubeconfig Secrets of the target clusters, in order (empty: the operator's own)."""
        if self.kubeconfig_secret_refs is not None:
            return [ref.name for ref in self.kubeconfig_secret_refs]
        return [self.kubeconfig_secret_ref.name] if self.kubeconfig_secret_ref is not None else []

    def slots(self, concurrency: int) -> int:
        """Trials that may run at once under a run's concurrency (on several clusters, each
        hosts `capacity` of them)."""
        if self.type == EnvironmentType.SIMULATOR:
            return min(concurrency, self.capacity) if self.capacity is not None else concurrency
        clusters = max(len(self.secret_names()), 1)
        return min(concurrency, (self.capacity or 1) * clusters)

    @model_validator(mode="after")
    def _job_on_simulator(self) -> EnvironmentSpec:
        if self.execution == Execution.JOB and self.type != EnvironmentType.SIMULATOR:
            raise ValueError(
                "spec.environment.execution: job runs simulator trials only; set type: simulator "
                "or execution: process"
            )
        return self


class SeedSecretReference(ApiModel):
    """A key of a Secret in the run's namespace holding the test split's seed secret."""

    name: str = Field(description="Secret name.", min_length=1, max_length=253)
    key: str = Field(default="seed", description="Key of the secret in the Secret.", min_length=1)


class BenchmarkRunSpec(ApiModel):
    """What to benchmark and how."""

    agent_ref: LocalObjectReference = Field(
        description="The AgentSubmission (same namespace) to benchmark."
    )
    scenarios: ScenarioSelection = Field(description="Which scenarios to run.")
    trials_per_scenario: int = Field(
        default=3, ge=1, le=100, description="Trials per scenario (the paper uses 10)."
    )
    seed: int = Field(default=42, ge=0, description="Seed for the environment and sampling.")
    split: Split = Field(
        default=Split.DEV,
        description="dev: templates expanded with the seed (what `itbench scenarios expand` "
        "shows); test: each trial's instance drawn from the seed secret, which no agent sees.",
    )
    seed_secret_ref: SeedSecretReference | None = Field(
        default=None,
        description="For the test split: the Secret (same namespace) holding the seed secret "
        "(at least 16 characters).",
    )
    timeouts: Timeouts = Field(default_factory=Timeouts, description="Time limits.")
    telemetry: TelemetryToggles = Field(
        default_factory=TelemetryToggles,
        description="Telemetry mask: signals set to false are hidden from the agent "
        "(e.g. traces: false for the traces-off ablation).",
    )
    environment: EnvironmentSpec = Field(
        default_factory=EnvironmentSpec, description="Where trials run."
    )
    concurrency: int = Field(
        default=1,
        ge=1,
        le=64,
        description="Trials running at once (bounded by environment.capacity when set).",
    )
    allow_oracle: bool = Field(
        default=False,
        description="Allow the oracle agent, which reads the ground truth (grader checks only).",
    )
    cancel: bool = Field(
        default=False,
        description="Set to true to cancel: no new trials start and running ones are recovered.",
    )

    @model_validator(mode="after")
    def _split_secret(self) -> BenchmarkRunSpec:
        if self.split == Split.TEST and self.seed_secret_ref is None:
            raise ValueError("split: test needs spec.seedSecretRef (a Secret with the secret)")
        return self


class RunPhase(StrEnum):
    """Lifecycle of a BenchmarkRun.

    Every final phase but Cancelled means all trials finished; they differ in what the agent did:
    Succeeded (it passed at least one trial), Failed (it passed none and failed at least one),
    Errored (the platform could run none of its trials).
    """

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    ERRORED = "Errored"
    CANCELLED = "Cancelled"
    INVALID = "Invalid"

    @property
    def final(self) -> bool:
        """Whether the run has ended (Invalid runs may still be fixed)."""
        return self in (RunPhase.SUCCEEDED, RunPhase.FAILED, RunPhase.ERRORED, RunPhase.CANCELLED)


class RunSummary(ApiModel):
    """The report's headline numbers, rounded for display (fractions in [0, 1] to 4 decimals,
    times in seconds to 0.1 s); the report in status.reportRef keeps full precision."""

    domain: Domain | None = Field(
        default=None, description="The persona of the run's agent; the pass@1 fields are its tasks."
    )
    diagnosis_pass_at_1: float | None = Field(
        default=None, description="Diagnosis pass@1 of the run's persona (SRE or FinOps)."
    )
    mitigation_pass_at_1: float | None = Field(
        default=None, description="Mitigation pass@1 of the run's persona (SRE or FinOps)."
    )
    fl_ntam: float | None = Field(default=None, description="SRE: mean fault-localization NTAM.")
    fpc_ntam: float | None = Field(default=None, description="SRE: mean propagation-chain NTAM.")
    mttd_seconds: float | None = Field(default=None, description="SRE: mean time to diagnosis.")
    mttr_seconds: float | None = Field(default=None, description="SRE: mean time to repair.")
    cost_proximity: float | None = Field(
        default=None, description="FinOps: mean proximity to the optimal cost (1 = optimal)."
    )
    efficiency_proximity: float | None = Field(
        default=None, description="FinOps: mean proximity to the optimal utilisation."
    )
    resolution_rate: float | None = Field(
        default=None, description="End-to-end resolution rate of the agent's persona."
    )
    succeeded: int = Field(default=0, ge=0, description="Trials that succeeded.")
    failed: int = Field(default=0, ge=0, description="Trials the agent failed.")
    errored: int = Field(default=0, ge=0, description="Trials the platform could not run.")


class BenchmarkRunStatus(ApiModel):
    """Observed state of a BenchmarkRun."""

    phase: RunPhase = Field(default=RunPhase.PENDING, description="Lifecycle phase.")
    progress: str = Field(default="0/0", description="Finished trials / total trials.")
    total_trials: int = Field(default=0, ge=0, description="Trials in the run.")
    finished_trials: int = Field(default=0, ge=0, description="Trials that reached a final phase.")
    running_trials: int = Field(default=0, ge=0, description="Trials in progress.")
    queued_trials: int = Field(default=0, ge=0, description="Trials waiting for capacity.")
    scenarios: list[str] = Field(default_factory=list, description="The resolved scenario names.")
    summary: RunSummary = Field(default_factory=RunSummary, description="Headline scores.")
    report_ref: str | None = Field(
        default=None,
        description="Where the full report is stored, set when the run ends: `configmap/<name>`, "
        "a ConfigMap owned by the run with report.json, trials.jsonl and report.html (at most "
        "900 KiB; notes.txt names what was gzip-compressed into binaryData or left out).",
    )
    started_at: str | None = Field(
        default=None, description="When the first trial started (wall clock, RFC 3339)."
    )
    finished_at: str | None = Field(
        default=None, description="When the last trial finished (wall clock, RFC 3339)."
    )
    accepted_spec: BenchmarkRunSpec | None = Field(
        default=None,
        description="The spec the run started with. Later changes other than spec.cancel are "
        "refused whole (condition SpecAccepted=False) and the run goes on with this spec.",
    )
    observed_generation: int | None = Field(default=None, description="Last reconciled generation.")
    conditions: list[Condition] = Field(default_factory=list, description="Standard conditions.")


class BenchmarkRun(ApiModel):
    """A benchmark of one agent (namespaced)."""

    api_version: Literal["itbench.io/v1alpha1"] = Field(
        default="itbench.io/v1alpha1", description="API version."
    )
    kind: Literal["BenchmarkRun"] = Field(default="BenchmarkRun", description="Kind.")
    metadata: ObjectMeta = Field(description="Standard object metadata.")
    spec: BenchmarkRunSpec = Field(description="What to benchmark.")
    status: BenchmarkRunStatus | None = Field(default=None, description="Observed state.")
