"""Aggregation: trial records to a versioned report (pass@k, NTAM means, times, breakdowns).

Errored trials are the platform's failures: they are listed in their own bucket and left out of
every denominator. A trial that Failed without scores counts as failing every task of its domain.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction

from itbench.core.models.base import Domain
from itbench.core.models.benchmark_run import RunSummary
from itbench.core.models.report import (
    Breakdown,
    ErroredBucket,
    ErroredTrial,
    Estimate,
    MeanMetric,
    PassAtK,
    Report,
    ResolutionRate,
    TaskMetric,
    TimingMetric,
    TrialRecord,
    shared_catalog_digest,
    shared_split,
)
from itbench.core.models.trial import TrialPhase, TrialScores
from itbench.core.scoring.passk import pass_at_k
from itbench.core.scoring.profile import EvaluationProfile
from itbench.core.scoring.timing import mean_time

ScenarioKey = tuple[str, bool]
"""Scenarios are grouped by name and traces on/off (the ablation runs the same name twice)."""


@dataclass(frozen=True)
class TaskDefinition:
    """A pass/fail task of one persona and how a trial's scores decide it."""

    key: str
    domain: Domain
    name: str
    measures: str
    outcome: Callable[[TrialScores], bool]

    def label(self, k: int) -> str:
        """The label of pass@k of this task, naming exactly what passes."""
        return f"{self.name} pass@{k} ({self.measures})"


def _diagnosis(s: TrialScores) -> bool:
    return s.diagnosis is not None and s.diagnosis.passed


def _mitigation(s: TrialScores) -> bool:
    return s.mitigation is not None and s.mitigation.passed


def _posture(s: TrialScores) -> bool:
    return s.posture is not None and s.posture.passed


def _finops_diagnosis(s: TrialScores) -> bool:
    return s.finops is not None and s.finops.diagnosis_passed


def _finops_mitigation(s: TrialScores) -> bool:
    return s.finops is not None and s.finops.mitigation_passed


TASKS: tuple[TaskDefinition, ...] = (
    TaskDefinition("sre.diagnosis", Domain.SRE, "SRE diagnosis", "root cause named", _diagnosis),
    TaskDefinition(
        "sre.mitigation",
        Domain.SRE,
        "SRE mitigation",
        "alerts cleared, health at baseline",
        _mitigation,
    ),
    TaskDefinition(
        "ciso.posture", Domain.CISO, "CISO posture", "every control assessed correctly", _posture
    ),
    TaskDefinition(
        "finops.diagnosis",
        Domain.FINOPS,
        "FinOps diagnosis",
        "inefficiency identified",
        _finops_diagnosis,
    ),
    TaskDefinition(
        "finops.mitigation",
        Domain.FINOPS,
        "FinOps mitigation",
        "inefficiency removed, alerts cleared",
        _finops_mitigation,
    ),
)
"""Every task, in report order."""

RESOLUTION: dict[Domain, tuple[str, Callable[[TrialScores], bool]]] = {
    Domain.SRE: (
        "SRE end-to-end resolution rate (diagnosis and mitigation both passed in the same trial)",
        lambda s: _diagnosis(s) and _mitigation(s),
    ),
    Domain.CISO: (
        "CISO end-to-end resolution rate (posture assessment passed)",
        _posture,
    ),
    Domain.FINOPS: (
        "FinOps end-to-end resolution rate (diagnosis and mitigation both passed in the same "
        "trial)",
        lambda s: _finops_diagnosis(s) and _finops_mitigation(s),
    ),
}
"""One consistent definition of 'resolved' per persona."""


def _passes(record: TrialRecord, outcome: Callable[[TrialScores], bool]) -> bool:
    return record.scores is not None and outcome(record.scores)


def _by_scenario(records: Sequence[TrialRecord]) -> dict[ScenarioKey, list[TrialRecord]]:
    groups: dict[ScenarioKey, list[TrialRecord]] = {}
    for r in records:
        groups.setdefault((r.scenario, r.traces_enabled), []).append(r)
    return groups


def estimate(values: Sequence[float]) -> Estimate:
    """Mean and standard error (sample stdev / sqrt(m)) of per-scenario values.

    Args:
        values: One value per scenario.

    Returns:
        An empty estimate without values; no standard error with fewer than two.
    """
    if not values:
        return Estimate()
    mean = math.fsum(values) / len(values)
    stderr = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else None
    return Estimate(mean=mean, stderr=stderr, scenarios=len(values))


def pass_at_k_estimate(outcomes: Sequence[Sequence[bool]], k: int) -> Estimate:
    """pass@k averaged over scenarios that have at least k trials.

    Formula: mean over scenarios of `1 - C(n - c, k) / C(n, k)` (exact), with the standard
    error across those scenarios.

    Args:
        outcomes: Per scenario, the pass/fail of each of its counted trials.
        k: Trials drawn.
    """
    values = [pass_at_k(len(o), sum(o), k) for o in outcomes if len(o) >= k]
    if not values:
        return Estimate()
    exact_mean = sum(values, Fraction(0)) / len(values)
    est = estimate([float(v) for v in values])
    return est.model_copy(update={"mean": float(exact_mean)})


