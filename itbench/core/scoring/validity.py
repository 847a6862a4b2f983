"""The validity check: cheap strategies must stay at or below their ceilings on every task.

A strategy's score on a task is the share of its fault-scenario trials that passed the task
(Errored trials count as failures here: a strategy must not be able to leave the denominator).
Controls are reported on their own false-alarm tasks but not held to a ceiling: naming nothing
and changing nothing is the right answer there, so a passive strategy passes them by design (and
they are never averaged into fault scenarios). The oracle must pass everything; the null agent,
which does not even submit a report, must pass nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import Field

from itbench.core.models.base import ApiModel
from itbench.core.models.report import TrialRecord
from itbench.core.models.trial import TrialPhase, TrialScores
from itbench.core.tasks import DOMAIN_TASKS, FALSE_ALARM_TASKS

ORACLE = "oracle"
NULL = "null"


class TaskResult(ApiModel):
    """One strategy on one task."""

    task: str = Field(description="Task key, e.g. sre.diagnosis.")
    trials: int = Field(ge=0, description="Trials scored on the task.")
    passed: int = Field(ge=0, description="Trials that passed it.")
    errored: int = Field(ge=0, description="Trials that ended Errored (counted as failures).")
    ceiling: float = Field(ge=0, le=1, description="The most the strategy may pass.")
    held: bool = Field(
        default=True,
        description="Whether the ceiling applies (false: a control's false-alarm task, "
        "reported apart).",
    )
    scenarios: list[str] = Field(default_factory=list, description="Scenarios passed.")

    @property
    def rate(self) -> float:
        """Passed trials over trials (0 without trials)."""
        return self.passed / self.trials if self.trials else 0.0

    @property
    def within(self) -> bool:
        """Whether the rate is at or below the ceiling (always, when the ceiling is not held)."""
        return not self.held or self.rate <= self.ceiling + 1e-12


class StrategyResult(ApiModel):
    """One strategy over the catalog."""

    strategy: str = Field(description="Strategy (agent) name.")
    tasks: list[TaskResult] = Field(default_factory=list, description="One result per task.")


class ValidityReport(ApiModel):
    """Every strategy on every task, and whether the benchmark holds."""

    splits: list[str] = Field(default_factory=list, description="Splits the trials came from.")
    catalog_digest: str | None = Field(default=None, description="Digest of the catalog.")
    profile: str = Field(description="Evaluation profile the trials were scored with.")
    strategies: list[StrategyResult] = Field(default_factory=list, description="Per strategy.")
    problems: list[str] = Field(default_factory=list, description="Every ceiling exceeded.")

    @property
    def holds(self) -> bool:
        """Whether every strategy is within its ceilings and the anchors hold."""
        return not self.problems


def _passed(scores: TrialScores | None, task: str) -> bool:
    if scores is None:
        return False
    kind = task.split(".", 1)[1]
    if task.startswith("finops.") and scores.finops is not None and kind != "false-alarm":
        return (
            scores.finops.diagnosis_passed
            if kind == "diagnosis"
            else (scores.finops.mitigation_passed)
        )
    if kind == "diagnosis":
        return scores.diagnosis is not None and scores.diagnosis.passed
    if kind == "mitigation":
        return scores.mitigation is not None and scores.mitigation.passed
    if kind == "false-alarm":
        return scores.false_alarm is not None and scores.false_alarm.passed
    if kind == "posture":
        return scores.posture is not None and scores.posture.passed
    return False


def _tasks_of(record: TrialRecord) -> list[str]:
    if record.tasks:
        return list(record.tasks)
    return list(DOMAIN_TASKS.get(record.domain, ()))


def evaluate(
    records: Mapping[str, Sequence[TrialRecord]],
    ceilings: Mapping[tuple[str, str], float],
    *,
    default_ceiling: float,
    profile: str,
) -> ValidityReport:
    """Hold every strategy to its ceilings.

    Args:
        records: Trial records by strategy name (`oracle` and `null` are the anchors).
        ceilings: Ceilings by (strategy, task) where they differ from the default (a cheap
            strategy's false-alarm tasks are reported, never held).
        default_ceiling: The ceiling of every other (strategy, task).
        profile: The evaluation profile the records were scored with.

    Returns:
        The table and every problem: a strategy above a ceiling, the oracle below 1 on a task,
        or the null strategy above 0.
    """
    strategies: list[StrategyResult] = []
    problems: list[str] = []
    splits: set[str] = set()
    digests: set[str | None] = set()
    order = [*DOMAIN_TASKS.values(), tuple(FALSE_ALARM_TASKS.values())]
    known = [t for group in order for t in group]
    false_alarm = set(FALSE_ALARM_TASKS.values())
    for name, trials in records.items():
        by_task: dict[str, list[TrialRecord]] = {}
        for record in trials:
            splits.add(record.split.value if record.split is not None else "dev")
            digests.add(record.catalog_digest or None)
            for task in _tasks_of(record):
                by_task.setdefault(task, []).append(record)
        results = []
        for task in sorted(by_task, key=lambda t: known.index(t) if t in known else len(known)):
            got = by_task[task]
            passed = [r for r in got if _passed(r.scores, task)]
            held = True
            if name == ORACLE:
                ceiling = 1.0
            elif name == NULL:
                ceiling = 0.0
            elif task in false_alarm:
                ceiling, held = 1.0, False
            else:
                ceiling = ceilings.get((name, task), default_ceiling)
            result = TaskResult(
                task=task,
                trials=len(got),
                passed=len(passed),
                errored=sum(1 for r in got if r.phase == TrialPhase.ERRORED),
                ceiling=ceiling,
                held=held,
                scenarios=sorted({r.scenario for r in passed}),
            )
            results.append(result)
            if name == ORACLE and result.passed < result.trials:
                missed = sorted({r.scenario for r in got} - set(result.scenarios))
                problems.append(
                    f"oracle: {task} {result.passed}/{result.trials}; missed {', '.join(missed)}"
                )
            elif name != ORACLE and not result.within:
                problems.append(
                    f"{name}: {task} {result.rate:.1%} > ceiling {ceiling:.0%} "
                    f"({result.passed}/{result.trials}: {', '.join(result.scenarios)})"
                )
        strategies.append(StrategyResult(strategy=name, tasks=results))
    digest = digests.pop() if len(digests) == 1 else None
    return ValidityReport(
        splits=sorted(splits),
        catalog_digest=digest,
        profile=profile,
        strategies=strategies,
        problems=problems,
    )


def table(report: ValidityReport) -> str:
    """The report as a text table: one row per strategy, one column per task."""
    tasks: list[str] = []
    for s in report.strategies:
        for t in s.tasks:
            if t.task not in tasks:
                tasks.append(t.task)
    head = ["strategy", *tasks]
    rows = [head]
    for s in report.strategies:
        cells = {t.task: t for t in s.tasks}
        row = [s.strategy]
        for task in tasks:
            cell = cells.get(task)
            if cell is None:
                row.append("-")
                continue
            bad = cell.passed < cell.trials if s.strategy == ORACLE else not cell.within
            row.append(f"{cell.rate:6.1%} ({cell.passed}/{cell.trials}){' !' if bad else ''}")
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append("")
    lines.append(f"splits: {', '.join(report.splits)}   profile: {report.profile}")
    if report.catalog_digest:
        lines.append(f"catalog: {report.catalog_digest}")
    lines.append("holds" if report.holds else "DOES NOT HOLD:\n  " + "\n  ".join(report.problems))
    return "\n".join(lines)
