"""Aggregation: trial records to a versioned report with one result per agent (pass@k with
standard errors and lower bounds, NTAM means, times, collateral changes, breakdowns) and paired
comparisons of the agents.

A trial is scored on the tasks its record names (`TrialRecord.tasks`; an empty list, in records
that predate it, means every task of its domain): a no-fault control only on its false-alarm
task, a scenario whose fault the agent cannot reach without mitigation. Errored trials are the
platform's failures: they are listed in their own bucket and left out of every headline
denominator, and every pass@1 has a lower bound that counts them as failures. A trial that Failed
without scores counts as failing every task it is scored on.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction

from itbench.core.models.base import Domain
from itbench.core.models.benchmark_run import RunSummary
from itbench.core.models.report import (
    AgentResult,
    Breakdown,
    CollateralSummary,
    ErroredBucket,
    ErroredTrial,
    Estimate,
    MeanMetric,
    PairwiseComparison,
    PassAtK,
    Report,
    ResolutionRate,
    TableColumn,
    TaskMetric,
    TimingMetric,
    TrialCollateral,
    TrialRecord,
    shared_catalog_digest,
    shared_split,
)
from itbench.core.models.trial import TrialPhase, TrialScores
from itbench.core.runner.context import AGENT_END_REASONS, Reason
from itbench.core.scoring.compare import paired_comparison
from itbench.core.scoring.measures import (
    BREAKDOWN_DIMENSIONS,
    MEANS,
    RESOLUTION,
    TASKS,
    TASKS_BY_KEY,
    TIMINGS,
    ScenarioKey,
    TaskDefinition,
)
from itbench.core.scoring.profile import EvaluationProfile
from itbench.core.scoring.timing import mean_time
from itbench.core.tasks import DOMAIN_TASKS, SRE_DIAGNOSIS, SRE_MITIGATION

__all__ = [
    "TASKS",
    "AgentSide",
    "agent_sides",
    "build_report",
    "estimate",
    "headline",
    "pairwise",
    "pass_at_k_estimate",
    "table_columns",
    "task_failure",
]


@dataclass(frozen=True, slots=True)
class _Trial:
    """A record with what aggregation asks of it again and again, computed once."""

    record: TrialRecord
    key: ScenarioKey
    counted: bool
    tasks: frozenset[str]
    passed: frozenset[str]


def _prepare(record: TrialRecord) -> _Trial:
    tasks = frozenset(record.tasks or DOMAIN_TASKS.get(record.domain, ()))
    counted = record.phase != TrialPhase.ERRORED
    scores = record.scores
    passed: frozenset[str] = frozenset()
    if counted and scores is not None:
        passed = frozenset(
            k for k in tasks if (t := TASKS_BY_KEY.get(k)) is not None and t.outcome(scores)
        )
    return _Trial(record, (record.scenario, record.traces_enabled), counted, tasks, passed)


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def _stderr(values: Sequence[float], mean: float) -> float | None:
    m = len(values)
    if m < 2:
        return None
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (m - 1)) / math.sqrt(m)


def estimate(values: Sequence[float]) -> Estimate:
    """Mean and standard error (sample stdev / sqrt(m)) of per-scenario values.

    Args:
        values: One value per scenario.

    Returns:
        An empty estimate without values; no standard error with fewer than two.
    """
    if not values:
        return Estimate()
    mean = _mean(values)
    return Estimate(mean=mean, stderr=_stderr(values, mean), scenarios=len(values))


def pass_at_k_estimate(outcomes: Sequence[Sequence[bool]], k: int) -> Estimate:
    """pass@k averaged over scenarios that have at least k trials.

    Formula: mean over scenarios of `1 - C(n - c, k) / C(n, k)` (exact), with the standard
    error across those scenarios.

    Args:
        outcomes: Per scenario, the pass/fail of each of its counted trials.
        k: Trials drawn.
    """
    return _pass_at_k([(len(o), sum(o)) for o in outcomes], k)


def _pass_at_k(counts: Iterable[tuple[int, int]], k: int) -> Estimate:
    # Exact mean without a Fraction per scenario: scenarios with the same n share the
    # denominator C(n, k), so their numerators add up as integers.
    numerators: dict[int, int] = {}
    floats: list[float] = []
    for n, c in counts:
        if n < k:
            continue
        total, failing = math.comb(n, k), math.comb(n - c, k)
        numerators[n] = numerators.get(n, 0) + total - failing
        floats.append(1 - failing / total)
    if not floats:
        return Estimate()
    exact = sum((Fraction(num, math.comb(n, k)) for n, num in numerators.items()), Fraction(0))
    mean = float(exact / len(floats))
    return Estimate(mean=mean, stderr=_stderr(floats, mean), scenarios=len(floats))


@dataclass(frozen=True, slots=True)
class _Cells:
    """Per scenario: counted trials, passes and Errored trials of one task (or resolution); and
    why trials did not pass it (counted ones, and Errored ones apart)."""

    counts: dict[ScenarioKey, list[int]]
    failures: Counter[str] = field(default_factory=Counter)
    errored_reasons: Counter[str] = field(default_factory=Counter)

    def rates(self) -> dict[ScenarioKey, float]:
        """pass@1 per scenario with counted trials."""
        return {key: c / n for key, (n, c, _e) in self.counts.items() if n}

    def lower_bound(self) -> Estimate:
        """pass@1 per scenario with Errored trials as failures, averaged over scenarios."""
        return estimate([c / (n + e) for n, c, e in self.counts.values()])

    def trials(self) -> int:
        return sum(n for n, _c, _e in self.counts.values())

    def passed(self) -> int:
        return sum(c for _n, c, _e in self.counts.values())

    def errored(self) -> int:
        return sum(e for _n, _c, e in self.counts.values())


def _count(cells: dict[ScenarioKey, list[int]], t: _Trial, passed: bool) -> None:
    cell = cells.get(t.key)
    if cell is None:
        cell = cells[t.key] = [0, 0, 0]
    if t.counted:
        cell[0] += 1
        cell[1] += passed
    else:
        cell[2] += 1


TURN_REASONS = frozenset({*(r.value for r in AGENT_END_REASONS), Reason.AGENT_INDUCED_FAILURE})
"""Trial reasons that explain every task the trial did not pass (the agent's turn ended badly or
broke the environment); otherwise a task's own first failed check does."""

