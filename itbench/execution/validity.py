"""The validity suite: cheap strategies, the oracle and the null agent over the catalog, held to
their ceilings (`itbench.core.scoring.validity`).

The strategies are ordinary agents found by path in `agents.validity.strategies` (never imported
here by name); they run without the oracle, and the oracle runs in a plan of its own that allows
it. Every trial runs in the benchmark's process pool; only the result and the trial records are
written.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import Field

from itbench.core.catalog import Catalog
from itbench.core.models.agent_record import AgentInfo
from itbench.core.models.agent_submission import BuiltinAgent
from itbench.core.models.base import ApiModel
from itbench.core.models.report import TrialRecord
from itbench.core.models.scenario import Scenario, Split
from itbench.core.scoring.profile import DEFAULT_PROFILE
from itbench.core.scoring.validity import NULL, ORACLE, ValidityReport, evaluate
from itbench.execution.agents import builtin, from_callable, load_target
from itbench.execution.artefacts import write_atomic
from itbench.execution.benchmark import Progress, run_trials
from itbench.execution.embedded import trial_record
from itbench.execution.plan import TrialPlan, plan_trials
from itbench.reports import save_trial_records

STRATEGIES_MODULE = "agents.validity.strategies"
"""Where the reference strategies live: `STRATEGIES` (name to function), `CEILINGS` and
`DEFAULT_CEILING`."""

_CALLABLE_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


class StrategyError(ValueError):
    """A strategy cannot be run as asked; the message names it and what to change."""


@dataclass(frozen=True)
class Strategies:
    """The reference strategies and their ceilings, as the strategies module declares them.

    Attributes:
        targets: Callable path (`module:function`) by strategy name.
        ceilings: Ceilings by (strategy, task) where they differ from the default.
        default_ceiling: The ceiling of every other (strategy, task).
    """

    targets: Mapping[str, str]
    ceilings: Mapping[tuple[str, str], float]
    default_ceiling: float


def reference_strategies(module: str = STRATEGIES_MODULE) -> Strategies:
    """The reference strategies of a strategies module (found by path, not imported by name).

    Raises:
        StrategyError: When the module does not declare STRATEGIES, CEILINGS and DEFAULT_CEILING.
    """
    try:
        table = load_target(f"{module}:STRATEGIES")
        ceilings = load_target(f"{module}:CEILINGS")
        default = load_target(f"{module}:DEFAULT_CEILING")
    except LookupError as exc:
        raise StrategyError(str(exc)) from None
    targets = {str(name): f"{module}:{fn.__name__}" for name, fn in dict(table).items()}
    return Strategies(
        targets=targets,
        ceilings={(str(s), str(t)): float(c) for (s, t), c in dict(ceilings).items()},
        default_ceiling=float(default),
    )


def choose_strategies(specs: Sequence[str], reference: Strategies) -> dict[str, AgentInfo]:
    """The strategy agents of a validity run, by name; the null anchor is always among them.

    Args:
        specs: Reference strategy names or callables (`module:function`, held to the default
            ceiling); empty: every reference strategy.
        reference: The reference strategies.

    Raises:
        StrategyError: An unknown name, a callable that is no agent, or a name taken twice or
            reserved for the oracle.
    """
    chosen: dict[str, AgentInfo] = {}
    for spec in dict.fromkeys(specs or reference.targets):
        if _CALLABLE_PATH.match(spec):
            try:
                info = from_callable(spec)
            except (LookupError, ValueError) as exc:
                raise StrategyError(f"--strategy {spec!r}: {exc}") from None
            if info.name in reference.targets or info.name == ORACLE:
                raise StrategyError(
                    f"--strategy {spec!r}: its name {info.name!r} is a reference strategy's or "
                    "the oracle's; rename the function"
                )
        elif spec in reference.targets:
            info = from_callable(reference.targets[spec], name=spec)
        else:
            raise StrategyError(
                f"--strategy {spec!r} is neither a reference strategy "
                f"({', '.join(reference.targets)}) nor a callable module:function"
            )
        if info.name in chosen:
            raise StrategyError(f"--strategy: two strategies are named {info.name!r}")
        chosen[info.name] = info
    if NULL not in chosen and NULL in reference.targets:
        chosen = {NULL: from_callable(reference.targets[NULL], name=NULL), **chosen}
    return chosen


@dataclass(frozen=True)
class ValidityOptions:
    """What a validity run covers.

    Attributes:
        strategies: The strategy agents by name (the null anchor among them).
        scenarios: The scenarios (of every domain present).
        catalog: The catalog they come from (templates' instances, its digest).
        trials: Attempts per scenario and strategy.
        seed: The run's seed.
        workers: Worker processes.
        reference: The ceilings.
        split: dev or test.
        seed_secret: The test split's secret (never stored).
    """

    strategies: Mapping[str, AgentInfo]
    scenarios: Sequence[Scenario]
    catalog: Catalog
    trials: int
    seed: int
    workers: int
    reference: Strategies
    split: Split = Split.DEV
    seed_secret: str | None = field(default=None, repr=False)


class ValidityResult(ApiModel):
    """A validity run: what ran and how every strategy did."""

    seed: int = Field(description="The run's seed.")
    split: Split = Field(description="The split the instances were drawn from.")
    trials_per_scenario: int = Field(ge=1, description="Attempts per scenario and strategy.")
    scenarios: list[str] = Field(description="The scenarios run.")
    agents: list[AgentInfo] = Field(description="Every strategy agent, the oracle included.")
    report: ValidityReport = Field(description="Every strategy on every task, with problems.")


def plan(options: ValidityOptions, run: str = "validity") -> list[TrialPlan]:
    """The trials of a validity run: every strategy without the oracle, then the oracle in a
    plan of its own that allows it. Every agent gets the same instance for the same attempt."""
    variants = {s.name: options.catalog.variants(s.name) for s in options.scenarios}

    def planned(name: str, agents: Sequence[AgentInfo], allow_oracle: bool) -> list[TrialPlan]:
        return plan_trials(
            name,
            options.scenarios,
            agents,
            trials=options.trials,
            seed=options.seed,
            allow_oracle=allow_oracle,
            variants=variants,
            split=options.split,
            seed_secret=options.seed_secret,
            catalog_digest=options.catalog.digest,
        )

    strategies = planned(run, list(options.strategies.values()), allow_oracle=False)
    oracle = planned(f"{run}-oracle", [builtin(BuiltinAgent.ORACLE)], allow_oracle=True)
    return [*strategies, *oracle]


def run_validity(
    options: ValidityOptions,
    *,
    on_start: Callable[[int], None] | None = None,
    on_done: Progress | None = None,
) -> tuple[ValidityResult, list[TrialRecord]]:
    """Run every strategy and the oracle over the scenarios and hold them to their ceilings.

    Args:
        options: What to run.
        on_start: Called with the number of planned trials.
        on_done: Called as each trial finishes.

    Returns:
        The result and every trial's record.
    """
    plans = plan(options)
    if on_start is not None:
        on_start(len(plans))
    statuses = run_trials(plans, store=None, workers=options.workers, on_done=on_done)
    records = [trial_record(p, statuses[p.name]) for p in plans]
    by_agent: dict[str, list[TrialRecord]] = {ORACLE: []}
    for name in options.strategies:
        by_agent.setdefault(name, [])
    for record in records:
        by_agent.setdefault(record.agent, []).append(record)
    report = evaluate(
        by_agent,
        options.reference.ceilings,
        default_ceiling=options.reference.default_ceiling,
        profile=DEFAULT_PROFILE.id,
    )
    oracle = next((p.agent for p in plans if p.allow_oracle), None)
    agents = [*options.strategies.values(), *([oracle] if oracle is not None else [])]
    result = ValidityResult(
        seed=options.seed,
        split=options.split,
        trials_per_scenario=options.trials,
        scenarios=sorted(s.name for s in options.scenarios),
        agents=agents,
        report=report,
    )
    return result, records


RESULT_FILE = "validity.json"
RECORDS_FILE = "trials.jsonl"


def save_result(result: ValidityResult, records: Sequence[TrialRecord], out: Path) -> Path:
    """Write the result (`validity.json`) and every trial's record (`trials.jsonl`) to `out`.

    Returns:
        The result file's path.
    """
    out.mkdir(parents=True, exist_ok=True)
    path = out / RESULT_FILE
    write_atomic(path, result.model_dump_json(by_alias=True, indent=2) + "\n")
    save_trial_records(records, out / RECORDS_FILE)
    return path


def rows(report: ValidityReport) -> list[tuple[str, str, int, int, int, float, float, str]]:
    """The report as (strategy, task, passed, trials, errored, rate, ceiling, verdict) rows.

    The verdict is `ok`, `above ceiling` (a strategy), `below 1` (the oracle), `not held` (a
    cheap strategy's false-alarm task: passing a control by doing nothing is right) or
    `no trials`.
    """
    out: list[tuple[str, str, int, int, int, float, float, str]] = []
    for strategy in report.strategies:
        for task in strategy.tasks:
            if not task.trials:
                verdict = "no trials"
            elif strategy.strategy == ORACLE:
                verdict = "ok" if task.passed == task.trials else "below 1"
            elif not task.held:
                verdict = "not held"
            else:
                verdict = "ok" if task.within else "above ceiling"
            out.append(
                (
                    strategy.strategy,
                    task.task,
                    task.passed,
                    task.trials,
                    task.errored,
                    task.rate,
                    task.ceiling,
                    verdict,
                )
            )
    return out
