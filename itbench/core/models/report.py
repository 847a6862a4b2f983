"""The versioned benchmark report and the stored trial record it is computed from.

A report is a pure function of trial records and an evaluation profile, so any stored run can
be re-scored later (`itbench report recompute`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from pydantic import Field, field_validator

from itbench.core.models.base import ApiModel, Complexity, Domain
from itbench.core.models.scenario import ParameterValue, Split
from itbench.core.models.trial import TrialPhase, TrialScores

REPORT_SCHEMA_VERSION = "itbench.io/report/v1"
"""The report schema version; bumped on any incompatible change."""


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


class ErroredBucket(ApiModel):
    """Trials that ended Errored, kept apart from the agent's scores."""

    count: int = Field(default=0, ge=0, description="How many trials errored.")
    reasons: dict[str, int] = Field(default_factory=dict, description="Count per reason.")
    trials: list[ErroredTrial] = Field(default_factory=list, description="Each errored trial.")


class Report(ApiModel):
    """A benchmark report of one agent, recomputable from its trial records and profile."""

    schema_version: Literal["itbench.io/report/v1"] = Field(
        default="itbench.io/report/v1", description="Report schema version."
    )
    profile: str = Field(description="Evaluation profile id, `name@version`.")
    agent: str = Field(description="The agent benchmarked.")
    created_at: datetime = Field(description="When the report was computed.")
    runs: list[str] = Field(default_factory=list, description="BenchmarkRuns the trials came from.")
    trials: int = Field(ge=0, description="Trials in the report, Errored included.")
    succeeded: int = Field(ge=0, description="Trials that Succeeded.")
    failed: int = Field(ge=0, description="Trials the agent Failed.")
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
    split: Split | None = Field(
        default=None,
        description="The split every trial was drawn from (dev or test); absent when they mix.",
    )
    catalog_digest: str | None = Field(
        default=None,
        description="The catalog digest every trial records; absent when they differ or none "
        "is recorded.",
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


def shared_split(records: Sequence[TrialRecord]) -> Split | None:
    """The split of every record, or None when they mix (or there are none)."""
    splits = {r.split for r in records}
    return splits.pop() if len(splits) == 1 else None


def shared_catalog_digest(records: Sequence[TrialRecord]) -> str | None:
    """The catalog digest of every record, or None when they differ or lack one."""
    digests = {r.catalog_digest for r in records}
    digest = digests.pop() if len(digests) == 1 else ""
    return digest or None
