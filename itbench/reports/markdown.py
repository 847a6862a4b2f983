"""Markdown rendering of a report and of a comparison of runs: every number with the label that
says what it measures, agents side by side."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from itbench.core.models.report import AgentResult, Report, RunComparison
from itbench.reports.tables import (
    DIMENSIONS,
    FLAG_NOTE,
    Table,
    breakdown_table,
    collateral_table,
    collateral_trial_rows,
    comparisons_table,
    failures_table,
    main_table,
    num_estimate,
    outcomes_table,
    pass_at_k_rows,
    pct_estimate,
    scores_table,
    usage_table,
)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _rows(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    out = [
        "| " + " | ".join(_cell(h) for h in headers) + " |",
        "|" + "---|" * len(headers),
    ]
    out += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return out


def _table(table: Table) -> list[str]:
    out = ["", f"## {table.title}", ""]
    if not table.rows:
        return [*out, "None."]
    out += _rows(table.headers, table.rows)
    if table.note:
        out += ["", table.note]
    return out


def _pooled(report: Report) -> list[str]:
    out = ["", "## Pooled over every agent (asked for)", ""]
    out += _rows(
        ["Metric", "Value", "Lower bound", "Passed / trials", "Scenarios"],
        [
            [
                p.label,
                pct_estimate(p.estimate),
                pct_estimate(task.lower_bound) if p.k == 1 else "",
                f"{task.passed} / {task.trials}",
                str(p.estimate.scenarios),
            ]
            for task in report.tasks
            for p in task.pass_at_k
        ]
        + [
            [r.label, pct_estimate(r.estimate), pct_estimate(r.lower_bound), "", ""]
            for r in report.resolution
        ]
        + [[s.label, num_estimate(s.estimate), "", str(s.trials), ""] for s in report.scores],
    )
    return out


def _errored(results: Sequence[AgentResult]) -> list[str]:
    out = ["", "## Errored trials (platform failures, not counted against the agent)", ""]
    trials = [(r.agent, t) for r in results for t in r.errored.trials]
    if not trials:
        return [*out, "None."]
    if any(t.cluster for _, t in trials):  # a cluster run: which cluster each one broke on
        return out + _rows(
            ["Agent", "Trial", "Scenario", "Cluster", "Reason"],
            [[agent, t.trial, t.scenario, t.cluster or "-", t.reason] for agent, t in trials],
        )
    return out + _rows(
        ["Agent", "Trial", "Scenario", "Reason"],
        [[agent, t.trial, t.scenario, t.reason] for agent, t in trials],
    )


def _agent_sections(report: Report) -> list[str]:
    out = _table(main_table(report.columns, report.agents))
    out += _table(scores_table(report))
    out += _table(outcomes_table(report))
    out += _table(failures_table(report))
    out += _table(usage_table(report))
    out += _table(collateral_table(report))
    per_trial = collateral_trial_rows(report)
    if per_trial:
        out += ["", "### Collateral changes per trial", ""]
        out += _rows(["Agent", "Trial", "Scenario", "Changes"], per_trial)
    headers, rows = pass_at_k_rows(report)
    if rows:
        out += ["", "## pass@k by agent and task", ""]
        out += _rows(headers, rows)
    out += _table(comparisons_table(report.comparisons))
    for dimension in DIMENSIONS:
        table = breakdown_table(report, dimension)
        if table.rows:
            out += _table(replace(table, title=f"Breakdown: {table.title}"))
    return out


def render_markdown(report: Report) -> str:
    """Render a report as Markdown tables.

    Args:
        report: The report.

    Returns:
        Markdown with the run's counts, the main table (one row per agent, one column per
        task, with lower bounds and collateral columns), resolution, scores and times per
        agent, outcomes by reason, collateral changes, pass@k, pairwise comparisons, the
        breakdowns with agents side by side, pooled numbers only when the report pools, and
        the Errored trials; ± is the standard error across scenarios.
    """
    out: list[str] = [
        f"# ITBench report: {_cell(report.agent)}",
        "",
        f"- Schema: `{report.schema_version}`; evaluation profile: `{report.profile}`",
        f"- Created: {report.created_at.isoformat()}",
        f"- Runs: {', '.join(report.runs) or 'none'}",
        f"- Agents: {', '.join(a.agent for a in report.agents) or 'none'}",
        f"- Trials: {report.trials} ({report.succeeded} succeeded, {report.failed} failed, "
        f"{report.errored.count} errored and excluded from every pass@1)",
    ]
    if report.lower_bound_differs:
        out.append(f"- **Flagged:** {FLAG_NOTE}")
    out += _agent_sections(report)
    if report.pooled:
        out += _pooled(report)
    out += _errored(report.agents)
    return "\n".join(out) + "\n"


def render_comparison_markdown(comparison: RunComparison) -> str:
    """Render a comparison of two runs: each run's main table, then A minus B per task.

    Args:
        comparison: The comparison.
    """
    out: list[str] = [
        "# ITBench comparison of runs",
        "",
        f"- Schema: `{comparison.schema_version}`; evaluation profile: `{comparison.profile}`",
        f"- Created: {comparison.created_at.isoformat()}",
        f"- A: {_cell(comparison.a.source)} (runs {', '.join(comparison.a.runs) or 'none'})",
        f"- B: {_cell(comparison.b.source)} (runs {', '.join(comparison.b.runs) or 'none'})",
    ]
    for side in (comparison.a, comparison.b):
        table = main_table(comparison.columns, side.agents)
        out += _table(replace(table, title=f"Run {side.label}: {table.title}"))
    out += _table(comparisons_table(comparison.comparisons))
    return "\n".join(out) + "\n"
