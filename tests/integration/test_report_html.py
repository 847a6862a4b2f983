"""The run's report.html is self-contained, renders in headless Chromium without errors, and its
trajectory view shows what each call asked for and the reports against the ground truth."""

from __future__ import annotations

import re
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from itbench.core.models.agent_io import (
    DiagnosisReport,
    MitigationReport,
    PredictedEdge,
    PredictedEntity,
)
from itbench.core.models.agent_submission import BuiltinAgent
from itbench.core.models.scenario import EntityKind, Scenario
from itbench.core.models.trial import (
    AgentOutput,
    CollateralChange,
    CollateralKind,
    DiagnosisScores,
    MitigationScores,
    TimelineEntry,
    TrialPhase,
    TrialScores,
    TrialStatus,
)
from itbench.core.scoring.aggregate import build_report
from itbench.core.scoring.profile import DEFAULT_PROFILE
from itbench.execution.embedded import trial_record
from itbench.execution.plan import plan_trials
from itbench.execution.report_html import (
    call_content,
    render_html,
    render_page,
    submitted_vs_truth,
    trial_rows,
)
from itbench.reports.tables import main_table

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None,
    reason="headless Chromium is missing: `apt-get install -y chromium` (.ci/run installs it)",
)
T0 = datetime(2026, 1, 1, tzinfo=UTC)
SCENARIO = Path(__file__).parents[2] / "scenarios" / "sre" / "cart-flagd-failure" / "scenario.yaml"
HOSTILE = '</script><script>document.title="pwned"</script><!--'


def scenario(traces: bool) -> Scenario:
    doc = yaml.safe_load(SCENARIO.read_text())
    doc["metadata"]["name"] = f"cart-flagd-failure{'' if traces else '-notraces'}"
    doc["spec"]["environment"]["telemetry"]["traces"] = traces
    return Scenario.model_validate(doc)


def finished(phase: TrialPhase, reason: str, passed: bool | None, message: str) -> TrialStatus:
    scores = None
    output = None
    if passed is not None:
        scores = TrialScores(
            profile=DEFAULT_PROFILE.id,
            diagnosis=DiagnosisScores(
                passed=passed,
                fl_ntam=1.0 if passed else 0.2,
                fpc_ntam=0.8,
                ttd_seconds=40.0 if passed else None,
                reason="" if passed else "Deployment/checkout is not a root cause",
            ),
            mitigation=MitigationScores(passed=passed, ttr_seconds=90.0 if passed else None),
            collateral=[]
            if passed
            else [
                CollateralChange(
                    object="Deployment/ad",
                    change=CollateralKind.RESTARTED,
                    detail="a healthy service was restarted",
                )
            ],
        )
        output = AgentOutput(
            diagnosis=DiagnosisReport(
                entities=[
                    PredictedEntity(
                        kind=EntityKind.DEPLOYMENT,
                        name="cart" if passed else "checkout",
                        root_cause=True,
                    )
                ],
                propagation_chain=[
                    PredictedEdge(source="Deployment/cart", target="Deployment/checkout")
                ],
                reasoning=f"errors on cart {HOSTILE}",
            ),
            mitigation=MitigationReport(actions=["set flag cartFailure off"], resolved=True),
        )
    timeline = [
        TimelineEntry(phase=p, time=T0 + timedelta(seconds=30 * i), message=f"{p.value} entered")
        for i, p in enumerate(
            [TrialPhase.PENDING, TrialPhase.PROVISIONING, TrialPhase.READY, phase]
        )
    ]
    return TrialStatus(
        phase=phase,
        reason=reason,
        message=message,
        timeline=timeline,
        scores=scores,
        agent_output=output,
    )


