"""The versioned benchmark report and the stored trial record it is computed from.

A report is a pure function of trial records and an evaluation profile, so any stored run can
be re-scored later (`itbench report recompute`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from pydantic import Field, field_validator

from itbench.core.models.agent_record import AgentInfo, AgentUsage, ModelUsage
from itbench.core.models.base import ApiModel, Complexity, Domain
from itbench.core.models.scenario import ParameterValue, Split
from itbench.core.models.trial import CollateralChange, TrialPhase, TrialScores

REPORT_SCHEMA_VERSION = "itbench.io/report/v2"
"""The report schema version; bumped on any incompatible change. v2: one result per agent,
pooled top-level numbers only for one agent or when asked for, controls scored on their own
false-alarm task, lower bounds with Errored trials counted as failures."""

COMPARISON_SCHEMA_VERSION = "itbench.io/comparison/v1"
"""The schema version of a comparison of two runs."""


class TrialRecord(ApiModel):
    """One finished trial as stored for scoring and re-scoring."""

    trial: str = Field(description="Trial object name.", min_length=1)
    run: str = Field(description="BenchmarkRun name.", min_length=1)
    scenario: str = Field(description="Scenario name.", min_length=1)
    attempt: int = Field(ge=0, description="Attempt index, 0-based.")
    domain: Domain = Field(description="SRE, CISO or FinOps.")
    scenario_class: str = Field(description="Scenario class, e.g. CacheFailure.", min_length=1)
    complexity: Complexity | None = Field(default=None, description="Easy, Medium or Hard.")
    traces_enabled: bool = Field(default=True, description="Traces were shown to the agent.")
    phase: TrialPhase = Field(description="Final phase: Succeeded, Failed or Errored.")
    reason: str = Field(default="", description="CamelCase reason of the final phase.")
    scores: TrialScores | None = Field(default=None, description="Scores, if evaluated.")
    agent: str = Field(description="AgentSubmission name.", min_length=1)
    tasks: list[str] = Field(
        default_factory=list,
        description="Keys of the tasks this trial is scored on (e.g. sre.diagnosis, "
        "sre.mitigation, sre.false-alarm); empty in records that predate it, meaning every task "
        "of the domain.",
    )
    split: Split = Field(
        default=Split.DEV,
        description="dev (the scenario files as expanded with the run's public seed) or test "
        "(each instance drawn from a key derived from a seed secret).",
    )
    parameters: dict[str, ParameterValue] = Field(
        default_factory=dict,
        description="The parameter values of the scenario instance (empty for a plain scenario).",
    )
    catalog_digest: str = Field(
        default="",
        description="Digest of the catalog the scenario came from: sha256 of the canonical JSON "
        "of every scenario file, sorted (empty when not recorded).",
    )
    agent_info: AgentInfo | None = Field(
        default=None,
        description="The agent as the run recorded it: name, version, runtime, what ran and "
        "its arguments (None in records that predate it).",
    )
    usage: ModelUsage | None = Field(
        default=None,
        description="Model calls, tokens, model latency and estimated cost of the trial, from "
        "the trajectory the agent reported (None: it reported none).",
    )
    cluster: str = Field(
        default="",
        description="The live cluster that ran the trial: where it was registered (the "
        "kubeconfig Secret `namespace/name`, or the operator's own cluster) and its API server "
        "URL in parentheses; empty for simulator trials and in records that predate it.",
        max_length=600,
    )

    @field_validator("phase")
    @classmethod
    def _final(cls, phase: TrialPhase) -> TrialPhase:
        if not phase.final:
            raise ValueError(f"a trial record needs a final phase, got {phase.value}")
        return phase


class Estimate(ApiModel):
    """A mean across scenarios with its standard error."""

    mean: float | None = Field(default=None, description="Mean (None without data).")
    stderr: float | None = Field(
        default=None, description="Standard error of the mean (None with fewer than 2 scenarios)."
    )
    scenarios: int = Field(default=0, ge=0, description="Scenarios the mean is over.")


class PassAtK(ApiModel):
    """pass@k of one task for one k."""

    k: int = Field(ge=1, description="Trials drawn.")
    label: str = Field(description="What the number measures, in words.")
    estimate: Estimate = Field(description="Mean and standard error across scenarios.")


class TaskMetric(ApiModel):
    """The pass rates of one task (e.g. SRE diagnosis)."""

    key: str = Field(description="Stable key, e.g. sre.diagnosis.")
    label: str = Field(description="What pass@1 of this task measures, in words.")
    domain: Domain = Field(description="The persona the task belongs to.")
    trials: int = Field(ge=0, description="Trials counted (Errored trials excluded).")
    passed: int = Field(ge=0, description="Trials that passed the task.")
    scenarios: int = Field(ge=0, description="Scenarios counted.")
    pass_at_k: list[PassAtK] = Field(default_factory=list, description="pass@k for k = 1..n.")
    errored: int = Field(
        default=0, ge=0, description="Errored trials scored on this task (left out of pass@k)."
    )
    lower_bound: Estimate = Field(
        default_factory=Estimate,
        description="pass@1 with Errored trials counted as failures (a lower bound); scenarios "
        "whose trials all errored count as 0.",
    )
    lower_bound_differs: bool = Field(
        default=False, description="The lower bound differs from pass@1 (Errored trials matter)."
    )
    failures: dict[str, int] = Field(
        default_factory=dict,
        description="Counted trials that did not pass the task, by reason: the trial's reason "
        "when the agent's turn ended badly (AgentTimeout, AgentExitedWithoutFinish, "
        "AgentCrashed, AgentInducedFailure), else the first check of the task that failed "
        "(e.g. WrongCategory, AlertsFiring); docs/metrics.md lists them.",
    )
    errored_reasons: dict[str, int] = Field(
        default_factory=dict,
        description="Errored trials scored on this task, by reason (left out of pass@k; e.g. "
        "ModelUnavailable, InjectionFailed).",
    )


class MeanMetric(ApiModel):
    """A mean score (NTAM, proximity) across scenarios."""

    key: str = Field(description="Stable key, e.g. sre.fl_ntam.")
    label: str = Field(description="What the number measures, in words.")
    domain: Domain = Field(description="The persona the score belongs to.")
    estimate: Estimate = Field(description="Mean of per-scenario means, with standard error.")
    trials: int = Field(ge=0, description="Trials counted.")


class TimingMetric(ApiModel):
    """A mean time over successful trials (MTTD, MTTR, TTP)."""

    key: str = Field(description="Stable key, e.g. sre.mttd.")
    label: str = Field(description="What the number measures, in words.")
    domain: Domain = Field(description="The persona the time belongs to.")
    mean_seconds: float | None = Field(
        default=None, description="Mean over successful trials; None (infinite) without any."
    )
    successes: int = Field(ge=0, description="Successful trials the mean is over.")
    trials: int = Field(ge=0, description="Trials counted.")


class ResolutionRate(ApiModel):
    """One consistently defined end-to-end resolution rate per persona."""

    domain: Domain = Field(description="The persona.")
    label: str = Field(description="The definition in words.")
    estimate: Estimate = Field(description="Mean per-scenario share of resolved trials.")
    trials: int = Field(ge=0, description="Trials counted (Errored excluded).")
    resolved: int = Field(ge=0, description="Trials resolved end to end.")
    errored: int = Field(default=0, ge=0, description="Errored trials left out of the rate.")
    lower_bound: Estimate = Field(
        default_factory=Estimate,
        description="The rate with Errored trials counted as unresolved (a lower bound).",
    )
    lower_bound_differs: bool = Field(
        default=False, description="The lower bound differs from the rate."
    )


class Breakdown(ApiModel):
    """pass@1 of every task and the resolution rates within one slice of the trials."""

    dimension: Literal["domain", "class", "complexity", "traces"] = Field(
        description="What the trials are sliced by."
    )
    value: str = Field(description="The slice, e.g. Hard or traces-off.")
    trials: int = Field(ge=0, description="Trials in the slice, Errored included.")
    errored: int = Field(ge=0, description="Errored trials in the slice.")
    tasks: list[TaskMetric] = Field(default_factory=list, description="pass@1 per task.")
    resolution: list[ResolutionRate] = Field(
        default_factory=list, description="End-to-end resolution rate per persona."
    )


class ErroredTrial(ApiModel):
    """A trial the platform could not run; never counted against the agent."""

    trial: str = Field(description="Trial name.")
    scenario: str = Field(description="Scenario name.")
    reason: str = Field(description="Why it errored.")
    agent: str = Field(default="", description="The agent of the trial.")
    cluster: str = Field(
        default="", description="The live cluster it ran on (empty: the simulator)."
    )


class ErroredBucket(ApiModel):
    """Trials that ended Errored, kept apart from the agent's scores."""

    count: int = Field(default=0, ge=0, description="How many trials errored.")
    reasons: dict[str, int] = Field(default_factory=dict, description="Count per reason.")
    trials: list[ErroredTrial] = Field(default_factory=list, description="Each errored trial.")


