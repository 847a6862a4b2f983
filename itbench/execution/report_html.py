"""The self-contained HTML report page of a run: inline CSS, SVG charts and a small script, no
network. The tables and charts are rendered here, so the page shows them without JavaScript; the
script only fills in each trial's details (timeline, trajectory, reports against the ground truth)
when it is opened."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from html import escape
from importlib import resources
from typing import Any

from itbench.core.models.report import Report, TrialRecord
from itbench.core.models.scenario import GroundTruth
from itbench.core.models.trial import AgentOutput, TrialPhase, TrialScores, TrialStatus
from itbench.core.scoring.measures import TASKS_BY_KEY
from itbench.core.tasks import DOMAIN_TASKS
from itbench.execution.plan import TrialPlan
from itbench.reports.html import report_sections

TEMPLATE = "report.html"
CONTENT_CHARS = 400
"""Characters of a call's content the trajectory view keeps."""
ANSWER_CHARS = 240
"""Characters of a call's answer the trajectory view keeps."""


def _template() -> str:
    return (resources.files("itbench.execution") / "templates" / TEMPLATE).read_text("utf-8")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _compact(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return _cut(text, limit)


def _action_content(action: Mapping[str, Any]) -> list[str]:
    verb = str(action.get("verb", ""))
    target = f"{action.get('kind', '')}/{action.get('name', '')}".rstrip("/")
    parts = [f"{verb} {target}".strip()]
    if action.get("flag"):
        parts.append(f"flag {action['flag']}={action.get('variant', '')}")
    for key in ("container", "image", "replicas"):
        if action.get(key) not in (None, ""):
            parts.append(f"{key} {action[key]}")
    for key in ("limits", "requests", "env", "patch"):
        if action.get(key):
            parts.append(f"{key} {_compact(action[key])}")
    manifest = action.get("manifest")
    if isinstance(manifest, dict) and manifest:
        meta = manifest.get("metadata") if isinstance(manifest.get("metadata"), dict) else {}
        parts.append(f"manifest {manifest.get('kind', '?')}/{(meta or {}).get('name', '?')}")
    return parts


def _field_error(error: Any) -> str:
    if isinstance(error, Mapping):
        return f"{error.get('field', '')}: {error.get('message', '')}"
    return str(error)


def call_content(entry: Mapping[str, Any]) -> tuple[str, str]:
    """What one audited call asked for and, where the trail records it, what it got back.

    Args:
        entry: One audit-trail entry (`time`, `method`, `path`, `action`, `outcome`, `reason`,
            `detail`).

    Returns:
        The content (query, object, pod, flag and arguments, field errors) and an excerpt of
        the answer (an action's result message, or the answer the gateway recorded).
    """
    detail = entry.get("detail")
    if not isinstance(detail, Mapping):
        return "", ""
    parts: list[str] = []
    answer = ""
    if detail.get("kind"):
        name = detail.get("name") or ""
        parts.append(f"object {detail['kind']}/{name}" if name else f"kind {detail['kind']}")
    for key, value in detail.items():
        if key in ("kind", "name"):
            continue
        if key == "query":
            parts.append(f"query {value}")
        elif key == "action" and isinstance(value, Mapping):
            parts += _action_content(value)
        elif key == "result" and isinstance(value, Mapping):
            answer = f"{value.get('outcome', '')}: {value.get('message', '')}".strip(": ")
        elif key == "answer":
            answer = _compact(value, ANSWER_CHARS)
        elif key == "errors" and isinstance(value, list):
            parts += [
                f"{e.get('field', '')}: {e.get('message', '')}"
                if isinstance(e, Mapping)
                else str(e)
                for e in value
            ]
        elif key == "seconds":
            parts.append(f"wait {value} s")
        elif value not in (None, "", [], {}):
            parts.append(f"{key} {_compact(value)}")
    return _cut("; ".join(parts), CONTENT_CHARS), _cut(answer, ANSWER_CHARS)


_TRIAL_PATH = re.compile(r"^/v1/trials/[^/]+")
_CLOCK = re.compile(r"T(\d\d:\d\d:\d\d(?:\.\d+)?)")


def _route(path: str) -> str:
    """A call's path without the trial's own prefix (`/v1/trials/<id>/logs` -> `…/logs`)."""
    return _TRIAL_PATH.sub("…", path)


def _clock(time: str) -> str:
    """The time of day of an RFC 3339 time (trials last minutes), else the text itself."""
    match = _CLOCK.search(time)
    return match.group(1) if match else time


def _refs(items: Sequence[str]) -> str:
    return ", ".join(items) or "none"


def submitted_vs_truth(
    output: AgentOutput | None, truth: GroundTruth, scores: TrialScores | None
) -> list[dict[str, str]]:
    """The agent's submitted reports beside the ground truth, one row per aspect.

    Shown only after the trial, in the report: agents never see the ground truth.
    """
    rows: list[dict[str, str]] = []
    names = {e.id: f"{e.kind.value}/{e.name}" for e in truth.entities}
    diagnosis = output.diagnosis if output else None
    mitigation = output.mitigation if output else None
    posture = output.posture if output else None
    roots = [
        f"{names[e.id]}" + (f" (or {', '.join(e.aliases)})" if e.aliases else "")
        for e in truth.root_causes()
    ]
    if truth.entities or diagnosis is not None:
        rows.append(
            {
                "aspect": "Root causes",
                "submitted": _refs([e.ref() for e in diagnosis.entities if e.root_cause])
                if diagnosis
                else "no diagnosis submitted",
                "truth": _refs(roots) if roots else "none (no fault: nothing to name)",
            }
        )
        rows.append(
            {
                "aspect": "Other entities",
                "submitted": _refs([e.ref() for e in diagnosis.entities if not e.root_cause])
                if diagnosis
                else "",
                "truth": _refs([names[e.id] for e in truth.entities if not e.root_cause]),
            }
        )
        rows.append(
            {
                "aspect": "Propagation chain",
                "submitted": _refs(
                    [f"{e.source} → {e.target}" for e in diagnosis.propagation_chain]
                )
                if diagnosis
                else "",
                "truth": _refs(
                    [
                        f"{names.get(e.source, e.source)} → {names.get(e.target, e.target)}"
                        for e in truth.propagation
                    ]
                ),
            }
        )
    if scores is not None and scores.diagnosis is not None and scores.diagnosis.decoys_named:
        rows.append(
            {
                "aspect": "Decoys named as causes",
                "submitted": _refs(scores.diagnosis.decoys_named),
                "truth": "benign changes of the trial, not causes",
            }
        )
    if truth.mitigations or mitigation is not None:
        claimed = ""
        if mitigation is not None:
            claimed = _refs(mitigation.actions) + (
                " (claims resolved)" if mitigation.resolved else ""
            )
        rows.append(
            {
                "aspect": "Mitigation",
                "submitted": claimed or "no mitigation report",
                "truth": " | ".join(
                    m.description
                    + (
                        " ["
                        + "; ".join(f"{s.action} {s.kind.value}/{s.name}" for s in m.steps)
                        + "]"
                        if m.steps
                        else ""
                    )
                    for m in truth.mitigations
                )
                or "none",
            }
        )
    if truth.posture or posture is not None:
        rows.append(
            {
                "aspect": "Posture",
                "submitted": _refs(
                    [f"{a.control_id} on {a.target}: {a.result.value}" for a in posture.assessments]
                )
                if posture
                else "no posture report",
                "truth": _refs(
                    [f"{p.control_id} on {p.target}: {p.result.value}" for p in truth.posture]
                ),
            }
        )
    if truth.finops is not None:
        f = truth.finops
        rows.append(
            {
                "aspect": "Optimal footprint",
                "submitted": "",
                "truth": f"{f.cpu_cores:g} cores, {f.memory_bytes / 2**20:.0f} MiB, "
                f"{f.cost_per_hour:g}/h, efficiency {f.efficiency:g}",
            }
        )
    if diagnosis is not None and diagnosis.reasoning:
        rows.append(
            {"aspect": "Reasoning", "submitted": _cut(diagnosis.reasoning, 400), "truth": ""}
        )
    return rows


def _verdicts(record: TrialRecord | None, scores: TrialScores | None) -> list[dict[str, str]]:
    if record is None:
        return []
    tasks = record.tasks or list(DOMAIN_TASKS.get(record.domain, ()))
    out = []
    for key in tasks:
        task = TASKS_BY_KEY.get(key)
        if task is None:
            continue
        if record.phase == TrialPhase.ERRORED:
            verdict = "not scored (Errored)"
        elif scores is None:
            verdict = "fail (no scores)"
        else:
            verdict = "pass" if task.outcome(scores) else "fail"
        why = ""
        if scores is not None:
            if key.endswith(".diagnosis") and scores.diagnosis is not None:
                why = scores.diagnosis.reason
            elif key.endswith(".mitigation") and scores.mitigation is not None:
                why = scores.mitigation.reason
            elif key.endswith(".false-alarm") and scores.false_alarm is not None:
                why = scores.false_alarm.reason
        out.append({"task": task.label(1), "verdict": verdict, "reason": why})
    return out


def _scores_text(scores: TrialScores | None) -> str:
    if scores is None:
        return ""
    parts = []
    if scores.diagnosis is not None:
        d = scores.diagnosis
        parts.append(f"FL-NTAM {d.fl_ntam:.2f}, FPC-NTAM {d.fpc_ntam:.2f}")
    if scores.posture is not None:
        parts.append(f"posture {scores.posture.matched}/{scores.posture.expected}")
    if scores.finops is not None:
        parts.append(f"cost proximity {scores.finops.cost_proximity:.2f}")
    if scores.collateral:
        parts.append(f"{len(scores.collateral)} collateral change(s)")
    return ", ".join(parts)


def trial_rows(
    plans: Sequence[TrialPlan],
    statuses: Mapping[str, TrialStatus],
    records: Mapping[str, TrialRecord],
    trajectories: Mapping[str, Sequence[Mapping[str, Any]]],
) -> list[dict[str, Any]]:
    """The per-trial data the page's script renders when a trial is opened: outcome, task
    verdicts, timeline, the trajectory with each call's content, and the submitted reports
    against the ground truth."""
    rows = []
    for plan in plans:
        status = statuses[plan.name]
        record = records.get(plan.name)
        scores = status.scores
        trajectory = []
        for entry in trajectories.get(plan.name, []):
            content, answer = call_content(entry)
            trajectory.append(
                {
                    "time": _clock(str(entry.get("time", ""))),
                    "call": f"{entry.get('method', '')} {_route(str(entry.get('path', '')))}",
                    "action": str(entry.get("action", "")),
                    "content": content,
                    "answer": answer,
                    "outcome": str(entry.get("outcome", "")),
                    "reason": str(entry.get("reason", "")),
                }
            )
        rows.append(
            {
                "name": plan.name,
                "agent": plan.agent.name,
                "scenario": plan.scenario.name,
                "phase": status.phase.value,
                "reason": status.reason,
                "message": status.message,
                "scores_text": _scores_text(scores),
                "verdicts": _verdicts(record, scores),
                "collateral": [
                    {
                        "object": c.object,
                        "change": c.change.value,
                        "detail": c.detail,
                        "disqualifying": c.disqualifying,
                    }
                    for c in (scores.collateral if scores else [])
                ],
                "versus": submitted_vs_truth(
                    status.agent_output, plan.scenario.spec.ground_truth, scores
                ),
                "timeline": [
                    {"phase": e.phase.value, "time": e.time.isoformat(), "message": e.message}
                    for e in status.timeline
                ],
                "trajectory": trajectory,
            }
        )
    return rows


def _squares(group: Sequence[tuple[TrialPlan, TrialStatus]]) -> str:
    return "".join(
        f'<span class="cell {escape(s.phase.value)}" title="{escape(p.name)}: '
        f'{escape(s.phase.value)} ({escape(s.reason)})"></span>'
        for p, s in group
    )


def scenario_table(
    plans: Sequence[TrialPlan],
    statuses: Mapping[str, TrialStatus],
    records: Mapping[str, TrialRecord],
) -> str:
    """Per agent and scenario: one square per trial and the passes of each task."""
    groups: dict[tuple[str, str, bool], list[tuple[TrialPlan, TrialStatus]]] = {}
    for plan in plans:
        record = records.get(plan.name)
        traces = record.traces_enabled if record else True
        groups.setdefault((plan.agent.name, plan.scenario.name, traces), []).append(
            (plan, statuses[plan.name])
        )
    rows = []
    for (agent, scenario, traces), group in groups.items():
        first = records.get(group[0][0].name)
        tallies: dict[str, list[int]] = {}
        for plan, status in group:
            record = records.get(plan.name)
            if record is None or status.phase == TrialPhase.ERRORED:
                continue
            for task_key in record.tasks or DOMAIN_TASKS.get(record.domain, ()):
                task = TASKS_BY_KEY.get(task_key)
                if task is None:
                    continue
                tally = tallies.setdefault(task.name, [0, 0])
                tally[1] += 1
                tally[0] += bool(status.scores and task.outcome(status.scores))
        tasks = ", ".join(f"{name} {c}/{n}" for name, (c, n) in tallies.items()) or "-"
        cls = first.scenario_class if first else ""
        complexity = first.complexity.value if first and first.complexity else ""
        domain = first.domain.value if first else ""
        cells = [
            ("Agent", escape(agent)),
            ("Scenario", escape(scenario)),
            ("Domain", escape(domain)),
            ("Class", escape(cls)),
            ("Complexity", escape(complexity)),
            ("Traces", "on" if traces else "off"),
            ("Trials", _squares(group)),
            ("Passed per task", escape(tasks)),
        ]
        rows.append("<tr>" + "".join(f'<td data-label="{h}">{v}</td>' for h, v in cells) + "</tr>")
    head = "".join(
        f"<th>{h}</th>"
        for h in (
            "Agent",
            "Scenario",
            "Domain",
            "Class",
            "Complexity",
            "Traces",
            "Trials",
            "Passed per task",
        )
    )
    return (
        '<section id="scenarios-section"><h2>Per-scenario outcomes</h2>'
        '<p class="muted">One square per trial: <span class="Succeeded">succeeded</span>, '
        '<span class="Failed">failed</span>, <span class="Errored">errored</span>.</p>'
        f'<div class="scroll"><table id="scenarios" class="stack"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div></section>"
    )


def errored_table(report: Report, statuses: Mapping[str, TrialStatus]) -> str:
    """Every Errored trial with its reason and message (the platform's, not the agent's)."""
    rows = []
    for t in report.errored.trials:
        message = statuses[t.trial].message if t.trial in statuses else ""
        rows.append(
            f'<tr><td data-label="Agent">{escape(t.agent)}</td>'
            f'<td data-label="Trial">{escape(t.trial)}</td>'
            f'<td data-label="Reason">{escape(t.reason)}</td>'
            f'<td data-label="Message">{escape(message)}</td></tr>'
        )
    body = "".join(rows) or '<tr><td colspan="4" class="muted">none</td></tr>'
    return (
        '<section id="errored-section"><h2>Errored trials (platform, not counted against the '
        'agent)</h2><div class="scroll"><table id="errored" class="stack"><thead><tr>'
        "<th>Agent</th><th>Trial</th><th>Reason</th><th>Message</th></tr></thead>"
        f"<tbody>{body}</tbody></table></div></section>"
    )


_PLACEHOLDER = re.compile(r"__(TITLE|META|BODY|DATA)__")


def render_page(*, run: str, meta: str, body: str, trials: list[dict[str, Any]]) -> str:
    """Fill the page template.

    Args:
        run: The run's name (title).
        meta: One line about the run (agents, trials, profile, time).
        body: The server-rendered sections (HTML).
        trials: Per-trial rows for the script (see `trial_rows`).
    """
    payload = json.dumps({"trials": trials})
    # Inside a <script> element "</" or "<!--" could end the block early: escape every "<".
    payload = payload.replace("<", "\\u003c")
    values = {"TITLE": escape(run), "META": escape(meta), "BODY": body, "DATA": payload}
    # One pass, so that nothing inserted is ever taken for a placeholder.
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], _template())


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
        records: The trial records (tasks, effective complexity, traces of each trial).
        trajectories: Audit trail by trial name.
    """
    by_name = {r.trial: r for r in records}
    run = ", ".join(report.runs) or (plans[0].run if plans else "empty run")
    agents = ", ".join(a.agent for a in report.agents) or "none"
    meta = (
        f"agents {agents} | {report.trials} trials | profile {report.profile} | "
        f"created {report.created_at:%Y-%m-%d %H:%M:%S %Z} | schema {report.schema_version}"
    )
    body = report_sections(
        report,
        extra=[scenario_table(plans, statuses, by_name), errored_table(report, statuses)],
    )
    return render_page(
        run=run, meta=meta, body=body, trials=trial_rows(plans, statuses, by_name, trajectories)
    )
