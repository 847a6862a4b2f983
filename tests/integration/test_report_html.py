"""The run's report.html is self-contained and renders in headless Chromium without errors."""

from __future__ import annotations

import re
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from itbench.core.models.agent_submission import BuiltinAgent
from itbench.core.models.scenario import Scenario
from itbench.core.models.trial import (
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
from itbench.execution.report_html import metric_rows, render_html, render_page

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
    if passed is not None:
        scores = TrialScores(
            profile=DEFAULT_PROFILE.id,
            diagnosis=DiagnosisScores(
                passed=passed,
                fl_ntam=1.0 if passed else 0.2,
                fpc_ntam=0.8,
                ttd_seconds=40.0 if passed else None,
            ),
            mitigation=MitigationScores(passed=passed, ttr_seconds=90.0 if passed else None),
        )
    timeline = [
        TimelineEntry(phase=p, time=T0 + timedelta(seconds=30 * i), message=f"{p.value} entered")
        for i, p in enumerate(
            [TrialPhase.PENDING, TrialPhase.PROVISIONING, TrialPhase.READY, phase]
        )
    ]
    return TrialStatus(
        phase=phase, reason=reason, message=message, timeline=timeline, scores=scores
    )


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
    trajectories = {
        plans[0].name: [
            {
                "time": T0.isoformat(),
                "method": "POST",
                "path": "/v1/trials/x/started",
                "action": "protocol.started",
                "outcome": "ok",
                "reason": "",
            },
            {
                "time": T0.isoformat(),
                "method": "POST",
                "path": "/v1/trials/x/actions",
                "action": "act.delete",
                "outcome": "refused",
                "reason": HOSTILE,
            },
        ]
    }
    html = render_html(report, plans, statuses, records, trajectories)
    path = tmp_path / "report.html"
    path.write_text(html, encoding="utf-8")
    return path


def render(path: Path) -> tuple[str, list[str]]:
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


def test_metric_rows_label_every_number_by_task(tmp_path: Path) -> None:
    plans = plan_trials("r", [scenario(True)], [BuiltinAgent.HEURISTIC_SRE], trials=2, seed=1)
    statuses = {
        plans[0].name: finished(TrialPhase.SUCCEEDED, "TasksPassed", True, "ok"),
        plans[1].name: finished(TrialPhase.ERRORED, "RecoveryFailed", None, "env"),
    }
    records = [trial_record(p, statuses[p.name]) for p in plans]
    report = build_report(records, DEFAULT_PROFILE, agent="a", created_at=T0)
    rows = {r["label"]: r for r in metric_rows(report)}
    diagnosis = next(
        r for label, r in rows.items() if "diagnosis" in label.lower() and "pass@1" in label
    )
    assert diagnosis["value"] == "100.0 %"
    errored = rows["Errored trials (platform, not counted against the agent)"]
    assert errored["value"] == "1" and "RecoveryFailed 1" in errored["detail"]


@needs_chromium
def test_report_page_renders_in_headless_chromium_without_console_errors(
    tmp_path: Path,
) -> None:
    dom, console = render(page(tmp_path))
    assert console == [], console
    assert 'data-rendered="6"' in dom, "the page script ran to its end"
    assert "<title>ITBench report: run-html</title>" in dom
    assert dom.count('class="cell ') == 6, "one square per trial"
    assert "<svg" in dom and "pass@1 by complexity" in dom
    assert "FaultDidNotManifest" in dom, "the errored trial is listed"
    assert "pwned" not in dom.split("</title>")[0], "hostile data did not run as a script"


@needs_chromium
def test_the_chromium_check_catches_script_errors(tmp_path: Path) -> None:
    broken = render_page(run="x", meta="", metrics=[], breakdowns=[], trials=[]).replace(
        '"use strict";', '"use strict"; undefinedFunction();'
    )
    path = tmp_path / "broken.html"
    path.write_text(broken)
    dom, console = render(path)
    assert any("Uncaught ReferenceError" in line for line in console)
    assert 'data-rendered="' not in dom
