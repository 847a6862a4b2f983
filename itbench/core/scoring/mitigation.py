"""Mitigation grading: alerts cleared for good, health back at baseline, alerting untouched.

Nothing the agent claims is used. Scaling the faulty workload to zero, deleting it or silencing
its alert rule all fail here, each with a reason that names the check.
"""

from __future__ import annotations

import statistics
from datetime import datetime

from pydantic import Field

from itbench.core.models.base import ApiModel
from itbench.core.models.observations import (
    AlertInterval,
    AlertState,
    EnvironmentSnapshot,
    WorkloadHealth,
)
from itbench.core.models.scenario import ExpectedAlert
from itbench.core.models.trial import MitigationScores
from itbench.core.scoring.profile import EvaluationProfile
from itbench.core.scoring.timing import time_to


class MitigationEvidence(ApiModel):
    """What the mitigation grader looks at, all observed by the platform."""

    baseline: EnvironmentSnapshot = Field(description="Snapshot before the fault was injected.")
    samples: list[EnvironmentSnapshot] = Field(
        default_factory=list,
        description="Snapshots through the observation window after the agent finished.",
    )
    expected_alerts: list[ExpectedAlert] = Field(
        default_factory=list, description="The scenario's triggering alerts."
    )
    alert_history: list[AlertInterval] = Field(
        default_factory=list, description="Every firing interval since provisioning."
    )
    ready_at: datetime = Field(description="When the scenario became ready (alerts firing).")
    agent_finished_at: datetime = Field(description="When the agent finished.")
    window_seconds: float = Field(ge=0, description="The observation window, in seconds.")


def _alert_name(alert: ExpectedAlert) -> str:
    labels = ",".join(f"{k}={v}" for k, v in sorted(alert.labels.items()))
    return f"{alert.alertname}{{{labels}}}" if labels else alert.alertname


def _interval_matches(interval: AlertInterval, alert: ExpectedAlert) -> bool:
    return interval.alertname == alert.alertname and all(
        interval.labels.get(k) == v for k, v in alert.labels.items()
    )


def _workload_ref(w: WorkloadHealth) -> str:
    return f"{w.kind}/{w.name}"


def _moved_alert_reasons(evidence: MitigationEvidence) -> list[str]:
    # The same alert on an object that did not have it at baseline: the symptom is still there,
    # under another name (say, the workload's container was renamed).
    names = {e.alertname for e in evidence.expected_alerts}
    at_baseline = {
        (a.alertname, tuple(sorted(a.labels.items()))) for a in evidence.baseline.firing_alerts
    }
    seen: dict[tuple[str, tuple[tuple[str, str], ...]], list[datetime]] = {}
    for sample in evidence.samples:
        for alert in sample.firing_alerts:
            key = (alert.alertname, tuple(sorted(alert.labels.items())))
            expected = any(
                alert.matches(e.alertname, e.labels) for e in evidence.expected_alerts
            )  # those have their own checks below
            moved = alert.alertname in names and not expected and key not in at_baseline
            if alert.state == AlertState.FIRING and moved:
                seen.setdefault(key, []).append(sample.time)
    return [
        f"AlertsStillFiring: {name}{{{','.join(f'{k}={v}' for k, v in labels)}}} firing in "
        f"{len(times)} of {len(evidence.samples)} samples (first at {times[0].isoformat()})"
        for (name, labels), times in sorted(seen.items())
    ]


def _alert_reasons(
    evidence: MitigationEvidence, window_end: datetime, profile: EvaluationProfile
) -> list[str]:
    reasons: list[str] = []
    if profile.expected_alerts_on_any_object:
        reasons += _moved_alert_reasons(evidence)
    for expected in evidence.expected_alerts:
        firing_at = [
            s.time
            for s in evidence.samples
            if any(
                a.state == AlertState.FIRING and a.matches(expected.alertname, expected.labels)
                for a in s.firing_alerts
            )
        ]
        if firing_at:
            reasons.append(
                f"AlertsStillFiring: {_alert_name(expected)} firing in {len(firing_at)} of "
                f"{len(evidence.samples)} samples (first at {firing_at[0].isoformat()})"
            )
            continue
        intervals = [i for i in evidence.alert_history if _interval_matches(i, expected)]
        open_ = [i for i in intervals if i.end is None or i.end > window_end]
        if open_:
            reasons.append(
                f"AlertsStillFiring: {_alert_name(expected)} still firing in the alert history "
                f"(since {open_[0].start.isoformat()})"
            )
            continue
        refired = [i for i in intervals if i.start > evidence.agent_finished_at]
        if refired:
            reasons.append(
                f"AlertRefired: {_alert_name(expected)} fired again at "
                f"{refired[0].start.isoformat()} during the observation window"
            )
    return reasons