TRAJECTORY = [
    {
        "time": "2026-01-01T00:02:45+00:00",
        "method": "POST",
        "path": "/v1/trials/x/started",
        "action": "protocol.started",
        "outcome": "ok",
        "reason": "",
        "detail": {},
    },
    {
        "time": "2026-01-01T00:02:47+00:00",
        "method": "GET",
        "path": "/v1/trials/x/metrics/query",
        "action": "observe.metrics.query",
        "outcome": "ok",
        "reason": "",
        "detail": {"query": 'sum(rate(http_requests_total{code="500"}[5m]))'},
    },
    {
        "time": "2026-01-01T00:02:49+00:00",
        "method": "GET",
        "path": "/v1/trials/x/kubectl/get",
        "action": "observe.kubectl.get",
        "outcome": "ok",
        "reason": "",
        "detail": {"kind": "ConfigMap", "name": "flagd-config"},
    },
    {
        "time": "2026-01-01T00:02:51+00:00",
        "method": "POST",
        "path": "/v1/trials/x/actions",
        "action": "act.set-flag",
        "outcome": "ok",
        "reason": "",
        "detail": {
            "action": {
                "verb": "set-flag",
                "kind": "ConfigMap",
                "name": "flagd-config",
                "flag": "cartFailure",
                "variant": "off",
            },
            "result": {
                "ok": True,
                "outcome": "applied",
                "message": "configmap/flagd-config patched (cartFailure=off)",
            },
        },
    },
    {
        "time": "2026-01-01T00:02:53+00:00",
        "method": "POST",
        "path": "/v1/trials/x/actions",
        "action": "act.delete",
        "outcome": "refused",
        "reason": HOSTILE,
        "detail": {"action": {"verb": "delete", "kind": "Node", "name": "node-1"}},
    },
    {
        "time": "2026-01-01T00:02:55+00:00",
        "method": "POST",
        "path": "/v1/trials/x/diagnosis",
        "action": "submit.diagnosis",
        "outcome": "rejected",
        "reason": "invalid report",
        "detail": {"errors": [{"field": "entities.0.kind", "message": "not a kind"}]},
    },
]


def page(tmp_path: Path) -> Path:
    plans = plan_trials(
        "run-html",
        [scenario(True), scenario(False)],
        [BuiltinAgent.HEURISTIC_SRE],
        trials=3,
        seed=42,
    )
    outcomes = [
        (TrialPhase.SUCCEEDED, "TasksPassed", True, "every task passed"),
        (TrialPhase.FAILED, "TasksFailed", False, "agent: failed: SRE diagnosis"),
        (TrialPhase.ERRORED, "FaultDidNotManifest", None, f"fault injection: {HOSTILE}"),
    ]
    statuses = {plan.name: finished(*outcomes[i % len(outcomes)]) for i, plan in enumerate(plans)}
    records = [trial_record(plan, statuses[plan.name]) for plan in plans]
    report = build_report(records, DEFAULT_PROFILE, agent="heuristic-sre", created_at=T0)
    html = render_html(report, plans, statuses, records, {plans[0].name: TRAJECTORY})
    path = tmp_path / "report.html"
    path.write_text(html, encoding="utf-8")
    return path


def render(path: Path, *flags: str) -> tuple[str, list[str]]:
    """Load a page in headless Chromium; return the DOM after scripts ran and console lines."""
    assert CHROMIUM is not None
    result = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=5000",
            *flags,
            "--dump-dom",
            path.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    console = [line for line in result.stderr.splitlines() if ":CONSOLE" in line]
    return result.stdout, console


def test_page_is_self_contained(tmp_path: Path) -> None:
    html = page(tmp_path).read_text()
    assert not re.search(r"""(src|href)\s*=""", html), "no external resources"
    assert "@import" not in html and "url(" not in html
    urls = set(re.findall(r"https?://[^\s\"'<>]+", html))
    assert urls <= {"http://www.w3.org/2000/svg"}, urls
    assert HOSTILE not in html, "data cannot close the script block"


def test_main_table_labels_every_number_by_task(tmp_path: Path) -> None:
    plans = plan_trials("r", [scenario(True)], [BuiltinAgent.HEURISTIC_SRE], trials=2, seed=1)
    statuses = {
        plans[0].name: finished(TrialPhase.SUCCEEDED, "TasksPassed", True, "ok"),
        plans[1].name: finished(TrialPhase.ERRORED, "RecoveryFailed", None, "env"),
    }
    records = [trial_record(p, statuses[p.name]) for p in plans]
    report = build_report(records, DEFAULT_PROFILE, agent="a", created_at=T0)
    table = main_table(report.columns, report.agents)
    assert table.headers[2:4] == [
        "SRE diagnosis pass@1 (root cause named)",
        "SRE mitigation pass@1 (alerts cleared, health at baseline)",
    ]
    (row,) = table.rows
    assert row[0] == "heuristic-sre"
    assert row[1] == "2 (1 succeeded, 0 failed, 1 errored)"
    # One Errored trial of the only scenario: the lower bound halves and is flagged.
    assert row[2] == "100.0 % (≥ 50.0 %) ⚑"
    assert "Errored trials change this number" in table.note


