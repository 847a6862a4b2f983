"""The report's sections as HTML, rendered on the server so that the page shows them without
JavaScript: the main table, charts that compare agents, scores, outcomes, collateral changes,
pairwise comparisons and breakdowns. Every value is escaped."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from itbench.core.models.report import Report, TableColumn
from itbench.reports.charts import bar_chart, colour
from itbench.reports.tables import (
    DIMENSION_TITLES,
    DIMENSIONS,
    FLAG,
    FLAG_NOTE,
    MAIN_EXTRA_HEADERS,
    Cell,
    Table,
    breakdown_table,
    collateral_table,
    collateral_trial_rows,
    comparisons_table,
    failures_table,
    main_rows,
    num_estimate,
    outcomes_table,
    pass_at_k_rows,
    pct_estimate,
    scores_table,
    short_label,
    task_cell,
    usage_table,
)


def _id(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower())


def table_html(table: Table, table_id: str, *, heading: bool = True) -> str:
    """A table of text as HTML that folds into one block per row on narrow screens (each cell
    then carries its header as a label); `heading` puts the table's title above it."""
    title = f"<h3>{escape(table.title)}</h3>" if heading else ""
    if not table.rows:
        return f'{title}<p class="muted" id="{table_id}">None.</p>'
    head = "".join(f"<th>{escape(h)}</th>" for h in table.headers)
    body = []
    for row in table.rows:
        cells = []
        for header, value in zip(table.headers, row, strict=False):
            cls = ' class="flag"' if FLAG in value else ""
            cells.append(f'<td data-label="{escape(header)}"{cls}>{escape(value)}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    note = f'<p class="muted">{escape(table.note)}</p>' if table.note else ""
    return (
        f'{title}<div class="scroll"><table id="{table_id}" class="stack"><thead><tr>{head}'
        f"</tr></thead><tbody>{''.join(body)}</tbody></table></div>{note}"
    )


def _cell_html(cell: Cell, header: str) -> str:
    if cell.value == "-" and not cell.lower:
        return f'<td data-label="{escape(header)}" class="num muted">-</td>'
    flag = f' <span class="flag" title="{escape(FLAG_NOTE)}">{FLAG}</span>' if cell.flagged else ""
    cls = "num flag" if cell.flagged else "num"
    return (
        f'<td data-label="{escape(header)}" class="{cls}"><strong>{escape(cell.value)}</strong>'
        f'{flag}<br><span class="lb">{escape(cell.lower)}</span>'
        f'<br><span class="muted small">{escape(cell.counts)}</span></td>'
    )


def main_table_html(report: Report) -> str:
    """The main table: one row per agent, one column per task (pass@1 ± standard error, the
    lower bound with Errored trials as failures, counts), then the collateral columns."""
    headers = ["Agent", "Trials", *(c.label for c in report.columns), *MAIN_EXTRA_HEADERS]
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = []
    for i, row in enumerate(main_rows(report.columns, report.agents)):
        cells = [
            f'<td data-label="Agent"><span class="swatch" style="background:{colour(i)}">'
            f"</span>{escape(row.agent)}</td>",
            f'<td data-label="Trials">{escape(row.trials)}</td>',
            *(
                _cell_html(cell, column.label)
                for cell, column in zip(row.cells, report.columns, strict=True)
            ),
            *(
                f'<td data-label="{escape(h)}" class="num">{escape(v)}</td>'
                for h, v in zip(MAIN_EXTRA_HEADERS, row.extra, strict=True)
            ),
        ]
        body.append(f'<tr data-agent="{escape(row.agent)}">' + "".join(cells) + "</tr>")
    return (
        f'<div class="scroll"><table id="main-table" class="stack main"><thead><tr>{head}'
        f"</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
        '<p class="muted">pass@1 ± standard error across scenarios; ≥ is the lower bound with '
        "Errored trials counted as failures; controls are scored on their own false-alarm "
        "task, never in the pass@1 of fault scenarios.</p>"
    )


def _task_chart(report: Report) -> str:
    agents = [a.agent for a in report.agents]
    categories = [short_label(c.label) for c in report.columns]
    cells = {
        (category, result.agent): task_cell(result.task(column.key))
        for category, column in zip(categories, report.columns, strict=True)
        for result in report.agents
    }
    return bar_chart("pass@1 per task, by agent", categories, agents, cells)


def _dimension_charts(report: Report, dimension: str) -> list[tuple[TableColumn, str]]:
    agents = [a.agent for a in report.agents]
    slices = sorted(
        {b.value for r in report.agents for b in r.breakdowns if b.dimension == dimension}
    )
    charts = []
    for column in report.columns:
        cells: dict[tuple[str, str], Cell] = {}
        for result in report.agents:
            for value in slices:
                part = result.breakdown(dimension, value)
                task = next((t for t in part.tasks if t.key == column.key), None) if part else None
                if task is not None:
                    cells[(value, result.agent)] = task_cell(task)
        used = [v for v in slices if any((v, a) in cells for a in agents)]
        if not used:
            continue
        title = f"{short_label(column.label)}, {DIMENSION_TITLES[dimension].lower()}"
        charts.append((column, bar_chart(title, used, agents, cells)))
    return charts


def charts_html(report: Report) -> str:
    """Charts comparing agents: pass@1 per task, then per class, per complexity and with traces
    on and off, one chart per task."""
    if not report.agents or not report.columns:
        return '<p class="muted">No trials.</p>'
    out = [f'<figure id="chart-tasks">{_task_chart(report)}</figure>']
    for dimension in ("class", "complexity", "traces"):
        charts = _dimension_charts(report, dimension)
        if not charts:
            continue
        figures = "".join(
            f'<figure id="chart-{dimension}-{_id(column.key)}">{svg}</figure>'
            for column, svg in charts
        )
        out.append(
            f'<details class="charts" open><summary>{escape(DIMENSION_TITLES[dimension])}'
            f'</summary><div class="chart-grid">{figures}</div></details>'
        )
    return "".join(out)


def _pooled_html(report: Report) -> str:
    rows = [
        [
            t.label,
            pct_estimate(t.pass_at_k[0].estimate) if t.pass_at_k else "-",
            pct_estimate(t.lower_bound),
            f"{t.passed}/{t.trials}",
        ]
        for t in report.tasks
    ]
    rows += [
        [r.label, pct_estimate(r.estimate), pct_estimate(r.lower_bound), ""]
        for r in report.resolution
    ]
    rows += [[s.label, num_estimate(s.estimate), "", str(s.trials)] for s in report.scores]
    table = Table(
        "Pooled over every agent (asked for)",
        ["Metric", "Value", "Lower bound", "Passed / trials"],
        rows,
    )
    return table_html(table, "pooled")


def _pass_at_k_html(report: Report) -> str:
    headers, rows = pass_at_k_rows(report)
    return table_html(Table("pass@k by agent and task", headers, rows), "pass-at-k")


def report_sections(report: Report, extra: Sequence[str] = ()) -> str:
    """Every section of the report as HTML, in reading order.

    Args:
        report: The report.
        extra: Further sections (already HTML), placed after the breakdowns.
    """
    banner = ""
    if report.lower_bound_differs:
        banner = f'<p class="banner" id="lower-bound-flag">{FLAG} Flagged: {escape(FLAG_NOTE)}</p>'
    parts = [
        '<section id="agents"><h2>Agents by task</h2>',
        banner,
        main_table_html(report),
        "</section>",
        '<section id="charts"><h2>Charts</h2>',
        charts_html(report),
        "</section>",
        '<section id="details"><h2>Resolution, scores, outcomes</h2>',
        table_html(scores_table(report), "scores"),
        table_html(outcomes_table(report), "outcomes"),
        table_html(failures_table(report), "failures"),
        table_html(usage_table(report), "usage"),
        table_html(collateral_table(report), "collateral"),
        table_html(
            Table(
                "Collateral changes per trial",
                ["Agent", "Trial", "Scenario", "Changes"],
                collateral_trial_rows(report),
            ),
            "collateral-trials",
        ),
        _pass_at_k_html(report),
        "</section>",
        '<section id="comparisons-section"><h2>Pairwise comparisons</h2>',
        table_html(comparisons_table(report.comparisons), "comparisons", heading=False),
        "</section>",
        '<section id="breakdowns"><h2>Breakdowns</h2>',
    ]
    for dimension in DIMENSIONS:
        parts.append(table_html(breakdown_table(report, dimension), f"breakdown-{dimension}"))
    parts.append("</section>")
    if report.pooled:
        parts += ['<section id="pooled-section">', _pooled_html(report), "</section>"]
    parts += list(extra)
    return "".join(parts)
