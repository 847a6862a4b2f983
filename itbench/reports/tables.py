"""The report's tables as rows of display text, shared by the CLI table, Markdown and HTML: the
main table (one row per agent, one column per task), scores and times, collateral changes,
failures, pairwise comparisons and breakdowns, every number labelled and every lower bound shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from itbench.core.models.base import Domain
from itbench.core.models.report import (
    SMALL_SAMPLE_SCENARIOS,
    AgentResult,
    Breakdown,
    Estimate,
    PairwiseComparison,
    Report,
    ResolutionRate,
    TableColumn,
    TaskMetric,
)

FLAG = "⚑"
"""Marks a pass@1 whose lower bound (Errored trials counted as failures) differs from it."""

FLAG_NOTE = f"{FLAG}: Errored trials change this number; the lower bound counts them as failures."

DIMENSIONS = ("domain", "class", "complexity", "traces")
"""Breakdown dimensions, in display order."""

DIMENSION_TITLES = {
    "domain": "By persona",
    "class": "By scenario class",
    "complexity": "By complexity",
    "traces": "Traces on / off",
}


def pct(value: float | None) -> str:
    """A fraction as a percentage with one decimal; `-` without a value."""
    return "-" if value is None else f"{100 * value:.1f} %"


def pct_estimate(est: Estimate) -> str:
    """Mean ± standard error in percent (points), `-` without data."""
    if est.mean is None:
        return "-"
    err = f" ± {100 * est.stderr:.1f}" if est.stderr is not None else ""
    return f"{100 * est.mean:.1f} %{err}"


def num_estimate(est: Estimate) -> str:
    """Mean ± standard error of a score in [0, 1], three decimals."""
    if est.mean is None:
        return "-"
    err = f" ± {est.stderr:.3f}" if est.stderr is not None else ""
    return f"{est.mean:.3f}{err}"


def seconds(value: float | None) -> str:
    """A mean time; `inf` when there was no success."""
    return "inf" if value is None else f"{value:.0f} s"


def signed_points(value: float | None) -> str:
    """A difference of fractions in percentage points, with its sign."""
    return "-" if value is None else f"{100 * value:+.1f} pts"


@dataclass(frozen=True)
class Cell:
    """One pass@1 (or rate) cell: the headline, its lower bound and its counts.

    Attributes:
        value: pass@1 ± standard error, e.g. `45.0 % ± 5.1`; `-` without counted trials.
        lower: The lower bound with Errored trials as failures, e.g. `≥ 40.0 %`.
        counts: Passed / counted trials and scenarios, Errored trials apart.
        flagged: The lower bound differs from the headline.
        mean: The headline as a fraction (charts), None without data.
        stderr: Its standard error.
    """

    value: str = "-"
    lower: str = ""
    counts: str = ""
    flagged: bool = False
    mean: float | None = None
    stderr: float | None = None

    @property
    def text(self) -> str:
        """Everything on one line: value, lower bound and flag."""
        if self.value == "-" and not self.lower:
            return "-"
        flag = f" {FLAG}" if self.flagged else ""
        return f"{self.value} ({self.lower}){flag}" if self.lower else self.value


EMPTY = Cell()


def task_cell(task: TaskMetric | None) -> Cell:
    """The main-table cell of one task (empty when the agent has no trials of it)."""
    if task is None:
        return EMPTY
    first = task.pass_at_k[0].estimate if task.pass_at_k else Estimate()
    errored = f", {task.errored} errored" if task.errored else ""
    return Cell(
        value=pct_estimate(first),
        lower=f"≥ {pct(task.lower_bound.mean)}" if task.lower_bound.mean is not None else "",
        counts=f"{task.passed}/{task.trials} trials, {task.scenarios} scenarios{errored}",
        flagged=task.lower_bound_differs,
        mean=first.mean,
        stderr=first.stderr,
    )


def rate_cell(rate: ResolutionRate | None) -> Cell:
    """The cell of an end-to-end resolution rate."""
    if rate is None:
        return EMPTY
    errored = f", {rate.errored} errored" if rate.errored else ""
    return Cell(
        value=pct_estimate(rate.estimate),
        lower=f"≥ {pct(rate.lower_bound.mean)}" if rate.lower_bound.mean is not None else "",
        counts=f"{rate.resolved}/{rate.trials} trials{errored}",
        flagged=rate.lower_bound_differs,
        mean=rate.estimate.mean,
        stderr=rate.estimate.stderr,
    )


@dataclass(frozen=True)
class Row:
    """One agent's row: its name, trial counts and one cell per column."""

    agent: str
    trials: str
    cells: list[Cell]
    extra: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Table:
    """A table of display text: headers, rows and a note under it.

    Attributes:
        title: The table's title.
        headers: Full headers, each naming what its column measures.
        rows: Cells of text.
        note: A line under the table.
        short: Short headers for narrow output (a terminal), same length as `headers`; empty
            when the full ones are short already.
    """

    title: str
    headers: list[str]
    rows: list[list[str]]
    note: str = ""
    short: list[str] = field(default_factory=list)

    def legend(self) -> list[str]:
        """What each abbreviated header stands for: the full header when it extends the short
        one, else `short: full`."""
        if not self.short:
            return []
        return [
            h if h.startswith(s) else f"{s}: {h}"
            for s, h in zip(self.short, self.headers, strict=True)
            if s != h
        ]