_CHECK = re.compile(r"^([A-Z][A-Za-z]+):")


def task_failure(record: TrialRecord, task: TaskDefinition) -> str:
    """Why a trial did not pass a task: its reason when the agent's turn ended badly (or when it
    was not scored), else the name of the task's first failed check (`NotPassed` when the
    task records none).

    Args:
        record: A trial scored on the task that did not pass it.
        task: The task.
    """
    if record.reason in TURN_REASONS or record.scores is None:
        return record.reason or "NotScored"
    match = _CHECK.match(task.explain(record.scores))
    return match.group(1) if match else "NotPassed"


def _tally(trials: Iterable[_Trial]) -> tuple[dict[str, _Cells], dict[Domain, _Cells]]:
    """One pass over the trials: the cells of every task and of every persona's resolution."""
    tasks: dict[str, _Cells] = {}
    resolution: dict[Domain, dict[ScenarioKey, list[int]]] = {}
    for t in trials:
        for key in t.tasks:
            cells = tasks.get(key)
            if cells is None:
                cells = tasks[key] = _Cells({})
            passed = key in t.passed
            _count(cells.counts, t, passed)
            if not t.counted:
                cells.errored_reasons[t.record.reason or "Unknown"] += 1
            elif not passed and (task := TASKS_BY_KEY.get(key)) is not None:
                cells.failures[task_failure(t.record, task)] += 1
        needs = RESOLUTION_NEEDS.get(t.record.domain)
        if needs is not None and needs <= t.tasks:
            _count(resolution.setdefault(t.record.domain, {}), t, needs <= t.passed)
    return tasks, {domain: _Cells(c) for domain, c in resolution.items()}


RESOLUTION_NEEDS: dict[Domain, frozenset[str]] = {
    domain: frozenset(needs) for domain, (_label, needs) in RESOLUTION.items()
}


