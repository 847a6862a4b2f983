"""CISO posture and FinOps scores."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from itbench.core.models.agent_io import ControlAssessment, PostureReport
from itbench.core.models.observations import EnvironmentSnapshot
from itbench.core.models.scenario import ExpectedPosture, FinOpsTarget, GroundTruth, PostureResult
from itbench.core.models.trial import DiagnosisScores
from itbench.core.scoring.ciso import score_posture
from itbench.core.scoring.finops import proximity, score_finops

EXPECTED = [
    ExpectedPosture(
        control_id="CIS 5.2.5", target="Namespace/otel-demo", result=PostureResult.FAIL
    ),
    ExpectedPosture(
        control_id="CIS 5.2.6", target="Namespace/otel-demo", result=PostureResult.PASS
    ),
]


def assess(control: str, result: PostureResult) -> ControlAssessment:
    return ControlAssessment(control_id=control, target="Namespace/otel-demo", result=result)


def test_posture_passes_when_compliant_and_non_compliant_controls_are_both_right() -> None:
    report = PostureReport(
        assessments=[
            assess("CIS 5.2.5", PostureResult.FAIL),
            assess("CIS 5.2.6", PostureResult.PASS),
        ]
    )
    scores = score_posture(report, EXPECTED, ttp=41.0)
    assert (scores.passed, scores.matched, scores.expected, scores.ttp_seconds) == (
        True,
        2,
        2,
        41.0,
    )


def test_posture_fails_on_a_wrong_or_missing_control() -> None:
    report = PostureReport(assessments=[assess("CIS 5.2.5", PostureResult.PASS)])
    scores = score_posture(report, EXPECTED, ttp=None)
    assert (scores.passed, scores.matched) == (False, 0)


def test_claiming_both_results_for_one_control_does_not_match() -> None:
    report = PostureReport(
        assessments=[
            assess("CIS 5.2.5", PostureResult.FAIL),
            assess("CIS 5.2.5", PostureResult.PASS),
            assess("CIS 5.2.6", PostureResult.PASS),
        ]
    )
    scores = score_posture(report, EXPECTED, ttp=None)
    assert (scores.passed, scores.matched) == (False, 1)


def test_no_posture_report_fails() -> None:
    assert score_posture(None, EXPECTED, ttp=None).passed is False


@pytest.mark.parametrize(
    ("observed", "optimal", "expected"),
    [(1.0, 1.0, 1.0), (1.5, 1.0, 0.5), (0.5, 1.0, 0.5), (3.0, 1.0, 0.0), (0.0, 1.0, 0.0)],
)
def test_proximity_is_clipped_relative_distance(
    observed: float, optimal: float, expected: float
) -> None:
    assert proximity(observed, optimal) == expected


def test_proximity_with_no_optimum_is_zero() -> None:
    assert proximity(1.0, 0.0) == 0.0


def test_finops_scores_proximities_of_the_final_footprint() -> None:
    truth = GroundTruth(
        finops=FinOpsTarget(cpu_cores=2.0, memory_bytes=4_000, cost_per_hour=1.0, efficiency=0.8)
    )
    final = EnvironmentSnapshot(
        time=datetime(2026, 1, 1, tzinfo=UTC),
        alert_rules_fingerprint="x",
        cpu_requests_cores=3.0,
        memory_requests_bytes=4_000,
        cpu_usage_cores=1.2,
        cost_per_hour=1.25,
    )
    diagnosis = DiagnosisScores(passed=True, fl_ntam=1.0, fpc_ntam=1.0)
    scores = score_finops(diagnosis, truth, final, mitigation_passed=False)
    assert scores.diagnosis_passed and not scores.mitigation_passed
    assert scores.cost_proximity == 0.75
    assert scores.cpu_proximity == 0.5
    assert scores.memory_proximity == 1.0
    assert scores.efficiency_proximity == pytest.approx(0.5)  # 1.2 / 3.0 = 0.4 vs 0.8


def test_finops_without_optimum_or_diagnosis_scores_zero() -> None:
    final = EnvironmentSnapshot(time=datetime(2026, 1, 1, tzinfo=UTC), alert_rules_fingerprint="x")
    scores = score_finops(None, GroundTruth(), final, mitigation_passed=True)
    assert not scores.diagnosis_passed and scores.mitigation_passed
    assert scores.cost_proximity == scores.cpu_proximity == scores.efficiency_proximity == 0.0