SHORT_NAMES = {
    "sre.fl_ntam": "SRE FL-NTAM",
    "sre.fpc_ntam": "SRE FPC-NTAM",
    "finops.cost_proximity": "FinOps cost prox.",
    "finops.cpu_proximity": "FinOps CPU prox.",
    "finops.memory_proximity": "FinOps memory prox.",
    "finops.efficiency_proximity": "FinOps efficiency prox.",
    "sre.mttd": "SRE MTTD",
    "sre.mttr": "SRE MTTR",
    "ciso.ttp": "CISO TTP",
}
"""Short headers of the mean scores and times, by key."""


def short_label(label: str) -> str:
    """A label without its parenthesised definition: `SRE diagnosis pass@1`."""
    return label.split(" (")[0]


def _trials(result: AgentResult) -> str:
    return (
        f"{result.trials} ({result.succeeded} succeeded, {result.failed} failed, "
        f"{result.errored.count} errored)"
    )


def main_rows(columns: Sequence[TableColumn], agents: Sequence[AgentResult]) -> list[Row]:
    """One row per agent with one pass@1 cell per column, then the collateral columns (mean
    changes per trial, share of trials with a disqualifying one)."""
    rows = []
    for result in agents:
        collateral = result.collateral
        rows.append(
            Row(
                agent=result.agent,
                trials=_trials(result),
                cells=[task_cell(result.task(c.key)) for c in columns],
                extra=[
                    "-"
                    if collateral.mean_per_trial is None
                    else f"{collateral.mean_per_trial:.2f}",
                    f"{pct(collateral.disqualifying_share)} ({collateral.disqualifying_trials})"
                    if collateral.disqualifying_share is not None
                    else "-",
                ],
            )
        )
    return rows


MAIN_EXTRA_HEADERS = ["Collateral changes / trial", "Trials with a disqualifying change"]
"""The main table's columns after the tasks."""


def column_header(column: TableColumn) -> str:
    """A task column's header: the task and what passes, e.g. `SRE diagnosis pass@1 (...)`."""
    return column.label


def main_table(columns: Sequence[TableColumn], agents: Sequence[AgentResult]) -> Table:
    """The main table as text: Agent, Trials, one column per task, the collateral columns."""
    headers = ["Agent", "Trials", *(column_header(c) for c in columns), *MAIN_EXTRA_HEADERS]
    rows = [
        [r.agent, r.trials, *(c.text for c in r.cells), *r.extra]
        for r in main_rows(columns, agents)
    ]
    note = (
        "pass@1 ± standard error across scenarios; (≥ x) is the lower bound with Errored trials "
        "counted as failures."
    )
    if any(a.lower_bound_differs for a in agents):
        note += " " + FLAG_NOTE
    short = [
        "Agent",
        "Trials",
        *(short_label(c.label) for c in columns),
        "Collateral / trial",
        "Disqualifying",
    ]
    return Table("Agents by task (pass@1)", headers, rows, note, short)


def scores_table(report: Report) -> Table:
    """Per agent: end-to-end resolution rates, mean scores and times (columns present in any)."""
    rate_labels: dict[Domain, str] = {}
    score_keys: dict[str, str] = {}
    timing_keys: dict[str, str] = {}
    for result in report.agents:
        for rate in result.resolution:
            rate_labels.setdefault(rate.domain, rate.label)
        for score in result.scores:
            score_keys.setdefault(score.key, score.label)
        for timing in result.timings:
            timing_keys.setdefault(timing.key, timing.label)
    headers = [
        "Agent",
        *rate_labels.values(),
        *score_keys.values(),
        *timing_keys.values(),
    ]
    short = [
        "Agent",
        *(f"{d.value} resolution" for d in rate_labels),
        *(SHORT_NAMES.get(k, v) for k, v in score_keys.items()),
        *(SHORT_NAMES.get(k, v) for k, v in timing_keys.items()),
    ]
    rows = []
    for result in report.agents:
        row = [result.agent]
        row += [rate_cell(result.resolution_rate(d)).text for d in rate_labels]
        for key in score_keys:
            mean = result.score(key)
            row.append(num_estimate(mean.estimate) if mean else "-")
        for key in timing_keys:
            time = result.timing(key)
            row.append(
                f"{seconds(time.mean_seconds)} ({time.successes}/{time.trials})" if time else "-"
            )
        rows.append(row)
    return Table(
        "Resolution, scores and times by agent",
        headers,
        rows,
        "Resolution: every task of the persona passed in the same trial. Times are means over "
        "successful trials (successes/trials); inf without any.",
        short,
    )