def _differs(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return (a is None) != (b is None)
    return abs(a - b) > 1e-12


def _task_metric(task: TaskDefinition, cells: _Cells, max_k: int | None) -> TaskMetric:
    counted = [(n, c) for n, c, _e in cells.counts.values() if n]
    n_max = max((n for n, _c in counted), default=0)
    top = n_max if max_k is None else min(max_k, n_max)
    pass_k = [
        PassAtK(k=k, label=task.label(k), estimate=_pass_at_k(counted, k))
        for k in range(1, top + 1)
    ]
    lower = cells.lower_bound()
    headline = pass_k[0].estimate.mean if pass_k else None
    return TaskMetric(
        key=task.key,
        label=task.label(1),
        domain=task.domain,
        trials=cells.trials(),
        passed=cells.passed(),
        scenarios=len(counted),
        pass_at_k=pass_k,
        errored=cells.errored(),
        lower_bound=lower,
        lower_bound_differs=cells.errored() > 0 and _differs(headline, lower.mean),
        failures=dict(sorted(cells.failures.items())),
        errored_reasons=dict(sorted(cells.errored_reasons.items())),
    )


def _resolution(domain: Domain, cells: _Cells) -> ResolutionRate:
    label, _needs = RESOLUTION[domain]
    rate = estimate(list(cells.rates().values()))
    lower = cells.lower_bound()
    return ResolutionRate(
        domain=domain,
        label=label,
        estimate=rate,
        trials=cells.trials(),
        resolved=cells.passed(),
        errored=cells.errored(),
        lower_bound=lower,
        lower_bound_differs=cells.errored() > 0 and _differs(rate.mean, lower.mean),
    )


def _mean_metric(
    key: str,
    label: str,
    task: TaskDefinition,
    counted: Sequence[_Trial],
    value: Callable[[TrialScores | None], float],
) -> MeanMetric:
    groups: dict[ScenarioKey, list[float]] = {}
    for t in counted:
        groups.setdefault(t.key, []).append(value(t.record.scores))
    return MeanMetric(
        key=key,
        label=label,
        domain=task.domain,
        estimate=estimate([_mean(g) for g in groups.values()]),
        trials=sum(len(g) for g in groups.values()),
    )


def _timing(
    key: str,
    label: str,
    task: TaskDefinition,
    counted: Sequence[_Trial],
    value: Callable[[TrialScores | None], float | None],
) -> TimingMetric:
    mean, successes = mean_time(value(t.record.scores) for t in counted)
    return TimingMetric(
        key=key,
        label=label,
        domain=task.domain,
        mean_seconds=mean,
        successes=successes,
        trials=len(counted),
    )


@dataclass(frozen=True)
class _Metrics:
    """Tasks, resolution rates and the per-scenario pass@1 comparisons pair on."""

    tasks: list[TaskMetric]
    resolution: list[ResolutionRate]
    rates: dict[str, dict[ScenarioKey, float]]


def _metrics(trials: Sequence[_Trial], max_k: int | None) -> _Metrics:
    cells, resolution = _tally(trials)
    present = [t for t in TASKS if t.key in cells]
    return _Metrics(
        tasks=[_task_metric(t, cells[t.key], max_k) for t in present],
        resolution=[_resolution(d, resolution[d]) for d in Domain if d in resolution],
        rates={t.key: cells[t.key].rates() for t in present},
    )


def _breakdowns(trials: Sequence[_Trial]) -> list[Breakdown]:
    result: list[Breakdown] = []
    for dimension, key in BREAKDOWN_DIMENSIONS:
        slices: dict[str, list[_Trial]] = {}
        for t in trials:
            slices.setdefault(key(t.record), []).append(t)
        for value in sorted(slices):
            members = slices[value]
            metrics = _metrics(members, max_k=1)
            result.append(
                Breakdown.model_validate(
                    {
                        "dimension": dimension,
                        "value": value,
                        "trials": len(members),
                        "errored": sum(1 for t in members if not t.counted),
                        "tasks": metrics.tasks,
                        "resolution": metrics.resolution,
                    }
                )
            )
    return result


def _errored_bucket(trials: Sequence[_Trial]) -> ErroredBucket:
    errored = [t.record for t in trials if not t.counted]
    return ErroredBucket(
        count=len(errored),
        reasons=dict(sorted(Counter(r.reason or "Unknown" for r in errored).items())),
        trials=[
            ErroredTrial(
                trial=r.trial,
                scenario=r.scenario,
                reason=r.reason or "Unknown",
                agent=r.agent,
                cluster=r.cluster,
            )
            for r in errored
        ],
    )


def _failures(trials: Sequence[_Trial]) -> dict[str, int]:
    reasons = Counter(
        t.record.reason or "Unknown" for t in trials if t.record.phase == TrialPhase.FAILED
    )
    return dict(sorted(reasons.items()))


def _collateral(trials: Sequence[_Trial]) -> CollateralSummary:
    counted = [t.record for t in trials if t.counted]
    listed: list[TrialCollateral] = []
    kinds: Counter[str] = Counter()
    disqualifying = 0
    for r in counted:
        changes = r.scores.collateral if r.scores is not None else []
        if not changes:
            continue
        listed.append(TrialCollateral(trial=r.trial, scenario=r.scenario, changes=changes))
        kinds.update(c.change.value for c in changes)
        disqualifying += any(c.disqualifying for c in changes)
    total = sum(kinds.values())
    return CollateralSummary(
        trials=len(counted),
        changes=total,
        mean_per_trial=total / len(counted) if counted else None,
        disqualifying_trials=disqualifying,
        disqualifying_share=disqualifying / len(counted) if counted else None,
        by_kind=dict(sorted(kinds.items())),
        per_trial=listed,
    )


def _agent_result(agent: str, trials: Sequence[_Trial]) -> tuple[AgentResult, _Metrics]:
    metrics = _metrics(trials, max_k=None)
    present = {t.key for t in metrics.tasks}
    scores: list[MeanMetric] = []
    timings: list[TimingMetric] = []
    for key, label, task_key, mean_value in MEANS:
        if task_key in present:
            with_task = [t for t in trials if t.counted and task_key in t.tasks]
            scores.append(_mean_metric(key, label, TASKS_BY_KEY[task_key], with_task, mean_value))
    for key, label, task_key, time_value in TIMINGS:
        if task_key in present:
            with_task = [t for t in trials if t.counted and task_key in t.tasks]
            timings.append(_timing(key, label, TASKS_BY_KEY[task_key], with_task, time_value))
    records = [t.record for t in trials]
    result = AgentResult(
        agent=agent,
        runs=sorted({r.run for r in records}),
        trials=len(records),
        succeeded=sum(1 for r in records if r.phase == TrialPhase.SUCCEEDED),
        failed=sum(1 for r in records if r.phase == TrialPhase.FAILED),
        failures=_failures(trials),
        errored=_errored_bucket(trials),
        tasks=metrics.tasks,
        scores=scores,
        timings=timings,
        resolution=metrics.resolution,
        collateral=_collateral(trials),
        lower_bound_differs=any(t.lower_bound_differs for t in metrics.tasks)
        or any(r.lower_bound_differs for r in metrics.resolution),
        breakdowns=_breakdowns(trials),
    )
    return result, metrics


def _by_agent(trials: Sequence[_Trial]) -> dict[str, list[_Trial]]:
    groups: dict[str, list[_Trial]] = {}
    for t in trials:
        groups.setdefault(t.record.agent, []).append(t)
    return groups


@dataclass(frozen=True)
class AgentSide:
    """One agent's result and its pass@1 per scenario and task, which comparisons pair on.

    Attributes:
        name: How the side is named in comparisons (the agent, or `A:<agent>` across runs).
        result: The agent's result.
        rates: Per task key, pass@1 per scenario with counted trials.
    """

    name: str
    result: AgentResult
    rates: dict[str, dict[ScenarioKey, float]]

    def renamed(self, name: str) -> AgentSide:
        """The same side under another name."""
        return AgentSide(name, self.result, self.rates)


def agent_sides(records: Sequence[TrialRecord]) -> list[AgentSide]:
    """One side per agent of the records, in the order agents appear."""
    return _sides([_prepare(r) for r in records])


def _sides(trials: Sequence[_Trial]) -> list[AgentSide]:
    sides = []
    for name, members in _by_agent(trials).items():
        result, metrics = _agent_result(name, members)
        sides.append(AgentSide(name, result, metrics.rates))
    return sides


def table_columns(results: Iterable[AgentResult]) -> list[TableColumn]:
    """The main table's task columns: every task some agent has, in report order."""
    keys = {t.key for r in results for t in r.tasks}
    return [
        TableColumn(key=t.key, label=t.label(1), domain=t.domain) for t in TASKS if t.key in keys
    ]


def pairwise(
    sides: Sequence[AgentSide], pairs: Iterable[tuple[int, int]]
) -> list[PairwiseComparison]:
    """Side i against side j for each pair, per task both have, on their common scenarios."""
    out: list[PairwiseComparison] = []
    for i, j in pairs:
        a, b = sides[i], sides[j]
        for task in TASKS:
            rates_a, rates_b = a.rates.get(task.key), b.rates.get(task.key)
            if not rates_a or not rates_b:
                continue
            comparison = paired_comparison(
                task.key, task.label(1), a.name, b.name, rates_a, rates_b
            )
            if comparison.scenarios:
                out.append(comparison)
    return out


def build_report(
    records: Sequence[TrialRecord],
    profile: EvaluationProfile,
    *,
    agent: str,
    created_at: datetime,
    pooled: bool = False,
) -> Report:
    """Aggregate trial records into a report with one result per agent.

    Args:
        records: Finished trials (Succeeded, Failed or Errored) of one or more agents.
        profile: The evaluation profile the scores were (re)computed with; its id is stored.
        agent: The agent benchmarked (several: their names, comma-separated).
        created_at: When the report is computed (passed in: the core reads no clock).
        pooled: Also pool every agent's trials into the top-level metrics.

    Returns:
        Per agent (in the order they appear): pass@k for k = 1..n per task (mean and standard
        error across scenarios) with its lower bound (Errored trials as failures), mean NTAM
        and FinOps proximities, MTTD/MTTR/TTP over successful trials, one end-to-end
        resolution rate per persona, collateral changes, failures by reason, breakdowns by
        domain, class, complexity and traces on/off, and the Errored bucket; paired comparisons
        of every two agents per task; the main table's columns. The top-level metrics are the
        only agent's, pooled when asked for, else empty. Only tasks with trials appear.
    """
    trials = [_prepare(r) for r in records]
    sides = _sides(trials)
    results = [side.result for side in sides]
    if len(results) == 1:
        only = results[0]
        top_tasks, top_scores, top_timings = only.tasks, only.scores, only.timings
        top_resolution, top_breakdowns = only.resolution, only.breakdowns
    elif pooled and results:
        everyone, _metrics = _agent_result(agent, trials)
        top_tasks, top_scores, top_timings = everyone.tasks, everyone.scores, everyone.timings
        top_resolution, top_breakdowns = everyone.resolution, everyone.breakdowns
    else:
        top_tasks, top_scores, top_timings, top_resolution, top_breakdowns = [], [], [], [], []
    pairs = [(i, j) for i in range(len(sides)) for j in range(i + 1, len(sides))]
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
        failures=_failures(trials),
        errored=_errored_bucket(trials),
        tasks=top_tasks,
        scores=top_scores,
        timings=top_timings,
        resolution=top_resolution,
        breakdowns=top_breakdowns,
        pooled=pooled and len(results) > 1,
        columns=table_columns(results),
        agents=results,
        comparisons=pairwise(sides, pairs),
        lower_bound_differs=any(r.lower_bound_differs for r in results),
    )


