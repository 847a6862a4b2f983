"""Holding cheap strategies to their ceilings."""

from __future__ import annotations

from itbench.core.models.base import Domain
from itbench.core.models.report import TrialRecord
from itbench.core.models.trial import (
    DiagnosisScores,
    FalseAlarmScores,
    MitigationScores,
    TrialPhase,
    TrialScores,
)
from itbench.core.scoring.validity import evaluate, table


def record(
    scenario: str,
    *,
    diag: bool = False,
    mit: bool | None = False,
    control: bool = False,
    phase: TrialPhase = TrialPhase.FAILED,
) -> TrialRecord:
    if control:
        scores = TrialScores(profile="p", false_alarm=FalseAlarmScores(passed=diag))
        tasks = ["sre.false-alarm"]
    else:
        scores = TrialScores(
            profile="p",
            diagnosis=DiagnosisScores(passed=diag, fl_ntam=0, fpc_ntam=0),
            mitigation=None if mit is None else MitigationScores(passed=mit),
        )
        tasks = ["sre.diagnosis"] + ([] if mit is None else ["sre.mitigation"])
    return TrialRecord(
        trial=f"t-{scenario}",
        run="r",
        scenario=scenario,
        attempt=0,
        domain=Domain.SRE,
        scenario_class="X",
        phase=phase,
        scores=None if phase == TrialPhase.ERRORED else scores,
        agent="a",
        tasks=tasks,
    )


def test_a_strategy_above_its_ceiling_is_named_with_the_scenarios_it_passed() -> None:
    cheap = [record(f"s{i}", diag=i < 2) for i in range(20)]
    report = evaluate({"echo": cheap}, {}, default_ceiling=0.05, profile="p")
    assert not report.holds
    assert report.problems == ["echo: sre.diagnosis 10.0% > ceiling 5% (2/20: s0, s1)"]
    report = evaluate(
        {"echo": cheap}, {("echo", "sre.diagnosis"): 0.15}, default_ceiling=0.05, profile="p"
    )
    assert report.holds


def test_errored_trials_count_as_failures_so_no_strategy_leaves_the_denominator() -> None:
    trials = [record("a", diag=True)] + [
        record(f"e{i}", phase=TrialPhase.ERRORED) for i in range(19)
    ]
    report = evaluate({"poison": trials}, {}, default_ceiling=0.05, profile="p")
    (diagnosis,) = [t for t in report.strategies[0].tasks if t.task == "sre.diagnosis"]
    assert (diagnosis.passed, diagnosis.trials, diagnosis.errored) == (1, 20, 19)
    assert report.holds


def test_the_oracle_must_pass_every_task_and_null_none() -> None:
    oracle = [record("a", diag=True, mit=True), record("b", diag=True, mit=False)]
    null = [record("a"), record("c", diag=True, control=True)]
    report = evaluate({"oracle": oracle, "null": null}, {}, default_ceiling=0.05, profile="p")
    assert report.problems == [
        "oracle: sre.mitigation 1/2; missed b",
        "null: sre.false-alarm 100.0% > ceiling 0% (1/1: c)",
    ]
    text = table(report)
    assert "DOES NOT HOLD" in text and "oracle" in text and "sre.false-alarm" in text


def test_tasks_a_scenario_does_not_have_are_not_counted() -> None:
    trials = [record("chaos", diag=False, mit=None), record("flag", diag=False, mit=True)]
    report = evaluate({"fixer": trials}, {}, default_ceiling=0.05, profile="p")
    tasks = {t.task: t for t in report.strategies[0].tasks}
    assert tasks["sre.mitigation"].trials == 1 and tasks["sre.diagnosis"].trials == 2


def test_a_passive_strategy_passing_controls_is_reported_not_held_but_null_is() -> None:
    quiet = [record(f"s{i}") for i in range(20)] + [record("c", diag=True, control=True)]
    report = evaluate({"claim-only": quiet, "null": quiet}, {}, default_ceiling=0.05, profile="p")
    tasks = {(s.strategy, t.task): t for s in report.strategies for t in s.tasks}
    alarm = tasks[("claim-only", "sre.false-alarm")]
    assert (alarm.passed, alarm.held, alarm.within) == (1, False, True)
    assert report.problems == ["null: sre.false-alarm 100.0% > ceiling 0% (1/1: c)"]