def _task_metric(
    task: TaskDefinition, counted: Sequence[TrialRecord], max_k: int | None
) -> TaskMetric:
    groups = _by_scenario([r for r in counted if r.domain == task.domain])
    outcomes = [[_passes(r, task.outcome) for r in g] for g in groups.values()]
    n_max = max((len(o) for o in outcomes), default=0)
    top = n_max if max_k is None else min(max_k, n_max)
    return TaskMetric(
        key=task.key,
        label=task.label(1),
        domain=task.domain,
        trials=sum(len(o) for o in outcomes),
        passed=sum(sum(o) for o in outcomes),
        scenarios=len(outcomes),
        pass_at_k=[
            PassAtK(k=k, label=task.label(k), estimate=pass_at_k_estimate(outcomes, k))
            for k in range(1, top + 1)
        ],
    )


def _resolution(domain: Domain, counted: Sequence[TrialRecord]) -> ResolutionRate:
    label, outcome = RESOLUTION[domain]
    groups = _by_scenario([r for r in counted if r.domain == domain])
    outcomes = [[_passes(r, outcome) for r in g] for g in groups.values()]
    return ResolutionRate(
        domain=domain,
        label=label,
        estimate=estimate([sum(o) / len(o) for o in outcomes]),
        trials=sum(len(o) for o in outcomes),
        resolved=sum(sum(o) for o in outcomes),
    )


def _mean_metric(
    key: str,
    label: str,
    domain: Domain,
    counted: Sequence[TrialRecord],
    value: Callable[[TrialScores | None], float],
) -> MeanMetric:
    groups = _by_scenario([r for r in counted if r.domain == domain])
    per_scenario = [math.fsum(value(r.scores) for r in g) / len(g) for g in groups.values()]
    return MeanMetric(
        key=key,
        label=label,
        domain=domain,
        estimate=estimate(per_scenario),
        trials=sum(len(g) for g in groups.values()),
    )


def _fl(s: TrialScores | None) -> float:
    return s.diagnosis.fl_ntam if s and s.diagnosis else 0.0


def _fpc(s: TrialScores | None) -> float:
    return s.diagnosis.fpc_ntam if s and s.diagnosis else 0.0


def _proximity(field: str) -> Callable[[TrialScores | None], float]:
    def value(s: TrialScores | None) -> float:
        return float(getattr(s.finops, field)) if s and s.finops else 0.0

    return value


MEANS: tuple[tuple[str, str, Domain, Callable[[TrialScores | None], float]], ...] = (
    (
        "sre.fl_ntam",
        "SRE fault-localization NTAM (root-cause entities; 1 = perfect)",
        Domain.SRE,
        _fl,
    ),
    (
        "sre.fpc_ntam",
        "SRE fault-propagation-chain NTAM (every chain entity; 1 = perfect)",
        Domain.SRE,
        _fpc,
    ),
    (
        "finops.cost_proximity",
        "FinOps proximity to optimal cost (1 = optimal)",
        Domain.FINOPS,
        _proximity("cost_proximity"),
    ),
    (
        "finops.cpu_proximity",
        "FinOps proximity to optimal CPU requests (1 = optimal)",
        Domain.FINOPS,
        _proximity("cpu_proximity"),
    ),
    (
        "finops.memory_proximity",
        "FinOps proximity to optimal memory requests (1 = optimal)",
        Domain.FINOPS,
        _proximity("memory_proximity"),
    ),
    (
        "finops.efficiency_proximity",
        "FinOps proximity to optimal CPU efficiency, usage / requests (1 = optimal)",
        Domain.FINOPS,
        _proximity("efficiency_proximity"),
    ),
)
"""Mean scores: key, label, persona, per-trial value (0 for a trial without that score)."""


def _ttd(s: TrialScores | None) -> float | None:
    return s.diagnosis.ttd_seconds if s and s.diagnosis and s.diagnosis.passed else None


def _ttr(s: TrialScores | None) -> float | None:
    return s.mitigation.ttr_seconds if s and s.mitigation and s.mitigation.passed else None


def _ttp(s: TrialScores | None) -> float | None:
    return s.posture.ttp_seconds if s and s.posture and s.posture.passed else None


TIMINGS: tuple[tuple[str, str, Domain, Callable[[TrialScores | None], float | None]], ...] = (
    ("sre.mttd", "SRE mean time to diagnosis, seconds (correct diagnoses only)", Domain.SRE, _ttd),
    ("sre.mttr", "SRE mean time to repair, seconds (passed mitigations only)", Domain.SRE, _ttr),
    ("ciso.ttp", "CISO mean time to process, seconds (passed assessments only)", Domain.CISO, _ttp),
)
"""Mean times over successful trials: key, label, persona, per-trial time (None if no success)."""


