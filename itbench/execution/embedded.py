"""The embedded benchmark end to end: plan, run in parallel with progress, aggregate, write the
run directory (plan.json, trials/, trajectories/, agents/, trials.jsonl, report.json,
report.html).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from itbench.core.catalog import Variants
from itbench.core.complexity import effective_complexity
from itbench.core.models.agent_record import AgentInfo, ModelUsage
from itbench.core.models.agent_submission import BuiltinAgent
from itbench.core.models.base import TelemetryToggles
from itbench.core.models.benchmark_run import Timeouts
from itbench.core.models.report import Report, TrialRecord
from itbench.core.models.scenario import Scenario, Split
from itbench.core.models.trial import TrialPhase, TrialStatus
from itbench.core.scoring.aggregate import build_report
from itbench.core.scoring.profile import DEFAULT_PROFILE
from itbench.core.scoring.usage import agent_usage
from itbench.core.tasks import tasks_for
from itbench.execution.artefacts import RunStore, write_atomic
from itbench.execution.benchmark import Progress, run_trials
from itbench.execution.plan import TrialPlan, plan_trials
from itbench.execution.report_html import render_html
from itbench.reports import save_trial_records, write_report_json


@dataclass(frozen=True)
class BenchmarkOptions:
    """What to run.

    Attributes:
        run: The run's name (its directory under the output directory).
        agents: The agents to benchmark (a built-in one may be given by its name).
        scenarios: Candidate scenarios (each agent takes those of its domains).
        trials: Attempts per scenario and agent.
        seed: The run's seed.
        workers: Worker processes.
        telemetry: Run-wide telemetry mask (e.g. traces off).
        timeouts: Time limits per trial.
        allow_oracle: Whether the oracle agent may read the ground truth.
        variants: The catalog's variants by scenario name (templates are expanded per trial).
        split: dev or test.
        seed_secret: The test split's secret (never written anywhere, never shown).
        catalog_digest: Digest of the catalog, recorded with every trial.
    """

    run: str
    agents: Sequence[AgentInfo | BuiltinAgent]
    scenarios: Sequence[Scenario]
    trials: int
    seed: int
    workers: int
    telemetry: TelemetryToggles = field(default_factory=TelemetryToggles)
    timeouts: Timeouts = field(default_factory=Timeouts)
    allow_oracle: bool = False
    variants: Mapping[str, Variants] = field(default_factory=dict, repr=False)
    split: Split = Split.DEV
    seed_secret: str | None = field(default=None, repr=False)
    catalog_digest: str = ""


@dataclass(frozen=True)
class BenchmarkResult:
    """A finished run.

    Attributes:
        root: The run directory.
        plans: The planned trials.
        statuses: Final status by trial name.
        records: One record per trial.
        report: The aggregated report.
    """

    root: Path
    plans: list[TrialPlan]
    statuses: dict[str, TrialStatus]
    records: list[TrialRecord]
    report: Report

    def counts(self) -> Counter[str]:
        """Trials by final phase."""
        return Counter(s.phase.value for s in self.statuses.values())


def trial_record(
    plan: TrialPlan, status: TrialStatus, usage: ModelUsage | None = None
) -> TrialRecord:
    """The report's record of one finished trial.

    Args:
        plan: The trial.
        status: Its final status.
        usage: The model usage of its agent's trajectory (None: it reported none).
    """
    scenario = plan.scenario
    complexity, _score = effective_complexity(scenario.spec)
    telemetry = scenario.spec.environment.telemetry.masked_by(plan.telemetry)
    phase = status.phase if status.phase.final else TrialPhase.ERRORED
    return TrialRecord(
        trial=plan.name,
        run=plan.run,
        scenario=scenario.name,
        attempt=plan.attempt,
        domain=scenario.spec.domain,
        scenario_class=scenario.spec.scenario_class,
        complexity=complexity,
        traces_enabled=telemetry.traces,
        phase=phase,
        reason=status.reason,
        scores=status.scores,
        agent=plan.agent.name,
        tasks=tasks_for(scenario),
        split=plan.split,
        parameters=plan.parameters,
        catalog_digest=plan.catalog_digest,
        agent_info=plan.agent,
        usage=usage,
    )


def run_benchmark(
    options: BenchmarkOptions,
    output_dir: Path,
    *,
    created_at: datetime,
    on_start: Callable[[int], None] | None = None,
    on_done: Progress | None = None,
) -> BenchmarkResult:
    """Plan and run a benchmark, then write every artefact of the run directory.

    Args:
        options: What to run.
        output_dir: Parent of the run directory.
        created_at: The report's timestamp.
        on_start: Called with the number of planned trials.
        on_done: Called as each trial finishes.

    Returns:
        The finished run.
    """
    plans = plan_trials(
        options.run,
        options.scenarios,
        options.agents,
        trials=options.trials,
        seed=options.seed,
        telemetry=options.telemetry,
        timeouts=options.timeouts,
        allow_oracle=options.allow_oracle,
        variants=options.variants,
        split=options.split,
        seed_secret=options.seed_secret,
        catalog_digest=options.catalog_digest,
    )
    store = RunStore(output_dir / options.run)
    store.save_plan(plans)
    return _execute(store, plans, options.workers, created_at, on_start, on_done)


def resume_benchmark(
    root: Path,
    *,
    workers: int,
    created_at: datetime,
    on_start: Callable[[int], None] | None = None,
    on_done: Progress | None = None,
    agents: Sequence[AgentInfo] = (),
) -> BenchmarkResult:
    """Continue an interrupted run: finished trials are kept, the others run to completion.

    Args:
        root: The run directory.
        workers: Worker processes.
        created_at: The report's timestamp.
        on_start: Called with the number of planned trials.
        on_done: Called as each trial finishes (including those finished before).
        agents: Agents of the run given again (matched by name; e.g. a new wall-clock limit):
            they run the trials still to run, and the plan records them.

    Returns:
        The finished run.
    """
    store = RunStore(root)
    plans = store.load_plan()
    if agents:
        by_name = {a.name: a for a in agents}
        plans = [
            p.model_copy(update={"agent": by_name[p.agent.name]})
            if p.agent.name in by_name and not _finished(store, p)
            else p
            for p in plans
        ]
        store.save_plan(plans)
    return _execute(store, plans, workers, created_at, on_start, on_done)


def _finished(store: RunStore, plan: TrialPlan) -> bool:
    status = store.load_status(plan.name)
    return status is not None and status.phase.final


def _execute(
    store: RunStore,
    plans: list[TrialPlan],
    workers: int,
    created_at: datetime,
    on_start: Callable[[int], None] | None,
    on_done: Progress | None,
) -> BenchmarkResult:
    if on_start is not None:
        on_start(len(plans))
    statuses: dict[str, TrialStatus] = {}
    todo: list[TrialPlan] = []
    for plan in plans:
        previous = store.load_status(plan.name)
        if previous is not None and previous.phase.final:
            statuses[plan.name] = previous
            if on_done is not None:
                on_done(plan, previous)
        else:
            todo.append(plan)
    statuses.update(run_trials(todo, store=store, workers=workers, on_done=on_done))
    records = [trial_record(plan, statuses[plan.name], _usage(store, plan.name)) for plan in plans]
    agents = list(dict.fromkeys(plan.agent.name for plan in plans))
    report = build_report(
        records, DEFAULT_PROFILE, agent=", ".join(agents) or "none", created_at=created_at
    )
    report = report.model_copy(update={"agent_usage": agent_usage(records)})
    save_trial_records(records, store.trials_path)
    write_report_json(report, store.report_json_path)
    trajectories = {plan.name: store.load_trajectory(plan.name) for plan in plans}
    write_atomic(
        store.report_html_path, render_html(report, plans, statuses, records, trajectories)
    )
    return BenchmarkResult(
        root=store.root, plans=plans, statuses=statuses, records=records, report=report
    )


def _usage(store: RunStore, trial: str) -> ModelUsage | None:
    return store.load_step_file(trial).usage()
