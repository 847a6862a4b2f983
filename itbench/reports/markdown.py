"""Markdown rendering of a report: every number with the label that says what it measures."""

from __future__ import annotations

from itbench.core.models.report import Estimate, Report


def _pct(est: Estimate) -> str:
    if est.mean is None:
        return "n/a"
    err = f" ± {100 * est.stderr:.1f}" if est.stderr is not None else ""
    return f"{100 * est.mean:.1f} %{err}"


def _num(est: Estimate) -> str:
    if est.mean is None:
        return "n/a"
    err = f" ± {est.stderr:.3f}" if est.stderr is not None else ""
    return f"{est.mean:.3f}{err}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(report: Report) -> str:
    """Render a report as Markdown tables.

    Args:
        report: The report.

    Returns:
        Markdown with the headline counts, pass@k per task, end-to-end resolution rates, mean
        scores, timings, breakdowns and the Errored bucket; ± is the standard error across
        scenarios.
    """
    out: list[str] = [
        f"# ITBench report: {_cell(report.agent)}",
        "",
        f"- Schema: `{report.schema_version}`; evaluation profile: `{report.profile}`",
        f"- Created: {report.created_at.isoformat()}",
        f"- Runs: {', '.join(report.runs) or 'none'}",
        f"- Trials: {report.trials} ({report.succeeded} succeeded, {report.failed} failed, "
        f"{report.errored.count} errored and excluded from every rate)",
        "",
        "## Tasks",
        "",
        "| Metric | Value | Passed / trials | Scenarios |",
        "|---|---|---|---|",
    ]
    for task in report.tasks:
        for p in task.pass_at_k:
            out.append(
                f"| {_cell(p.label)} | {_pct(p.estimate)} | {task.passed} / {task.trials} "
                f"| {p.estimate.scenarios} |"
            )
    out += [
        "",
        "## End-to-end resolution",
        "",
        "| Metric | Value | Resolved / trials |",
        "|---|---|---|",
    ]
    for r in report.resolution:
        out.append(f"| {_cell(r.label)} | {_pct(r.estimate)} | {r.resolved} / {r.trials} |")
    if report.scores:
        out += ["", "## Scores", "", "| Metric | Mean | Trials |", "|---|---|---|"]
        for s in report.scores:
            out.append(f"| {_cell(s.label)} | {_num(s.estimate)} | {s.trials} |")
    if report.timings:
        out += ["", "## Times", "", "| Metric | Mean (s) | Successes / trials |", "|---|---|---|"]
        for t in report.timings:
            mean = f"{t.mean_seconds:.1f}" if t.mean_seconds is not None else "inf (no success)"
            out.append(f"| {_cell(t.label)} | {mean} | {t.successes} / {t.trials} |")
    if report.breakdowns:
        out += [
            "",
            "## Breakdowns (pass@1)",
            "",
            "| Slice | Metric | Value | Trials (errored) |",
            "|---|---|---|---|",
        ]
        for b in report.breakdowns:
            slice_name = f"{b.dimension}={_cell(b.value)}"
            for task in b.tasks:
                value = _pct(task.pass_at_k[0].estimate) if task.pass_at_k else "n/a"
                out.append(
                    f"| {slice_name} | {_cell(task.label)} | {value} | {b.trials} ({b.errored}) |"
                )
            for r in b.resolution:
                out.append(
                    f"| {slice_name} | {_cell(r.label)} | {_pct(r.estimate)} | {b.trials} "
                    f"({b.errored}) |"
                )
    out += ["", "## Errored trials (platform failures, not counted against the agent)", ""]
    if report.errored.count == 0:
        out.append("None.")
    else:
        out += ["| Reason | Count |", "|---|---|"]
        out += [f"| {_cell(reason)} | {n} |" for reason, n in report.errored.reasons.items()]
        out += ["", "| Trial | Scenario | Reason |", "|---|---|---|"]
        out += [
            f"| {_cell(t.trial)} | {_cell(t.scenario)} | {_cell(t.reason)} |"
            for t in report.errored.trials
        ]
    return "\n".join(out) + "\n"