def _timing(
    key: str,
    label: str,
    domain: Domain,
    counted: Sequence[TrialRecord],
    value: Callable[[TrialScores | None], float | None],
) -> TimingMetric:
    trials = [r for r in counted if r.domain == domain]
    mean, successes = mean_time(value(r.scores) for r in trials)
    return TimingMetric(
        key=key,
        label=label,
        domain=domain,
        mean_seconds=mean,
        successes=successes,
        trials=len(trials),
    )


def _domains(records: Sequence[TrialRecord]) -> list[Domain]:
    present = {r.domain for r in records}
    return [d for d in Domain if d in present]


def _breakdowns(records: Sequence[TrialRecord]) -> list[Breakdown]:
    dimensions: list[tuple[str, Callable[[TrialRecord], str]]] = [
        ("domain", lambda r: r.domain.value),
        ("class", lambda r: r.scenario_class),
        ("complexity", lambda r: r.complexity.value if r.complexity else "Unknown"),
        ("traces", lambda r: "traces-on" if r.traces_enabled else "traces-off"),
    ]
    result: list[Breakdown] = []
    for dimension, key in dimensions:
        slices: dict[str, list[TrialRecord]] = {}
        for r in records:
            slices.setdefault(key(r), []).append(r)
        for value in sorted(slices):
            members = slices[value]
            counted = [r for r in members if r.phase != TrialPhase.ERRORED]
            domains = _domains(members)
            result.append(
                Breakdown.model_validate(
                    {
                        "dimension": dimension,
                        "value": value,
                        "trials": len(members),
                        "errored": len(members) - len(counted),
                        "tasks": [
                            _task_metric(t, counted, max_k=1) for t in TASKS if t.domain in domains
                        ],
                        "resolution": [_resolution(d, counted) for d in domains],
                    }
                )
            )
    return result


def build_report(
    records: Sequence[TrialRecord],
    profile: EvaluationProfile,
    *,
    agent: str,
    created_at: datetime,
) -> Report:
    """Aggregate trial records into a report.

    Args:
        records: Finished trials (Succeeded, Failed or Errored).
        profile: The evaluation profile the scores were (re)computed with; its id is stored.
        agent: The agent benchmarked.
        created_at: When the report is computed (passed in: the core reads no clock).

    Returns:
        pass@k for k = 1..n per task (mean and standard error across scenarios), mean NTAM and
        FinOps proximities, MTTD/MTTR/TTP over successful trials, one end-to-end resolution
        rate per persona, breakdowns by domain, class, complexity and traces on/off, and the
        Errored bucket. Only personas with trials appear.
    """
    counted = [r for r in records if r.phase != TrialPhase.ERRORED]
    errored = [r for r in records if r.phase == TrialPhase.ERRORED]
    domains = _domains(records)
    return Report(
        profile=profile.id,
        agent=agent,
        created_at=created_at,
        runs=sorted({r.run for r in records}),
        split=shared_split(records),
        catalog_digest=shared_catalog_digest(records),
        trials=len(records),
        succeeded=sum(1 for r in records if r.phase == TrialPhase.SUCCEEDED),
        failed=sum(1 for r in records if r.phase == TrialPhase.FAILED),
        errored=ErroredBucket(
            count=len(errored),
            reasons=dict(sorted(Counter(r.reason or "Unknown" for r in errored).items())),
            trials=[
                ErroredTrial(trial=r.trial, scenario=r.scenario, reason=r.reason or "Unknown")
                for r in errored
            ],
        ),
        tasks=[_task_metric(t, counted, max_k=None) for t in TASKS if t.domain in domains],
        scores=[
            _mean_metric(key, label, domain, counted, value)
            for key, label, domain, value in MEANS
            if domain in domains
        ],
        timings=[
            _timing(key, label, domain, counted, value)
            for key, label, domain, value in TIMINGS
            if domain in domains
        ],
        resolution=[_resolution(d, counted) for d in domains],
        breakdowns=_breakdowns(records),
    )


def _pass1(report: Report, key: str) -> float | None:
    task = report.task(key)
    if task is None or not task.pass_at_k:
        return None
    return task.pass_at_k[0].estimate.mean


def headline(report: Report) -> RunSummary:
    """The report's headline numbers for a BenchmarkRun's status.

    The resolution rate is that of the persona with the most trials (SRE first on a tie).
    """
    fl = report.score("sre.fl_ntam")
    fpc = report.score("sre.fpc_ntam")
    mttd = report.timing("sre.mttd")
    mttr = report.timing("sre.mttr")
    main = max(report.resolution, key=lambda r: r.trials, default=None)
    return RunSummary(
        diagnosis_pass_at_1=_pass1(report, "sre.diagnosis"),
        mitigation_pass_at_1=_pass1(report, "sre.mitigation"),
        fl_ntam=fl.estimate.mean if fl else None,
        fpc_ntam=fpc.estimate.mean if fpc else None,
        mttd_seconds=mttd.mean_seconds if mttd else None,
        mttr_seconds=mttr.mean_seconds if mttr else None,
        resolution_rate=main.estimate.mean if main else None,
        succeeded=report.succeeded,
        failed=report.failed,
        errored=report.errored.count,
    )
