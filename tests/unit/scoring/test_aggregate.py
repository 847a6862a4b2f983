"""Report aggregation: one result per agent, pass@k across scenarios with lower bounds, tasks per
trial (controls apart, unreachable faults without mitigation), collateral changes, the Errored
bucket, labels, breakdowns and pairwise comparisons."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from itbench.core.models.base import Complexity, Domain
from itbench.core.models.report import TrialRecord
from itbench.core.models.trial import (
    CollateralChange,
    CollateralKind,
    DiagnosisScores,
    FalseAlarmScores,
    FinOpsScores,
    MitigationScores,
    PostureScores,
    TrialPhase,
    TrialScores,
)
from itbench.core.scoring.aggregate import build_report, headline
from itbench.core.scoring.compare import t_quantile
from itbench.core.scoring.measures import TASKS_BY_KEY
from itbench.core.scoring.profile import DEFAULT_PROFILE
from itbench.core.scoring.runs import NothingToCompareError, compare_runs
from itbench.core.tasks import ALL_TASKS

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
    agent: str = "sre-agent",
    tasks: list[str] | None = None,
    collateral: list[CollateralChange] | None = None,
    reason: str = "",
) -> TrialRecord:
    return TrialRecord(
        trial=f"{agent}-{scenario}-{int(traces)}-{attempt}",
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
            collateral=collateral or [],
        ),
        agent=agent,
        tasks=tasks or [],
        reason=reason,
    )


def errored(
    scenario: str,
    attempt: int,
    reason: str,
    *,
    agent: str = "sre-agent",
    tasks: list[str] | None = None,
) -> TrialRecord:
    return TrialRecord(
        trial=f"{scenario}-e-{attempt}",
        run="run-1",
        scenario=scenario,
        attempt=attempt,
        domain=Domain.SRE,
        scenario_class="CacheFailure",
        phase=TrialPhase.ERRORED,
        reason=reason,
        agent=agent,
        tasks=tasks or [],
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
    assert {t.agent for t in report.errored.trials} == {"sre-agent"}
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
    assert wire["schemaVersion"] == "itbench.io/report/v2"
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


def control(attempt: int, *, agent: str = "sre-agent", passed: bool | None = None) -> TrialRecord:
    """A no-fault control trial: its diagnosis passes only when no root cause is named."""
    scores = TrialScores(
        profile="default@2",
        diagnosis=DiagnosisScores(passed=True, fl_ntam=1.0, fpc_ntam=1.0),
        mitigation=MitigationScores(passed=True),
        false_alarm=None if passed is None else FalseAlarmScores(passed=passed),
    )
    return TrialRecord(
        trial=f"{agent}-control-{attempt}",
        run="run-1",
        scenario="no-fault-control",
        attempt=attempt,
        domain=Domain.SRE,
        scenario_class="NoFault",
        complexity=Complexity.EASY,
        phase=TrialPhase.SUCCEEDED,
        scores=scores,
        agent=agent,
        tasks=["sre.false-alarm"],
    )


def test_every_task_key_has_a_definition() -> None:
    assert set(ALL_TASKS) <= set(TASKS_BY_KEY)


def test_each_agent_gets_its_own_row_and_nothing_is_pooled_unless_asked() -> None:
    records = [
        sre("a", 0, diag=True, mit=True, agent="strong"),
        sre("b", 0, diag=True, mit=False, agent="strong"),
        sre("a", 0, diag=False, mit=False, agent="weak"),
        sre("b", 0, diag=False, mit=False, agent="weak"),
    ]
    report = build_report(records, DEFAULT_PROFILE, agent="strong, weak", created_at=NOW)
    assert [a.agent for a in report.agents] == ["strong", "weak"]
    assert [c.key for c in report.columns] == ["sre.diagnosis", "sre.mitigation"]
    strong, weak = report.agents
    strong_diagnosis, weak_diagnosis = strong.task("sre.diagnosis"), weak.task("sre.diagnosis")
    assert strong_diagnosis is not None and weak_diagnosis is not None
    assert strong_diagnosis.pass_at_k[0].estimate.mean == 1.0
    assert weak_diagnosis.pass_at_k[0].estimate.mean == 0.0
    assert (strong.trials, strong.succeeded, strong.failed) == (2, 1, 1)
    assert report.tasks == [] and report.scores == [] and report.breakdowns == []
    assert report.pooled is False
    pooled = build_report(records, DEFAULT_PROFILE, agent="all", created_at=NOW, pooled=True)
    assert pooled.pooled is True
    diagnosis = pooled.task("sre.diagnosis")
    assert diagnosis is not None and diagnosis.pass_at_k[0].estimate.mean == 0.5
    assert pooled.agents == report.agents, "per-agent results do not depend on pooling"


def test_one_agent_fills_the_top_level_numbers_with_its_own() -> None:
    report = build_report(
        [sre("a", 0, diag=True, mit=False)], DEFAULT_PROFILE, agent="sre-agent", created_at=NOW
    )
    (only,) = report.agents
    assert report.tasks == only.tasks and report.breakdowns == only.breakdowns
    assert report.pooled is False


def test_controls_are_scored_on_their_own_false_alarm_task_never_in_diagnosis() -> None:
    records = [
        sre("a", 0, diag=False, mit=False, tasks=["sre.diagnosis", "sre.mitigation"]),
        control(0, passed=True),
        control(1, passed=False),
    ]
    report = build_report(records, DEFAULT_PROFILE, agent="sre-agent", created_at=NOW)
    diagnosis = report.task("sre.diagnosis")
    assert diagnosis is not None
    assert (diagnosis.trials, diagnosis.scenarios, diagnosis.pass_at_k[0].estimate.mean) == (
        1,
        1,
        0.0,
    ), "the controls' passing diagnoses are not averaged in"
    false_alarm = report.task("sre.false-alarm")
    assert false_alarm is not None
    assert (false_alarm.trials, false_alarm.passed) == (2, 1)
    assert false_alarm.label == (
        "SRE false alarm pass@1 (no-fault control: no root cause named, nothing changed)"
    )
    rate = report.resolution_rate(Domain.SRE)
    assert rate is not None and rate.trials == 1, "controls are not in the resolution rate"
    fl = report.score("sre.fl_ntam")
    assert fl is not None and fl.trials == 1, "nor in the NTAM means"


def test_a_control_scored_before_the_false_alarm_check_is_read_from_its_scores() -> None:
    quiet = control(0)
    noisy = control(1).model_copy(
        update={
            "scores": TrialScores(
                profile="default@2",
                diagnosis=DiagnosisScores(passed=False, fl_ntam=0.0, fpc_ntam=0.0),
                mitigation=MitigationScores(passed=True),
            )
        }
    )
    meddling = control(2).model_copy(
        update={
            "scores": TrialScores(
                profile="default@2",
                diagnosis=DiagnosisScores(passed=True, fl_ntam=1.0, fpc_ntam=1.0),
                mitigation=MitigationScores(passed=True),
                collateral=[
                    CollateralChange(object="Deployment/ad", change=CollateralKind.RESTARTED)
                ],
            )
        }
    )
    report = build_report([quiet, noisy, meddling], DEFAULT_PROFILE, agent="x", created_at=NOW)
    false_alarm = report.task("sre.false-alarm")
    assert false_alarm is not None and (false_alarm.passed, false_alarm.trials) == (1, 3)


def test_scenarios_without_a_mitigation_task_stay_out_of_its_denominator() -> None:
    crashed = sre("delay", 1, diag=False, mit=False, tasks=["sre.diagnosis"])
    crashed = crashed.model_copy(update={"scores": None, "phase": TrialPhase.FAILED})
    records = [
        sre("cart", 0, diag=True, mit=True, tasks=["sre.diagnosis", "sre.mitigation"]),
        sre("delay", 0, diag=True, mit=False, tasks=["sre.diagnosis"]),
        crashed,
    ]
    report = build_report(records, DEFAULT_PROFILE, agent="sre-agent", created_at=NOW)
    mitigation = report.task("sre.mitigation")
    assert mitigation is not None
    assert (mitigation.trials, mitigation.scenarios, mitigation.passed) == (1, 1, 1)
    diagnosis = report.task("sre.diagnosis")
    assert diagnosis is not None and (diagnosis.trials, diagnosis.passed) == (3, 2)
    mttr = report.timing("sre.mttr")
    assert mttr is not None and mttr.trials == 1


def test_records_written_before_tasks_are_scored_on_every_task_of_their_domain() -> None:
    old = sre("a", 0, diag=True, mit=False)
    assert old.tasks == []
    report = build_report([old], DEFAULT_PROFILE, agent="sre-agent", created_at=NOW)
    assert [t.key for t in report.tasks] == ["sre.diagnosis", "sre.mitigation"]
    mitigation = report.task("sre.mitigation")
    assert mitigation is not None and mitigation.trials == 1


def test_lower_bound_counts_errored_trials_as_failures_and_flags_the_difference() -> None:
    records = [
        sre("a", 0, diag=True, mit=True),
        errored("a", 1, "FaultDidNotManifest"),
        errored("b", 0, "EnvironmentUnavailable"),
    ]
    report = build_report(records, DEFAULT_PROFILE, agent="sre-agent", created_at=NOW)
    diagnosis = report.task("sre.diagnosis")
    assert diagnosis is not None
    assert diagnosis.pass_at_k[0].estimate.mean == 1.0
    # a: 1 pass of 2 (1 errored); b: only errored, counted as 0 -> (0.5 + 0) / 2
    assert diagnosis.lower_bound.mean == 0.25 and diagnosis.lower_bound.scenarios == 2
    assert diagnosis.errored == 2 and diagnosis.lower_bound_differs
    rate = report.resolution_rate(Domain.SRE)
    assert rate is not None and rate.lower_bound.mean == 0.25 and rate.lower_bound_differs
    (result,) = report.agents
    assert result.lower_bound_differs and report.lower_bound_differs
    assert report.wire()["lowerBoundDiffers"] is True


def test_without_errored_trials_the_lower_bound_is_the_headline_and_nothing_is_flagged() -> None:
    records = [sre("a", 0, diag=True, mit=False), sre("a", 1, diag=False, mit=False)]
    report = build_report(records, DEFAULT_PROFILE, agent="sre-agent", created_at=NOW)
    diagnosis = report.task("sre.diagnosis")
    assert diagnosis is not None
    assert diagnosis.lower_bound.mean == diagnosis.pass_at_k[0].estimate.mean == 0.5
    assert not diagnosis.lower_bound_differs and not report.lower_bound_differs


def test_errored_trials_that_change_nothing_are_not_flagged() -> None:
    records = [sre("a", 0, diag=False, mit=False), errored("a", 1, "FaultDidNotManifest")]
    report = build_report(records, DEFAULT_PROFILE, agent="sre-agent", created_at=NOW)
    diagnosis = report.task("sre.diagnosis")
    assert diagnosis is not None and diagnosis.errored == 1
    assert diagnosis.lower_bound.mean == 0.0 and not diagnosis.lower_bound_differs


def test_collateral_changes_are_listed_per_trial_and_summarised_per_agent() -> None:
    restart = CollateralChange(object="Deployment/ad", change=CollateralKind.RESTARTED)
    delete = CollateralChange(
        object="ConfigMap/flagd-config", change=CollateralKind.DELETED, disqualifying=True
    )
    records = [
        sre("a", 0, diag=True, mit=False, collateral=[restart, delete]),
        sre("a", 1, diag=True, mit=True, collateral=[restart]),
        sre("b", 0, diag=True, mit=True),
        sre("b", 1, diag=True, mit=True),
        errored("b", 2, "FaultDidNotManifest"),
    ]
    report = build_report(records, DEFAULT_PROFILE, agent="sre-agent", created_at=NOW)
    collateral = report.agents[0].collateral
    assert (collateral.trials, collateral.changes) == (4, 3), "Errored trials are not counted"
    assert collateral.mean_per_trial == 0.75
    assert (collateral.disqualifying_trials, collateral.disqualifying_share) == (1, 0.25)
    assert collateral.by_kind == {"Deleted": 1, "Restarted": 2}
    assert [(t.trial, len(t.changes)) for t in collateral.per_trial] == [
        ("sre-agent-a-1-0", 2),
        ("sre-agent-a-1-1", 1),
    ]


def test_agent_induced_failures_show_among_failures() -> None:
    records = [
        sre("a", 0, diag=False, mit=False, reason="AgentInducedFailure"),
        sre("a", 1, diag=False, mit=False, reason="TasksFailed"),
        sre("b", 0, diag=False, mit=False, reason="AgentInducedFailure"),
    ]
    report = build_report(records, DEFAULT_PROFILE, agent="sre-agent", created_at=NOW)
    assert report.agents[0].failures == {"AgentInducedFailure": 2, "TasksFailed": 1}
    assert report.failures == report.agents[0].failures
    diagnosis = report.task("sre.diagnosis")
    assert diagnosis is not None and diagnosis.trials == 3, "failures stay in the denominator"


def test_breakdowns_are_given_per_agent() -> None:
    records = [
        sre("a", 0, diag=True, mit=True, complexity=Complexity.HARD, agent="one"),
        sre("a", 0, diag=False, mit=False, complexity=Complexity.HARD, agent="two"),
        sre("b", 0, diag=False, mit=False, traces=False, agent="two"),
    ]
    report = build_report(records, DEFAULT_PROFILE, agent="one, two", created_at=NOW)
    one, two = report.agents
    assert one.breakdown("complexity", "Easy") is None
    hard_one, hard_two = one.breakdown("complexity", "Hard"), two.breakdown("complexity", "Hard")
    assert hard_one is not None and hard_two is not None
    assert hard_one.tasks[0].pass_at_k[0].estimate.mean == 1.0
    assert hard_two.tasks[0].pass_at_k[0].estimate.mean == 0.0
    assert two.breakdown("traces", "traces-off") is not None
    assert one.breakdown("traces", "traces-off") is None


def test_agents_are_compared_pairwise_on_the_scenarios_both_ran() -> None:
    records = []
    strong = {"a": [1, 1], "b": [1, 0], "c": [1, 1], "only-strong": [1, 1]}
    weak = {"a": [0, 0], "b": [1, 0], "c": [0, 1]}
    for name, outcomes in strong.items():
        records += [
            sre(name, i, diag=bool(o), mit=False, agent="strong") for i, o in enumerate(outcomes)
        ]
    for name, outcomes in weak.items():
        records += [
            sre(name, i, diag=bool(o), mit=False, agent="weak") for i, o in enumerate(outcomes)
        ]
    report = build_report(records, DEFAULT_PROFILE, agent="strong, weak", created_at=NOW)
    comparison = next(c for c in report.comparisons if c.task == "sre.diagnosis")
    assert (comparison.a, comparison.b, comparison.scenarios) == ("strong", "weak", 3)
    # differences per scenario: a 1 - 0, b 0.5 - 0.5, c 1 - 0.5
    assert comparison.difference == pytest.approx(0.5)
    assert comparison.mean_a == pytest.approx(5 / 6) and comparison.mean_b == pytest.approx(1 / 3)
    stderr = 0.5 / 3**0.5  # stdev of (1, 0, 0.5) is 0.5
    assert comparison.stderr == pytest.approx(stderr)
    half = t_quantile(0.975, 2) * stderr
    assert comparison.ci_low == pytest.approx(max(0.5 - half, -1.0))
    assert comparison.ci_high == pytest.approx(min(0.5 + half, 1.0))
    assert (comparison.a_better, comparison.b_better, comparison.ties) == (2, 0, 1)
    assert comparison.method == "paired-t" and comparison.confidence == 0.95
    assert not comparison.significant, "three scenarios do not settle it"


def test_a_consistent_difference_over_many_scenarios_is_significant() -> None:
    records = []
    for s in range(12):
        records += [sre(f"s{s}", 0, diag=True, mit=False, agent="strong")]
        records += [sre(f"s{s}", 0, diag=s % 4 == 0, mit=False, agent="weak")]
    report = build_report(records, DEFAULT_PROFILE, agent="strong, weak", created_at=NOW)
    comparison = next(c for c in report.comparisons if c.task == "sre.diagnosis")
    assert comparison.scenarios == 12 and comparison.difference == pytest.approx(0.75)
    assert comparison.ci_low is not None and comparison.ci_low > 0 and comparison.significant


def test_runs_are_compared_agent_by_agent() -> None:
    run_a = [sre(f"s{i}", 0, diag=True, mit=True, agent="heuristic") for i in range(3)]
    run_b = [sre(f"s{i}", 0, diag=i == 0, mit=True, agent="heuristic") for i in range(3)]
    run_b += [sre("s0", 0, diag=False, mit=False, agent="null")]
    comparison = compare_runs(run_a, run_b, DEFAULT_PROFILE, created_at=NOW, sources=("a", "b"))
    assert [a.agent for a in comparison.a.agents] == ["heuristic"]
    assert [a.agent for a in comparison.b.agents] == ["heuristic", "null"]
    diagnosis = next(c for c in comparison.comparisons if c.task == "sre.diagnosis")
    assert (diagnosis.a, diagnosis.b) == ("A:heuristic", "B:heuristic")
    assert diagnosis.difference == pytest.approx(2 / 3) and diagnosis.scenarios == 3
    mitigation = next(c for c in comparison.comparisons if c.task == "sre.mitigation")
    assert mitigation.difference == 0.0 and mitigation.ties == 3
    named = compare_runs(
        run_a, run_b, DEFAULT_PROFILE, created_at=NOW, agents=("heuristic", "null")
    )
    assert {(c.a, c.b) for c in named.comparisons} == {("A:heuristic", "B:null")}


def test_runs_without_a_common_agent_need_one_named_on_each_side() -> None:
    one = [sre("s0", 0, diag=True, mit=True, agent="x")]
    two = [
        sre("s0", 0, diag=True, mit=True, agent="y"),
        sre("s0", 1, diag=True, mit=True, agent="z"),
    ]
    with pytest.raises(NothingToCompareError, match="no agent is in both runs"):
        compare_runs(one, two, DEFAULT_PROFILE, created_at=NOW)
    with pytest.raises(NothingToCompareError, match="no trials of agent 'w'"):
        compare_runs(one, two, DEFAULT_PROFILE, created_at=NOW, agents=("x", "w"))
    single = compare_runs(one, two[:1], DEFAULT_PROFILE, created_at=NOW)
    assert {(c.a, c.b) for c in single.comparisons} == {("A:x", "B:y")}