def collateral_table(report: Report) -> Table:
    """Per agent: collateral changes (beyond the faults' scope) and the trials that made them."""
    rows = []
    for result in report.agents:
        c = result.collateral
        kinds = ", ".join(f"{k} {n}" for k, n in c.by_kind.items()) or "none"
        rows.append(
            [
                result.agent,
                str(c.trials),
                str(c.changes),
                "-" if c.mean_per_trial is None else f"{c.mean_per_trial:.2f}",
                f"{c.disqualifying_trials} ({pct(c.disqualifying_share)})",
                kinds,
            ]
        )
    return Table(
        "Collateral changes by agent",
        ["Agent", "Trials", "Changes", "Per trial", "Disqualifying trials", "By kind"],
        rows,
        "Changes the agent made beyond the fault's scope, over its trials that were not Errored.",
    )


def collateral_trial_rows(report: Report) -> list[list[str]]:
    """Every trial with collateral changes: agent, trial, scenario, the changes in words."""
    rows = []
    for result in report.agents:
        for trial in result.collateral.per_trial:
            changes = "; ".join(
                f"{c.change.value} {c.object}"
                + (f": {c.detail}" if c.detail else "")
                + (" (disqualifying)" if c.disqualifying else "")
                for c in trial.changes
            )
            rows.append([result.agent, trial.trial, trial.scenario, changes])
    return rows


def outcomes_table(report: Report) -> Table:
    """Per agent: Failed trials by reason (the agent's) and Errored trials by reason (the
    platform's, out of every headline denominator)."""
    rows = []
    for result in report.agents:
        failures = ", ".join(f"{k} {n}" for k, n in result.failures.items()) or "none"
        errored = ", ".join(f"{k} {n}" for k, n in result.errored.reasons.items()) or "none"
        rows.append([result.agent, str(result.succeeded), str(result.failed), failures, errored])
    return Table(
        "Outcomes by agent",
        [
            "Agent",
            "Succeeded",
            "Failed",
            "Failed by reason (agent)",
            "Errored by reason (platform)",
        ],
        rows,
        "Failed trials count against the agent (AgentInducedFailure: what it sent broke the "
        "environment); Errored trials are the platform's and are left out of pass@1.",
    )


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {n}" for k, n in sorted(counts.items(), key=lambda kv: -kv[1]))


def failures_table(report: Report) -> Table:
    """Per agent and task: the trials that did not pass it, totalled by reason (the agent's: its
    turn ended badly, or the task's first failed check), and the Errored ones by reason (the
    platform's, the environment's or the model endpoint's; out of pass@1). docs/metrics.md
    defines every reason."""
    rows = []
    for result in report.agents:
        for task in result.tasks:
            missed = task.trials - task.passed
            if not missed and not task.errored:
                continue
            rows.append(
                [
                    result.agent,
                    short_label(task.label),
                    f"{missed}/{task.trials}",
                    _counts(task.failures) or "-",
                    f"{task.errored}: {_counts(task.errored_reasons)}" if task.errored else "-",
                ]
            )
    return Table(
        "Failures by agent, task and reason",
        [
            "Agent",
            "Task",
            "Not passed / counted trials",
            "Not passed, by reason (agent)",
            "Errored, by reason (not the agent's)",
        ],
        rows,
        "AgentTimeout, AgentExitedWithoutFinish, AgentCrashed and AgentInducedFailure end the "
        "agent's turn badly; other reasons name the task's first failed check (e.g. "
        "WrongCategory). Errored trials (e.g. ModelUnavailable) are left out of pass@1. "
        "docs/metrics.md, 'Failure reasons'.",
    )


