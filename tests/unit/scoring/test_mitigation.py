"""The mitigation grader, including the anti-gaming cases: only a real fix scores."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from itbench.core.models.observations import (
    Alert,
    AlertInterval,
    AlertState,
    EnvironmentSnapshot,
    WorkloadHealth,
)
from itbench.core.models.scenario import ExpectedAlert
from itbench.core.scoring.mitigation import MitigationEvidence, score_mitigation
from itbench.core.scoring.profile import DEFAULT_PROFILE, get_profile

T0 = datetime(2026, 1, 1, tzinfo=UTC)
READY = T0 + timedelta(seconds=60)
FINISHED = T0 + timedelta(seconds=400)
CLEARED = T0 + timedelta(seconds=342)
EXPECTED = [ExpectedAlert(alertname="RequestErrorRate", labels={"service_name": "cart"})]


def workloads(**overrides: tuple[int, int]) -> list[WorkloadHealth]:
    base = {"cart": (1, 1), "checkout": (1, 1), "frontend": (2, 2)}
    base.update(overrides)
    return [
        WorkloadHealth(
            kind="Deployment",
            name=name,
            desired_replicas=d,
            ready_replicas=r,
            requests_per_second=5.0 if d else 0.0,
            error_ratio=0.01,
        )
        for name, (d, r) in base.items()
    ]


def snapshot(
    at: datetime,
    *,
    wl: list[WorkloadHealth] | None = None,
    firing: bool = False,
    fingerprint: str = "rules-v1",
    rps: float = 20.0,
) -> EnvironmentSnapshot:
    alerts = (
        [
            Alert(
                alertname="RequestErrorRate",
                labels={"service_name": "cart", "severity": "critical"},
                state=AlertState.FIRING,
                active_at=READY - timedelta(seconds=30),
            )
        ]
        if firing
        else []
    )
    return EnvironmentSnapshot(
        time=at,
        workloads=workloads() if wl is None else wl,
        firing_alerts=alerts,
        alert_rules_fingerprint=fingerprint,
        frontend_requests_per_second=rps,
    )


def window(**kwargs: object) -> list[EnvironmentSnapshot]:
    return [
        snapshot(FINISHED + timedelta(seconds=s), **kwargs)  # type: ignore[arg-type]
        for s in (30, 60, 90, 120)
    ]


def history(end: datetime | None = CLEARED) -> list[AlertInterval]:
    return [
        AlertInterval(
            alertname="RequestErrorRate",
            labels={"service_name": "cart", "severity": "critical"},
            start=READY - timedelta(seconds=30),
            end=end,
        )
    ]


def evidence(
    samples: list[EnvironmentSnapshot], alert_history: list[AlertInterval] | None = None
) -> MitigationEvidence:
    return MitigationEvidence(
        baseline=snapshot(T0),
        samples=samples,
        expected_alerts=EXPECTED,
        alert_history=history() if alert_history is None else alert_history,
        ready_at=READY,
        agent_finished_at=FINISHED,
        window_seconds=120,
    )


def test_a_real_fix_passes_with_ttr_from_ready_to_the_final_clearing() -> None:
    scores = score_mitigation(evidence(window()), DEFAULT_PROFILE)
    assert scores.passed
    assert scores.ttr_seconds == 282.0
    assert scores.reason.startswith("Resolved:")


def test_claiming_a_fix_without_acting_scores_zero() -> None:
    scores = score_mitigation(evidence(window(firing=True), history(end=None)), DEFAULT_PROFILE)
    assert not scores.passed
    assert scores.ttr_seconds is None
    assert (
        "AlertsStillFiring: RequestErrorRate{service_name=cart} firing in 4 of 4" in scores.reason
    )


def test_scaling_the_faulty_workload_to_zero_scores_zero_even_with_the_alert_gone() -> None:
    scaled = workloads(cart=(0, 0))
    scores = score_mitigation(evidence(window(wl=scaled)), DEFAULT_PROFILE)
    assert not scores.passed
    assert "WorkloadScaledDown: Deployment/cart 0/0 < baseline 1/1" in scores.reason


def test_deleting_the_faulty_workload_scores_zero() -> None:
    deleted = [w for w in workloads() if w.name != "cart"]
    scores = score_mitigation(evidence(window(wl=deleted)), DEFAULT_PROFILE)
    assert not scores.passed
    assert scores.reason.startswith("WorkloadMissing: Deployment/cart absent")


def test_deleting_or_altering_the_alert_rule_scores_zero() -> None:
    scores = score_mitigation(evidence(window(fingerprint="rules-v2")), DEFAULT_PROFILE)
    assert not scores.passed
    assert scores.reason.startswith("AlertingTampered:")


def test_an_alert_that_fires_again_in_the_window_fails() -> None:
    refire = [
        *history(),
        AlertInterval(
            alertname="RequestErrorRate",
            labels={"service_name": "cart"},
            start=FINISHED + timedelta(seconds=40),
            end=FINISHED + timedelta(seconds=50),
        ),
    ]
    scores = score_mitigation(evidence(window(), refire), DEFAULT_PROFILE)
    assert not scores.passed
    assert scores.reason.startswith("AlertRefired: RequestErrorRate{service_name=cart}")


def test_alert_still_open_in_the_history_fails_even_if_samples_miss_it() -> None:
    scores = score_mitigation(evidence(window(), history(end=None)), DEFAULT_PROFILE)
    assert not scores.passed
    assert "still firing in the alert history" in scores.reason


def test_traffic_far_below_baseline_fails() -> None:
    scores = score_mitigation(evidence(window(rps=5.0)), DEFAULT_PROFILE)
    assert not scores.passed
    assert "TrafficLow: frontend 5.00 req/s < 0.5 x baseline 20.00 req/s" in scores.reason


def test_error_ratio_above_the_baseline_tolerance_fails() -> None:
    broken = workloads()
    broken[0] = broken[0].model_copy(update={"error_ratio": 0.4})
    scores = score_mitigation(evidence(window(wl=broken)), DEFAULT_PROFILE)
    assert not scores.passed
    assert "ErrorRatioHigh: Deployment/cart 0.400 > baseline 0.010 + 0.05" in scores.reason


def test_readiness_must_be_back_at_baseline_by_the_end_of_the_window() -> None:
    samples = window()
    samples[-1] = snapshot(samples[-1].time, wl=workloads(frontend=(2, 1)))
    scores = score_mitigation(evidence(samples), DEFAULT_PROFILE)
    assert not scores.passed
    assert "WorkloadScaledDown: Deployment/frontend 1/2 < baseline 2/2" in scores.reason


def test_scaling_up_beyond_the_baseline_is_allowed() -> None:
    scores = score_mitigation(evidence(window(wl=workloads(cart=(3, 3)))), DEFAULT_PROFILE)
    assert scores.passed


def test_no_window_samples_fails() -> None:
    scores = score_mitigation(evidence([]), DEFAULT_PROFILE)
    assert not scores.passed
    assert scores.reason.startswith("NoObservation:")


def test_every_failed_check_is_reported() -> None:
    scaled = workloads(cart=(0, 0))
    scores = score_mitigation(evidence(window(wl=scaled, fingerprint="x")), DEFAULT_PROFILE)
    checks = [part.split(":", 1)[0] for part in scores.reason.split("; ")]
    assert checks == ["AlertingTampered", "WorkloadScaledDown"]


def test_an_expected_alert_moved_to_a_renamed_object_is_still_firing() -> None:
    """Renaming the workload's container relabels its alert; the symptom has not gone."""
    moved = Alert(
        alertname="RequestErrorRate",
        labels={"service_name": "cart-x", "severity": "critical"},
        state=AlertState.FIRING,
        active_at=FINISHED,
    )
    samples = [s.model_copy(update={"firing_alerts": [moved]}) for s in window()]
    scores = score_mitigation(evidence(samples), DEFAULT_PROFILE)
    assert not scores.passed
    assert "AlertsStillFiring: RequestErrorRate{service_name=cart-x,severity=critical}" in (
        scores.reason
    )
    # Profile default@1 matched expected alerts on their own labels only; its verdict stands.
    assert score_mitigation(evidence(samples), get_profile("default@1")).passed
    # An alert of another name on another object is the health checks' business, not this one.
    other = moved.model_copy(update={"alertname": "PodNotReady"})
    calm = [s.model_copy(update={"firing_alerts": [other]}) for s in window()]
    assert score_mitigation(evidence(calm), DEFAULT_PROFILE).passed
