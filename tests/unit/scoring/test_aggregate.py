"""Report aggregation: pass@k across scenarios, the Errored bucket, labels and breakdowns."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from itbench.core.models.base import Complexity, Domain
from itbench.core.models.report import TrialRecord
from itbench.core.models.trial import (
    DiagnosisScores,
    FinOpsScores,
    MitigationScores,
    PostureScores,
    TrialPhase,
    TrialScores,
)
from itbench.core.scoring.aggregate import build_report, headline
from itbench.core.scoring.profile import DEFAULT_PROFILE

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def sre(
    scenario: str,
    attempt: int,
    *,
    diag: bool,
    mit: bool,
    traces: bool = True,
    ttd: float = 60.0,
    ttr: float = 300.0,
    complexity: Complexity = Complexity.EASY,
) -> TrialRecord:
    return TrialRecord(
        trial=f"{scenario}-{int(traces)}-{attempt}",
        run="run-1",
        scenario=scenario,
        attempt=attempt,
        domain=Domain.SRE,
        scenario_class="CacheFailure",
        complexity=complexity,
        traces_enabled=traces,
        phase=TrialPhase.SUCCEEDED if diag and mit else TrialPhase.FAILED,
        scores=TrialScores(
            profile="default@1",
            diagnosis=DiagnosisScores(
                passed=diag,
                fl_ntam=1.0 if diag else 0.25,
                fpc_ntam=0.5,
                ttd_seconds=ttd if diag else None,
            ),
            mitigation=MitigationScores(passed=mit, ttr_seconds=ttr if mit else None),
        ),
        agent="sre-agent",
    )


def errored(scenario: str, attempt: int, reason: str) -> TrialRecord:
    return TrialRecord(
        trial=f"{scenario}-e-{attempt}",
        run="run-1",
        scenario=scenario,
        attempt=attempt,
        domain=Domain.SRE,
        scenario_class="CacheFailure",
        phase=TrialPhase.ERRORED,
        reason=reason,
        agent="sre-agent",
    )


def test_pass_at_k_is_averaged_over_scenarios_with_standard_error() -> None:
    records = [
        sre("a", 0, diag=True, mit=False),
        sre("a", 1, diag=False, mit=False),
        sre("b", 0, diag=False, mit=False),
        sre("b", 1, diag=False, mit=False),
    ]
    report = build_report(records, DEFAULT_PROFILE, agent="sre-agent", created_at=NOW)
    diagnosis = report.task("sre.diagnosis")
    assert diagnosis is not None
    assert [p.k for p in diagnosis.pass_at_k] == [1, 2]
    assert diagnosis.pass_at_k[0].estimate.mean == 0.25
    assert diagnosis.pass_at_k[0].estimate.stderr == pytest.approx(0.25)
    assert diagnosis.pass_at_k[1].estimate.mean == 0.5
    assert diagnosis.label == "SRE diagnosis pass@1 (root cause named)"
    mitigation = report.task("sre.mitigation")
    assert mitigation is not None
    assert mitigation.pass_at_k[0].label == (
        "SRE mitigation pass@1 (alerts cleared, health at baseline)"
    )


def test_errored_trials_are_listed_and_left_out_of_every_denominator() -> None:
    records = [
        sre("a", 0, diag=True, mit=True),
        errored("a", 1, "FaultDidNotManifest"),
        errored("b", 0, "EnvironmentUnavailable"),
        errored("b", 1, "EnvironmentUnavailable"),
    ]
    report = build_report(records, DEFAULT_PROFILE, agent="sre-agent", created_at=NOW)
    diagnosis = report.task("sre.diagnosis")
    assert diagnosis is not None
    assert (diagnosis.trials, diagnosis.scenarios) == (1, 1)
    assert diagnosis.pass_at_k[0].estimate.mean == 1.0
    assert report.errored.count == 3
    assert report.errored.reasons == {"EnvironmentUnavailable": 2, "FaultDidNotManifest": 1}
    assert [t.trial for t in report.errored.trials] == ["a-e-1", "b-e-0", "b-e-1"]
    assert (report.trials, report.succeeded, report.failed) == (4, 1, 0)


def test_failed_trial_without_scores_counts_as_failing_every_task() -> None:
    crashed = sre("a", 1, diag=False, mit=False).model_copy(update={"scores": None})
    records = [sre("a", 0, diag=True, mit=True), crashed]
    report = build_report(records, DEFAULT_PROFILE, agent="sre-agent", created_at=NOW)
    diagnosis = report.task("sre.diagnosis")
    assert diagnosis is not None and diagnosis.pass_at_k[0].estimate.mean == 0.5
    fl = report.score("sre.fl_ntam")
    assert fl is not None and fl.estimate.mean == 0.5  # (1.0 + 0) / 2


def test_mttd_and_mttr_average_successes_only_and_are_none_without_any() -> None:
    records = [
        sre("a", 0, diag=True, mit=False, ttd=40.0),
        sre("a", 1, diag=True, mit=False, ttd=80.0),
        sre("b", 0, diag=False, mit=False),
    ]
    report = build_report(records, DEFAULT_PROFILE, agent="sre-agent", created_at=NOW)
    mttd, mttr = report.timing("sre.mttd"), report.timing("sre.mttr")
    assert mttd is not None and (mttd.mean_seconds, mttd.successes, mttd.trials) == (60.0, 2, 3)
    assert mttr is not None and (mttr.mean_seconds, mttr.successes) == (None, 0)


def test_sre_resolution_needs_diagnosis_and_mitigation_in_the_same_trial() -> None:
    records = [
        sre("a", 0, diag=True, mit=False),
        sre("a", 1, diag=False, mit=True),
        sre("a", 2, diag=True, mit=True),
        sre("a", 3, diag=False, mit=False),
    ]
    report = build_report(records, DEFAULT_PROFILE, agent="sre-agent", created_at=NOW)
    rate = report.resolution_rate(Domain.SRE)
    assert rate is not None
    assert (rate.resolved, rate.trials, rate.estimate.mean) == (1, 4, 0.25)
    assert "diagnosis and mitigation both passed in the same trial" in rate.label


def test_traces_on_and_off_are_separate_scenarios_and_breakdown_slices() -> None:
    records = [
        sre("a", 0, diag=True, mit=True, traces=True),
        sre("a", 0, diag=False, mit=False, traces=False, complexity=Complexity.HARD),
    ]
    report = build_report(records, DEFAULT_PROFILE, agent="sre-agent", created_at=NOW)
    diagnosis = report.task("sre.diagnosis")
    assert diagnosis is not None and diagnosis.scenarios == 2
    by = {(b.dimension, b.value): b for b in report.breakdowns}
    assert set(by) == {
        ("domain", "SRE"),
        ("class", "CacheFailure"),
        ("complexity", "Easy"),
        ("complexity", "Hard"),
        ("traces", "traces-on"),
        ("traces", "traces-off"),
    }
    on = by[("traces", "traces-on")].tasks[0].pass_at_k
    off = by[("traces", "traces-off")].tasks[0].pass_at_k
    assert [p.k for p in on] == [1]
    assert (on[0].estimate.mean, off[0].estimate.mean) == (1.0, 0.0)


def test_each_persona_gets_its_own_tasks_and_resolution_rate() -> None:
    ciso = TrialRecord(
        trial="c-0",
        run="run-1",
        scenario="kyverno-1",
        attempt=0,
        domain=Domain.CISO,
        scenario_class="Kyverno",
        phase=TrialPhase.SUCCEEDED,
        scores=TrialScores(
            profile="default@1",
            posture=PostureScores(passed=True, matched=1, expected=1, ttp_seconds=30.0),
        ),
        agent="sre-agent",
    )
    finops = TrialRecord(
        trial="f-0",
        run="run-1",
        scenario="hpa-1",
        attempt=0,
        domain=Domain.FINOPS,
        scenario_class="AutoscalerMisconfiguration",
        phase=TrialPhase.FAILED,
        scores=TrialScores(
            profile="default@1",
            finops=FinOpsScores(
                diagnosis_passed=True,
                mitigation_passed=False,
                cost_proximity=0.5,
                cpu_proximity=0.25,
                memory_proximity=1.0,
                efficiency_proximity=0.0,
            ),
        ),
        agent="sre-agent",
    )
    report = build_report(
        [sre("a", 0, diag=True, mit=True), ciso, finops],
        DEFAULT_PROFILE,
        agent="sre-agent",
        created_at=NOW,
    )
    assert [t.key for t in report.tasks] == [
        "sre.diagnosis",
        "sre.mitigation",
        "ciso.posture",
        "finops.diagnosis",
        "finops.mitigation",
    ]
    rates = {r.domain: r.estimate.mean for r in report.resolution}
    assert rates == {Domain.SRE: 1.0, Domain.CISO: 1.0, Domain.FINOPS: 0.0}
    cost = report.score("finops.cost_proximity")
    assert cost is not None and cost.estimate.mean == 0.5
    ttp = report.timing("ciso.ttp")
    assert ttp is not None and ttp.mean_seconds == 30.0


def test_report_stores_profile_and_schema_version_and_headline_summarises() -> None:
    records = [sre("a", 0, diag=True, mit=True, ttd=72, ttr=282), errored("b", 0, "X")]
    report = build_report(records, DEFAULT_PROFILE, agent="sre-agent", created_at=NOW)
    wire = report.wire()
    assert wire["schemaVersion"] == "itbench.io/report/v1"
    assert wire["profile"] == DEFAULT_PROFILE.id
    summary = headline(report)
    assert summary.diagnosis_pass_at_1 == 1.0
    assert summary.mitigation_pass_at_1 == 1.0
    assert (summary.fl_ntam, summary.fpc_ntam) == (1.0, 0.5)
    assert (summary.mttd_seconds, summary.mttr_seconds) == (72.0, 282.0)
    assert summary.resolution_rate == 1.0
    assert (summary.succeeded, summary.failed, summary.errored) == (1, 0, 1)


def test_empty_input_gives_an_empty_report() -> None:
    report = build_report([], DEFAULT_PROFILE, agent="none", created_at=NOW)
    assert (report.trials, report.tasks, report.resolution, report.breakdowns) == (0, [], [], [])
    assert headline(report).diagnosis_pass_at_1 is None


def test_trial_records_need_a_final_phase() -> None:
    wire = sre("a", 0, diag=True, mit=True).wire()
    with pytest.raises(ValueError, match="needs a final phase, got Ready"):
        TrialRecord.model_validate({**wire, "phase": "Ready"})
