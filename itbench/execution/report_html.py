"""The self-contained HTML report page: inline CSS, JavaScript and SVG charts, no network."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

from itbench.core.models.report import Report, TrialRecord
from itbench.core.models.trial import TrialStatus
from itbench.execution.plan import TrialPlan

TEMPLATE = "report.html"


def _template() -> str:
    return (resources.files("itbench.execution") / "templates" / TEMPLATE).read_text("utf-8")


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"


def _stderr(value: float | None) -> str:
    return "" if value is None else f"± {100 * value:.1f} pts, "


def metric_rows(report: Report) -> list[dict[str, str]]:
    """The report's headline metrics as display rows, each labelled by its task.

    Rows: pass@1 per task, mean scores (NTAM, proximities), MTTD/MTTR/TTP over successful
    trials, the end-to-end resolution rate per persona, and the Errored count.

    Args:
        report: The report.
    """
    rows: list[dict[str, str]] = []
    for task in report.tasks:
        first = task.pass_at_k[0].estimate if task.pass_at_k else None
        rows.append(
            {
                "label": task.label if "pass@" in task.label else f"{task.label} pass@1",
                "value": _pct(first.mean if first else None),
                "detail": f"{_stderr(first.stderr if first else None)}"
                f"{task.passed}/{task.trials} trials, {task.scenarios} scenarios",
            }
        )
    for score in report.scores:
        mean = score.estimate.mean
        rows.append(
            {
                "label": score.label,
                "value": "-" if mean is None else f"{mean:.3f}",
                "detail": f"{score.trials} trials, {score.estimate.scenarios} scenarios",
            }
        )
    for timing in report.timings:
        value = timing.mean_seconds
        rows.append(
            {
                "label": timing.label,
                "value": "inf" if value is None else f"{value:.0f} s",
                "detail": f"over {timing.successes} successful of {timing.trials} trials",
            }
        )
    for rate in report.resolution:
        rows.append(
            {
                "label": rate.label,
                "value": _pct(rate.estimate.mean),
                "detail": f"{_stderr(rate.estimate.stderr)}{rate.resolved}/{rate.trials} trials",
            }
        )
    reasons = ", ".join(f"{k} {v}" for k, v in report.errored.reasons.items())
    rows.append(
        {
            "label": "Errored trials (platform, not counted against the agent)",
            "value": str(report.errored.count),
            "detail": reasons,
        }
    )
    return rows


def breakdown_rows(report: Report) -> list[dict[str, str]]:
    """pass@1 of every task and the resolution rate per slice (domain, class, complexity,
    traces), as display rows.

    Args:
        report: The report.
    """
    rows: list[dict[str, str]] = []
    for part in report.breakdowns:
        tasks = "; ".join(
            f"{t.key} {_pct(t.pass_at_k[0].estimate.mean if t.pass_at_k else None)}"
            for t in part.tasks
        )
        resolution = "; ".join(f"{r.domain.value} {_pct(r.estimate.mean)}" for r in part.resolution)
        rows.append(
            {
                "dimension": part.dimension,
                "value": part.value,
                "trials": str(part.trials),
                "errored": str(part.errored),
                "tasks": tasks,
                "resolution": resolution,
            }
        )
    return rows


def _scores_text(status: TrialStatus) -> str:
    scores = status.scores
    if scores is None:
        return ""
    parts = []
    if scores.diagnosis is not None:
        d = scores.diagnosis
        parts.append(
            f"diagnosis {'pass' if d.passed else 'fail'} "
            f"(FL-NTAM {d.fl_ntam:.2f}, FPC-NTAM {d.fpc_ntam:.2f})"
        )
    if scores.mitigation is not None:
        parts.append(f"mitigation {'pass' if scores.mitigation.passed else 'fail'}")
    if scores.posture is not None:
        parts.append(f"posture {scores.posture.matched}/{scores.posture.expected}")
    if scores.finops is not None:
        parts.append(f"cost proximity {scores.finops.cost_proximity:.2f}")
    return ", ".join(parts)


def trial_rows(
    plans: Sequence[TrialPlan],
    statuses: Mapping[str, TrialStatus],
    complexities: Mapping[str, str],
    trajectories: Mapping[str, Sequence[Mapping[str, Any]]],
) -> list[dict[str, Any]]:
    """The per-trial data the page renders (outcome, task results, timeline, trajectory)."""
    rows = []
    for plan in plans:
        status = statuses[plan.name]
        scores = status.scores
        diagnosis: bool | None = None
        mitigation: bool | None = None
        if scores is not None and scores.finops is not None:
            diagnosis = scores.finops.diagnosis_passed
            mitigation = scores.finops.mitigation_passed
        elif scores is not None:
            diagnosis = scores.diagnosis.passed if scores.diagnosis is not None else None
            mitigation = scores.mitigation.passed if scores.mitigation is not None else None
            if scores.posture is not None:
                diagnosis = scores.posture.passed
        resolved: bool | None = None
        if diagnosis is not None:
            resolved = diagnosis and (mitigation if mitigation is not None else True)
        telemetry = plan.scenario.spec.environment.telemetry.masked_by(plan.telemetry)
        rows.append(
            {
                "name": plan.name,
                "agent": plan.agent.value,
                "scenario": plan.scenario.name,
                "attempt": plan.attempt,
                "domain": plan.scenario.spec.domain.value,
                "scenario_class": plan.scenario.spec.scenario_class,
                "complexity": complexities.get(plan.scenario.name, ""),
                "traces": telemetry.traces,
                "phase": status.phase.value,
                "reason": status.reason,
                "message": status.message,
                "diagnosis": diagnosis,
                "mitigation": mitigation,
                "resolved": resolved,
                "scores_text": _scores_text(status),
                "timeline": [
                    {"phase": e.phase.value, "time": e.time.isoformat(), "message": e.message}
                    for e in status.timeline
                ],
                "trajectory": [
                    {
                        k: entry.get(k, "")
                        for k in ("time", "method", "path", "action", "outcome", "reason")
                    }
                    for entry in trajectories.get(plan.name, [])
                ],
            }
        )
    return rows


def render_page(
    *,
    run: str,
    meta: str,
    metrics: list[dict[str, str]],
    breakdowns: list[dict[str, str]],
    trials: list[dict[str, Any]],
) -> str:
    """Fill the page template with the run's data.

    Args:
        run: The run's name (title).
        meta: One line about the run (agents, time, profile).
        metrics: Rows of the metrics table.
        breakdowns: Rows of the breakdown table.
        trials: Per-trial rows (see `trial_rows`).
    """
    payload = json.dumps(
        {
            "run": run,
            "meta": meta,
            "metrics": metrics,
            "breakdowns": breakdowns,
            "trials": trials,
        }
    )
    # Inside a <script> element "</" or "<!--" could end the block early: escape every "<".
    payload = payload.replace("<", "\\u003c")
    title = run.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _template().replace("__TITLE__", title).replace("__DATA__", payload)


def render_html(
    report: Report,
    plans: Sequence[TrialPlan],
    statuses: Mapping[str, TrialStatus],
    records: Sequence[TrialRecord],
    trajectories: Mapping[str, Sequence[Mapping[str, Any]]],
) -> str:
    """The report page of a finished run.

    Args:
        report: The aggregated report.
        plans: The run's trials.
        statuses: Final status by trial name.
        records: The trial records (for the effective complexity of each scenario).
        trajectories: Audit trail by trial name.
    """
    complexities = {r.scenario: r.complexity.value if r.complexity else "" for r in records}
    run = ", ".join(report.runs) or (plans[0].run if plans else "empty run")
    meta = (
        f"agent {report.agent} | {report.trials} trials | profile {report.profile} | "
        f"created {report.created_at:%Y-%m-%d %H:%M:%S %Z} | schema {report.schema_version}"
    )
    return render_page(
        run=run,
        meta=meta,
        metrics=metric_rows(report),
        breakdowns=breakdown_rows(report),
        trials=trial_rows(plans, statuses, complexities, trajectories),
    )