class TrialCollateral(ApiModel):
    """The collateral changes of one trial."""

    trial: str = Field(description="Trial name.")
    scenario: str = Field(description="Scenario name.")
    changes: list[CollateralChange] = Field(
        default_factory=list, description="Changes beyond the fault's scope."
    )


class CollateralSummary(ApiModel):
    """Changes an agent made beyond the faults' scope, over its evaluated trials."""

    trials: int = Field(default=0, ge=0, description="Trials counted (Errored excluded).")
    changes: int = Field(default=0, ge=0, description="Collateral changes in those trials.")
    mean_per_trial: float | None = Field(
        default=None, description="Mean collateral changes per trial (None without trials)."
    )
    disqualifying_trials: int = Field(
        default=0, ge=0, description="Trials with at least one disqualifying change."
    )
    disqualifying_share: float | None = Field(
        default=None, description="Share of trials with a disqualifying change."
    )
    by_kind: dict[str, int] = Field(default_factory=dict, description="Changes per kind.")
    per_trial: list[TrialCollateral] = Field(
        default_factory=list, description="Every trial with at least one collateral change."
    )


class TableColumn(ApiModel):
    """One task column of the main table."""

    key: str = Field(description="Task key, e.g. sre.diagnosis.")
    label: str = Field(description="What its pass@1 measures, in words.")
    domain: Domain = Field(description="The persona the task belongs to.")