def usage_table(report: Report) -> Table:
    """Per agent that reported its steps: model calls, tokens, model seconds and estimated cost
    (`unpriced` where no call had a price, never $0.00), and the step lines left out."""
    rows = []
    for entry in report.agent_usage:
        if not entry.trials_with_trajectory:
            continue
        u = entry.usage
        left_out = u.invalid_steps + u.dropped_steps
        rows.append(
            [
                entry.agent.name,
                f"{entry.trials_with_trajectory}/{entry.trials}",
                str(u.model_calls),
                f"{u.prompt_tokens} / {u.completion_tokens}",
                f"{u.model_seconds:.1f} s",
                u.cost_text(),
                str(u.tool_calls),
                f"{u.invalid_steps} invalid, {u.dropped_steps} over the limits"
                if left_out
                else "none",
            ]
        )
    return Table(
        "Model usage by agent",
        [
            "Agent",
            "Trials with steps",
            "Model calls",
            "Prompt / completion tokens",
            "Model time",
            "Estimated cost",
            "Tool calls",
            "Step lines left out",
        ],
        rows,
        "From the steps each agent wrote to ITBENCH_TRAJECTORY_FILE. A call without a price "
        "(a local or unknown model) is unpriced, not free; lines that are not valid steps are "
        "left out and counted here.",
    )


def comparison_row(c: PairwiseComparison) -> list[str]:
    """One pairwise comparison as text: task, sides, scenarios, pass@1 each, A - B, interval."""
    interval = (
        f"[{signed_points(c.ci_low)}, {signed_points(c.ci_high)}]"
        if c.ci_low is not None and c.ci_high is not None
        else "- (fewer than 2 scenarios)"
    )
    verdict = ""
    if c.ci_low is not None and c.ci_high is not None:
        verdict = "A higher" if c.ci_low > 0 else "B higher" if c.ci_high < 0 else "no difference"
    if c.small_sample:
        interval += f" ⚠ only {c.scenarios} scenarios: a rough guide"
    return [
        short_label(c.label),
        c.a,
        c.b,
        str(c.scenarios),
        pct(c.mean_a),
        pct(c.mean_b),
        signed_points(c.difference),
        interval,
        verdict,
        f"{c.a_better}/{c.b_better}/{c.ties}",
    ]


COMPARISON_HEADERS = [
    "Task",
    "A",
    "B",
    "Common scenarios",
    "A pass@1",
    "B pass@1",
    "A - B",
    "95 % interval (paired t)",
    "Verdict",
    "Scenarios A better / B better / tied",
]


def comparisons_table(comparisons: Sequence[PairwiseComparison]) -> Table:
    """Pairwise comparisons: A minus B per task on the scenarios both ran."""
    return Table(
        "Pairwise comparisons (same scenarios)",
        COMPARISON_HEADERS,
        [comparison_row(c) for c in comparisons],
        "Difference of pass@1, paired over the scenarios both sides have counted trials of, "
        "with a 95 % paired t interval over scenarios (docs/metrics.md); ⚠ marks an interval "
        f"from fewer than {SMALL_SAMPLE_SCENARIOS} scenarios, too few to lean on.",
    )


def breakdown_table(report: Report, dimension: str) -> Table:
    """One dimension's breakdown: a row per (slice, agent), a column per task and the
    resolution rates, so agents sit next to each other within each slice."""
    slices: list[str] = []
    for result in report.agents:
        for b in result.breakdowns:
            if b.dimension == dimension and b.value not in slices:
                slices.append(b.value)
    rate_domains = [c.domain for c in report.columns]
    rate_domains = [d for i, d in enumerate(rate_domains) if d not in rate_domains[:i]]
    headers = [
        "Slice",
        "Agent",
        "Trials (errored)",
        *(short_label(c.label) for c in report.columns),
        *(f"{d.value} resolution" for d in rate_domains),
    ]
    rows = []
    for value in sorted(slices):
        for result in report.agents:
            part: Breakdown | None = result.breakdown(dimension, value)
            if part is None:
                continue
            tasks = {t.key: t for t in part.tasks}
            rates = {r.domain: r for r in part.resolution}
            rows.append(
                [
                    value,
                    result.agent,
                    f"{part.trials} ({part.errored})",
                    *(task_cell(tasks.get(c.key)).text for c in report.columns),
                    *(rate_cell(rates.get(d)).text for d in rate_domains),
                ]
            )
    return Table(
        DIMENSION_TITLES.get(dimension, dimension),
        headers,
        rows,
        "pass@1 ± standard error (≥ lower bound with Errored trials as failures).",
    )


def pass_at_k_rows(report: Report) -> tuple[list[str], list[list[str]]]:
    """pass@k for k = 1..n per agent and task: headers and rows."""
    top = max(
        (len(t.pass_at_k) for r in report.agents for t in r.tasks),
        default=0,
    )
    headers = ["Agent", "Task", *(f"pass@{k}" for k in range(1, top + 1))]
    rows = []
    for result in report.agents:
        for task in result.tasks:
            values = [pct_estimate(p.estimate) for p in task.pass_at_k]
            rows.append([result.agent, task.label, *values, *["-"] * (top - len(values))])
    return headers, rows