def _pass1(source: AgentResult | Report, key: str) -> float | None:
    task = source.task(key)
    if task is None or not task.pass_at_k:
        return None
    return task.pass_at_k[0].estimate.mean


def headline(report: Report) -> RunSummary:
    """The report's headline numbers for a BenchmarkRun's status (its only agent's, else the
    top-level numbers).

    The resolution rate is that of the persona with the most trials (SRE first on a tie).
    """
    source: AgentResult | Report = report.agents[0] if len(report.agents) == 1 else report
    fl = source.score("sre.fl_ntam")
    fpc = source.score("sre.fpc_ntam")
    mttd = source.timing("sre.mttd")
    mttr = source.timing("sre.mttr")
    main = max(source.resolution, key=lambda r: r.trials, default=None)
    return RunSummary(
        diagnosis_pass_at_1=_pass1(source, SRE_DIAGNOSIS),
        mitigation_pass_at_1=_pass1(source, SRE_MITIGATION),
        fl_ntam=fl.estimate.mean if fl else None,
        fpc_ntam=fpc.estimate.mean if fpc else None,
        mttd_seconds=mttd.mean_seconds if mttd else None,
        mttr_seconds=mttr.mean_seconds if mttr else None,
        resolution_rate=main.estimate.mean if main else None,
        succeeded=report.succeeded,
        failed=report.failed,
        errored=report.errored.count,
    )