class AgentResult(ApiModel):
    """Everything the report says about one agent: a row of the main table and its breakdowns."""

    agent: str = Field(description="The agent (AgentSubmission name).", min_length=1)
    runs: list[str] = Field(default_factory=list, description="Runs its trials came from.")
    trials: int = Field(ge=0, description="Trials, Errored included.")
    succeeded: int = Field(ge=0, description="Trials that Succeeded.")
    failed: int = Field(ge=0, description="Trials the agent Failed.")
    failures: dict[str, int] = Field(
        default_factory=dict, description="Failed trials per reason (e.g. AgentInducedFailure)."
    )
    errored: ErroredBucket = Field(
        default_factory=ErroredBucket, description="Trials the platform could not run."
    )
    tasks: list[TaskMetric] = Field(
        default_factory=list, description="pass@k per task (false-alarm tasks apart)."
    )
    scores: list[MeanMetric] = Field(
        default_factory=list, description="Mean NTAM and FinOps proximities."
    )
    timings: list[TimingMetric] = Field(default_factory=list, description="MTTD, MTTR, TTP.")
    resolution: list[ResolutionRate] = Field(
        default_factory=list, description="End-to-end resolution rate per persona."
    )
    collateral: CollateralSummary = Field(
        default_factory=CollateralSummary, description="Changes beyond the faults' scope."
    )
    lower_bound_differs: bool = Field(
        default=False,
        description="Some pass@1 changes when Errored trials are counted as failures.",
    )
    breakdowns: list[Breakdown] = Field(
        default_factory=list, description="By domain, class, complexity and traces on/off."
    )

    def task(self, key: str) -> TaskMetric | None:
        """The task metric with that key, if the agent has trials of it."""
        return next((t for t in self.tasks if t.key == key), None)

    def score(self, key: str) -> MeanMetric | None:
        """The mean score with that key, if the agent has it."""
        return next((s for s in self.scores if s.key == key), None)

    def timing(self, key: str) -> TimingMetric | None:
        """The timing with that key, if the agent has it."""
        return next((t for t in self.timings if t.key == key), None)

    def resolution_rate(self, domain: Domain) -> ResolutionRate | None:
        """The end-to-end resolution rate of a persona, if the agent has trials of it."""
        return next((r for r in self.resolution if r.domain == domain), None)

    def breakdown(self, dimension: str, value: str) -> Breakdown | None:
        """The breakdown slice `dimension=value`, if the agent has trials in it."""
        return next(
            (b for b in self.breakdowns if b.dimension == dimension and b.value == value), None
        )