def _health_reasons(evidence: MitigationEvidence, profile: EvaluationProfile) -> list[str]:
    reasons: list[str] = []
    baseline = evidence.baseline
    for base in baseline.workloads:
        ref = _workload_ref(base)
        current = [
            next((w for w in s.workloads if w.kind == base.kind and w.name == base.name), None)
            for s in evidence.samples
        ]
        missing = [s.time for s, w in zip(evidence.samples, current, strict=True) if w is None]
        if missing:
            reasons.append(
                f"WorkloadMissing: {ref} absent at {missing[0].isoformat()} (present at baseline)"
            )
            continue
        present = [w for w in current if w is not None]
        scaled = [w for w in present if w.desired_replicas < base.desired_replicas]
        final = present[-1]
        if scaled or final.ready_replicas < base.ready_replicas:
            worst = min(present, key=lambda w: (w.desired_replicas, w.ready_replicas))
            shown = worst if scaled else final
            reasons.append(
                f"WorkloadScaledDown: {ref} {shown.ready_replicas}/{shown.desired_replicas} "
                f"< baseline {base.ready_replicas}/{base.desired_replicas}"
            )
            continue
        errors = statistics.median(w.error_ratio for w in present)
        if errors > base.error_ratio + profile.error_ratio_tolerance:
            reasons.append(
                f"ErrorRatioHigh: {ref} {errors:.3f} > baseline {base.error_ratio:.3f} "
                f"+ {profile.error_ratio_tolerance:g}"
            )
    base_rps = baseline.frontend_requests_per_second
    if base_rps > 0:
        rps = statistics.median(s.frontend_requests_per_second for s in evidence.samples)
        if rps < profile.min_traffic_ratio * base_rps:
            reasons.append(
                f"TrafficLow: frontend {rps:.2f} req/s < {profile.min_traffic_ratio:g} x "
                f"baseline {base_rps:.2f} req/s"
            )
    return reasons


def _tamper_reasons(evidence: MitigationEvidence) -> list[str]:
    expected = evidence.baseline.alert_rules_fingerprint
    for s in evidence.samples:
        if s.alert_rules_fingerprint != expected:
            return [
                f"AlertingTampered: alert rules or observability config changed at "
                f"{s.time.isoformat()} (fingerprint {s.alert_rules_fingerprint!r}, baseline "
                f"{expected!r})"
            ]
    return []


def cleared_at(evidence: MitigationEvidence) -> datetime:
    """When the expected alerts cleared for good: the last end of their firing intervals.

    Falls back to the first window sample when the history holds no interval of an expected
    alert (the platform saw them cleared no later than that).
    """
    ends: list[datetime] = []
    for expected in evidence.expected_alerts:
        intervals = [i for i in evidence.alert_history if _interval_matches(i, expected)]
        closed = [i.end for i in intervals if i.end is not None]
        if closed:
            ends.append(max(closed))
        elif evidence.samples:
            ends.append(evidence.samples[0].time)
    if not ends:
        return evidence.samples[0].time if evidence.samples else evidence.agent_finished_at
    return max(ends)


def score_mitigation(evidence: MitigationEvidence, profile: EvaluationProfile) -> MitigationScores:
    """Grade a mitigation from what the platform observed.

    Passes only when: the observation window has samples; the alerting configuration is
    unchanged (`alert_rules_fingerprint`); no expected alert fires in any sample, none is open
    in the alert history and none fired again after the agent finished; every baseline
    workload is present in every sample with desired replicas at least the baseline's (and
    ready replicas at least the baseline's at the end of the window); each workload's median
    error ratio is within the profile tolerance of its baseline; and the median frontend
    traffic is at least the profile's fraction of the baseline.

    Args:
        evidence: Baseline, window samples, expected alerts, alert history and times.
        profile: The evaluation profile.

    Returns:
        The verdict with every failed check in `reason` ("; "-separated, each starting with
        a CamelCase check name), and `ttr_seconds` from Ready to the clearing (when passed).
    """
    if not evidence.samples:
        return MitigationScores(
            passed=False, reason="NoObservation: no snapshot was taken in the observation window"
        )
    window_end = max(s.time for s in evidence.samples)
    reasons = [
        *_tamper_reasons(evidence),
        *_alert_reasons(evidence, window_end, profile),
        *_health_reasons(evidence, profile),
    ]
    if reasons:
        return MitigationScores(passed=False, reason="; ".join(reasons))
    cleared = cleared_at(evidence)
    observed = (window_end - evidence.agent_finished_at).total_seconds()
    return MitigationScores(
        passed=True,
        reason=(
            f"Resolved: expected alerts cleared and stayed cleared for {max(observed, 0.0):g}s; "
            f"health at baseline"
        ),
        ttr_seconds=time_to(evidence.ready_at, cleared),
    )