def test_trajectory_shows_each_calls_content_and_answer() -> None:
    contents = [call_content(entry) for entry in TRAJECTORY]
    assert contents[0] == ("", "")
    assert contents[1] == ('query sum(rate(http_requests_total{code="500"}[5m]))', "")
    assert contents[2] == ("object ConfigMap/flagd-config", "")
    assert contents[3] == (
        "set-flag ConfigMap/flagd-config; flag cartFailure=off",
        "applied: configmap/flagd-config patched (cartFailure=off)",
    )
    assert contents[4] == ("delete Node/node-1", "")
    assert contents[5] == ("entities.0.kind: not a kind", "")
    recorded = call_content({"detail": {"pod": "cart-1", "answer": "x" * 1000}})
    assert recorded[0] == "pod cart-1"
    assert len(recorded[1]) == 240 and recorded[1].endswith("…"), "answers are cut short"


def test_submitted_reports_are_shown_against_the_ground_truth() -> None:
    truth = scenario(True).spec.ground_truth
    status = finished(TrialPhase.FAILED, "TasksFailed", False, "failed")
    rows = {r["aspect"]: r for r in submitted_vs_truth(status.agent_output, truth, status.scores)}
    assert rows["Root causes"]["submitted"] == "Deployment/checkout"
    assert rows["Root causes"]["truth"].startswith("Deployment/cart (or ")
    assert rows["Propagation chain"]["submitted"] == "Deployment/cart → Deployment/checkout"
    assert "→" in rows["Propagation chain"]["truth"]
    assert rows["Mitigation"]["submitted"] == "set flag cartFailure off (claims resolved)"
    assert "set-flag" in rows["Mitigation"]["truth"]
    nothing = {r["aspect"]: r for r in submitted_vs_truth(None, truth, None)}
    assert nothing["Root causes"]["submitted"] == "no diagnosis submitted"


def test_trial_rows_carry_verdicts_collateral_and_the_trajectory() -> None:
    plans = plan_trials("r", [scenario(True)], [BuiltinAgent.HEURISTIC_SRE], trials=1, seed=1)
    status = finished(TrialPhase.FAILED, "AgentInducedFailure", False, "the agent broke it")
    records = {plans[0].name: trial_record(plans[0], status)}
    (row,) = trial_rows(plans, {plans[0].name: status}, records, {plans[0].name: TRAJECTORY})
    assert row["reason"] == "AgentInducedFailure"
    assert [v["verdict"] for v in row["verdicts"]] == ["fail", "fail"]
    assert row["verdicts"][0]["reason"] == "Deployment/checkout is not a root cause"
    assert row["collateral"] == [
        {
            "object": "Deployment/ad",
            "change": "Restarted",
            "detail": "a healthy service was restarted",
            "disqualifying": False,
        }
    ]
    assert row["trajectory"][3]["call"] == "POST …/actions"
    assert row["trajectory"][3]["time"] == "00:02:51"
    assert row["trajectory"][3]["answer"].startswith("applied: ")


@needs_chromium
def test_report_page_renders_in_headless_chromium_without_console_errors(
    tmp_path: Path,
) -> None:
    dom, console = render(page(tmp_path))
    assert console == [], console
    assert 'data-rendered="6"' in dom, "the page script ran to its end"
    assert "<title>ITBench report: run-html</title>" in dom
    assert dom.count('class="cell ') == 6, "one square per trial"
    assert 'id="chart-tasks"' in dom and "pass@1 per task, by agent" in dom
    assert "FaultDidNotManifest" in dom, "the errored trial is listed"
    assert 'id="lower-bound-flag"' in dom, "Errored trials change pass@1: the page says so"
    assert "pwned" not in dom.split("</title>")[0], "hostile data did not run as a script"


@needs_chromium
def test_opened_trial_shows_its_calls_and_reports_against_the_ground_truth(
    tmp_path: Path,
) -> None:
    path = page(tmp_path)
    opener = '<script>document.querySelector("details.trial").open = true;</script></body>'
    path.write_text(path.read_text().replace("</body>", opener))
    dom, console = render(path)
    assert console == [], console
    assert 'data-filled="1"' in dom
    assert "Submitted reports against the ground truth" in dom
    assert "flag cartFailure=off" in dom
    assert "applied: configmap/flagd-config patched (cartFailure=off)" in dom
    assert "object ConfigMap/flagd-config" in dom


@needs_chromium
def test_the_chromium_check_catches_script_errors(tmp_path: Path) -> None:
    broken = render_page(run="x", meta="", body="", trials=[]).replace(
        '"use strict";', '"use strict"; undefinedFunction();'
    )
    path = tmp_path / "broken.html"
    path.write_text(broken)
    dom, console = render(path)
    assert any("Uncaught ReferenceError" in line for line in console)
    assert 'data-rendered="' not in dom