SMALL_SAMPLE_SCENARIOS = 4
"""Common scenarios a paired interval needs before it is read without a small-sample warning."""


class PairwiseComparison(ApiModel):
    """pass@1 of one task, agent (or run) A against B, paired over the scenarios both ran."""

    task: str = Field(description="Task key.")
    label: str = Field(description="What the task's pass@1 measures, in words.")
    a: str = Field(description="The first side (an agent, or `run/agent` across runs).")
    b: str = Field(description="The second side.")
    scenarios: int = Field(ge=0, description="Scenarios both sides have counted trials of.")
    mean_a: float | None = Field(default=None, description="A's pass@1 on those scenarios.")
    mean_b: float | None = Field(default=None, description="B's pass@1 on those scenarios.")
    difference: float | None = Field(
        default=None, description="Mean per-scenario difference, A - B (fractions)."
    )
    stderr: float | None = Field(
        default=None, description="Standard error of the difference (fewer than 2: None)."
    )
    ci_low: float | None = Field(default=None, description="Lower end of the interval.")
    ci_high: float | None = Field(default=None, description="Upper end of the interval.")
    confidence: float = Field(default=0.95, description="Confidence level of the interval.")
    method: Literal["paired-t"] = Field(
        default="paired-t",
        description="Paired t interval over scenarios: mean difference ± t(0.975, m - 1) x "
        "stderr (see docs/metrics.md).",
    )
    small_sample: bool = Field(
        default=False,
        description="The interval rests on fewer than SMALL_SAMPLE_SCENARIOS (4) common "
        "scenarios: wide, and its normality assumption untested; read it as a rough guide.",
    )
    a_better: int = Field(default=0, ge=0, description="Scenarios where A's pass@1 is higher.")
    b_better: int = Field(default=0, ge=0, description="Scenarios where B's pass@1 is higher.")
    ties: int = Field(default=0, ge=0, description="Scenarios where they are equal.")

    @property
    def significant(self) -> bool:
        """Whether the interval excludes zero."""
        return (self.ci_low is not None and self.ci_low > 0) or (
            self.ci_high is not None and self.ci_high < 0
        )


class Report(ApiModel):
    """A benchmark report: one result per agent, recomputable from trial records and profile.

    The top-level metrics (`tasks`, `scores`, `timings`, `resolution`, `breakdowns`) are the
    only agent's when there is one, pooled over every agent only when asked for (`pooled`),
    and empty otherwise: agents are compared in `agents` and `comparisons`.
    """

    schema_version: Literal["itbench.io/report/v1", "itbench.io/report/v2"] = Field(
        default="itbench.io/report/v2", description="Report schema version."
    )
    profile: str = Field(description="Evaluation profile id, `name@version`.")
    agent: str = Field(description="The agent benchmarked (several: comma-separated).")
    created_at: datetime = Field(description="When the report was computed.")
    runs: list[str] = Field(default_factory=list, description="BenchmarkRuns the trials came from.")
    trials: int = Field(ge=0, description="Trials in the report, Errored included.")
    succeeded: int = Field(ge=0, description="Trials that Succeeded.")
    failed: int = Field(ge=0, description="Trials the agent Failed.")
    failures: dict[str, int] = Field(
        default_factory=dict, description="Failed trials per reason (e.g. AgentInducedFailure)."
    )
    errored: ErroredBucket = Field(
        default_factory=ErroredBucket, description="Trials the platform could not run."
    )
    tasks: list[TaskMetric] = Field(default_factory=list, description="pass@k per task.")
    scores: list[MeanMetric] = Field(
        default_factory=list, description="Mean NTAM and FinOps proximities."
    )
    timings: list[TimingMetric] = Field(default_factory=list, description="MTTD, MTTR, TTP.")
    resolution: list[ResolutionRate] = Field(
        default_factory=list, description="End-to-end resolution rate per persona."
    )
    breakdowns: list[Breakdown] = Field(
        default_factory=list, description="By domain, class, complexity and traces on/off."
    )
    pooled: bool = Field(
        default=False,
        description="The top-level metrics pool the trials of several agents (asked for).",
    )
    columns: list[TableColumn] = Field(
        default_factory=list, description="The main table's task columns, in order."
    )
    agents: list[AgentResult] = Field(
        default_factory=list, description="One result per agent, in the order agents appear."
    )
    comparisons: list[PairwiseComparison] = Field(
        default_factory=list,
        description="Every pair of agents, per task both have, on their common scenarios.",
    )
    lower_bound_differs: bool = Field(
        default=False,
        description="Some agent's pass@1 changes when Errored trials count as failures.",
    )

    def agent_result(self, agent: str) -> AgentResult | None:
        """The result of one agent, if the report has its trials."""
        return next((a for a in self.agents if a.agent == agent), None)

    split: Split | None = Field(
        default=None,
        description="The split every trial was drawn from (dev or test); absent when they mix.",
    )
    catalog_digest: str | None = Field(
        default=None,
        description="The catalog digest every trial records; absent when they differ or none "
        "is recorded.",
    )
    agent_usage: list[AgentUsage] = Field(
        default_factory=list,
        description="Each agent of the trials (name, version, what ran) with its model calls, "
        "tokens and estimated cost summed over its trials.",
    )

    def task(self, key: str) -> TaskMetric | None:
        """The task metric with that key, if the report has it."""
        return next((t for t in self.tasks if t.key == key), None)

    def score(self, key: str) -> MeanMetric | None:
        """The mean score with that key, if the report has it."""
        return next((s for s in self.scores if s.key == key), None)

    def timing(self, key: str) -> TimingMetric | None:
        """The timing with that key, if the report has it."""
        return next((t for t in self.timings if t.key == key), None)

    def resolution_rate(self, domain: Domain) -> ResolutionRate | None:
        """The end-to-end resolution rate of a persona, if the report has trials of it."""
        return next((r for r in self.resolution if r.domain == domain), None)


class ComparedRun(ApiModel):
    """One side of a comparison of runs: its trials' source and one result per agent."""

    label: str = Field(description="How the side is named (A or B and its source).")
    source: str = Field(description="Where its trial records came from.")
    runs: list[str] = Field(default_factory=list, description="BenchmarkRuns of its trials.")
    agents: list[AgentResult] = Field(default_factory=list, description="One result per agent.")


class RunComparison(ApiModel):
    """Two runs side by side: one row per (run, agent) and paired differences per task."""

    schema_version: Literal["itbench.io/comparison/v1"] = Field(
        default="itbench.io/comparison/v1", description="Comparison schema version."
    )
    profile: str = Field(description="Evaluation profile id, `name@version`.")
    created_at: datetime = Field(description="When the comparison was computed.")
    columns: list[TableColumn] = Field(
        default_factory=list, description="The table's task columns, in order."
    )
    a: ComparedRun = Field(description="Run A.")
    b: ComparedRun = Field(description="Run B.")
    comparisons: list[PairwiseComparison] = Field(
        default_factory=list, description="Each compared pair of agents, A minus B, per task."
    )


def shared_split(records: Sequence[TrialRecord]) -> Split | None:
    """The split of every record, or None when they mix (or there are none)."""
    splits = {r.split for r in records}
    return splits.pop() if len(splits) == 1 else None


def shared_catalog_digest(records: Sequence[TrialRecord]) -> str | None:
    """The catalog digest of every record, or None when they differ or lack one."""
    digests = {r.catalog_digest for r in records}
    digest = digests.pop() if len(digests) == 1 else ""
    return digest or None
