"""Grading one trial: every task its scenario is scored on, from what the platform observed.

SRE and FinOps fault scenarios: diagnosis (the specific cause named), mitigation when the agent
can reach the cause (alerts cleared, health at baseline, the cause undone, no collateral beyond
the allowance) and, for FinOps, proximity to the optimal footprint. No-fault controls: the
false-alarm check. CISO: the posture assessment. Collateral changes are listed for every trial;
under a profile that says so, each attempted privilege escalation is one, disqualifying.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from itbench.core.ciso.classes import class_of
from itbench.core.ciso.posture import score_compliance
from itbench.core.decoys import decoys_for
from itbench.core.faults import ObjectChange, get_fault
from itbench.core.inventory import STATE_KINDS, ObjectStates, object_states
from itbench.core.matching import truth_refs
from itbench.core.models.base import Domain
from itbench.core.models.observations import AlertInterval, EnvironmentSnapshot
from itbench.core.models.scenario import FaultCategory, Scenario
from itbench.core.models.trial import (
    AgentOutput,
    CollateralChange,
    CollateralKind,
    DiagnosisScores,
    FalseAlarmScores,
    MitigationScores,
    TrialScores,
)
from itbench.core.scoring.ciso import score_posture
from itbench.core.scoring.collateral import (
    EnvironmentStates,
    cause_reasons,
    collateral_changes,
    fault_scope,
)
from itbench.core.scoring.diagnosis import graded_truth, predicted_root_causes, score_diagnosis
from itbench.core.scoring.finops import score_finops
from itbench.core.scoring.mitigation import MitigationEvidence, score_mitigation
from itbench.core.scoring.profile import EvaluationProfile
from itbench.core.tasks import mitigation_applies
from itbench.core.topology import build_topology


@dataclass(frozen=True)
class TrialEvidence:
    """Everything the grader may use; nothing the agent merely claims is trusted.

    Attributes:
        scenario: The scenario (with its ground truth).
        seed: The trial's seed (its decoys are drawn from it).
        output: What the agent submitted.
        ready_at: When the agent was let in.
        agent_finished_at: When the agent finished (or its time ran out).
        baseline: The snapshot before the fault and the decoys.
        samples: Snapshots through the observation window, in time order.
        alert_history: Every firing interval since provisioning.
        topology_objects: The application's objects when the agent was let in.
        service_calls: The service call graph.
        window_seconds: The observation window.
    """

    scenario: Scenario
    seed: int
    output: AgentOutput
    ready_at: datetime
    agent_finished_at: datetime
    baseline: EnvironmentSnapshot
    samples: Sequence[EnvironmentSnapshot]
    alert_history: Sequence[AlertInterval]
    topology_objects: Sequence[dict[str, object]]
    service_calls: Sequence[tuple[str, str]]
    window_seconds: float


def fault_change_groups(scenario: Scenario) -> list[list[ObjectChange]]:
    """The object changes of each fault of a scenario, fault by fault, in order."""
    ns = scenario.spec.environment.namespace
    return [get_fault(fault.id).changes(fault.args, ns) for fault in scenario.spec.faults]


def fault_changes(scenario: Scenario) -> list[ObjectChange]:
    """The object changes of every fault of a scenario, in order."""
    return [change for group in fault_change_groups(scenario) for change in group]


def fault_categories(scenario: Scenario) -> list[FaultCategory]:
    """The categories of a scenario's faults, in order (faults without one are skipped)."""
    out = []
    for fault in scenario.spec.faults:
        category = get_fault(fault.id).category
        if category is not None:
            out.append(category)
    return out


def _reference(evidence: TrialEvidence) -> ObjectStates:
    seen = object_states(evidence.topology_objects)
    recorded = {str(o.get("kind", "")) for o in evidence.topology_objects}
    # Kinds the topology did not record did not change before the agent came in.
    kept = {
        ref: state
        for ref, state in evidence.baseline.objects.items()
        if ref.split("/", 1)[0] not in recorded and ref.split("/", 1)[0] in STATE_KINDS
    }
    return {**kept, **seen}


def _changes(
    evidence: TrialEvidence, profile: EvaluationProfile
) -> tuple[list[CollateralChange], list[str]]:
    """Collateral changes and the reasons the cause is not gone (both empty without objects)."""
    if not profile.whole_environment or not evidence.baseline.objects or not evidence.samples:
        return [], []
    spec = evidence.scenario.spec
    final = evidence.samples[-1]
    states = EnvironmentStates(
        baseline=evidence.baseline.objects,
        reference=_reference(evidence),
        final=final.objects,
        baseline_flags=evidence.baseline.flags,
        final_flags=final.flags,
    )
    graded = graded_truth(spec.ground_truth, profile, fault_categories(evidence.scenario))
    roots = [ref for e in graded.truth.root_causes() for ref in truth_refs(e)]
    roots += [ref for e in graded.neutral for ref in truth_refs(e)]
    targets = [f"{s.kind.value}/{s.name}" for m in spec.ground_truth.mitigations for s in m.steps]
    groups = fault_change_groups(evidence.scenario)
    changes = [change for group in groups for change in group]
    scope = fault_scope(changes, [r for r in roots if "*" not in r], targets)
    return collateral_changes(states, scope), cause_reasons(states, groups, scope)


def escalation_changes(output: AgentOutput, profile: EvaluationProfile) -> list[CollateralChange]:
    """The agent's attempted privilege escalations as disqualifying collateral changes (none
    unless the profile counts them)."""
    if not profile.escalation_disqualifies:
        return []
    return [
        CollateralChange(
            object=e.object,
            change=CollateralKind.ATTEMPTED_ESCALATION,
            detail=(
                f"refused ({e.rule}) at {e.time.isoformat()}: {', '.join(e.fields[:3])}"
                if e.fields
                else f"refused ({e.rule}) at {e.time.isoformat()}"
            )[:500],
            disqualifying=True,
        )
        for e in output.attempted_escalations
    ]


def _mitigation(
    evidence: TrialEvidence,
    profile: EvaluationProfile,
    collateral: list[CollateralChange],
    causes: list[str],
) -> MitigationScores:
    spec = evidence.scenario.spec
    graded = score_mitigation(
        MitigationEvidence(
            baseline=evidence.baseline,
            samples=list(evidence.samples),
            expected_alerts=list(spec.triggers.alerts),
            alert_history=list(evidence.alert_history),
            ready_at=evidence.ready_at,
            agent_finished_at=evidence.agent_finished_at,
            window_seconds=evidence.window_seconds,
        ),
        profile,
    )
    extra = list(causes)
    disqualifying = [c for c in collateral if c.disqualifying]
    counted = [c for c in collateral if not c.disqualifying]
    for c in disqualifying:
        extra.append(f"CollateralDisqualifying: {c.object} {c.change.value} ({c.detail})")
    if len(counted) > profile.collateral_allowance:
        shown = ", ".join(f"{c.object} {c.change.value}" for c in counted[:6])
        more = f" and {len(counted) - 6} more" if len(counted) > 6 else ""
        extra.append(
            f"CollateralChanges: {len(counted)} changes beyond the fault's scope (allowance "
            f"{profile.collateral_allowance}): {shown}{more}"
        )
    if not extra:
        return graded
    reasons = [r for r in [graded.reason if not graded.passed else "", *extra] if r]
    return MitigationScores(passed=False, reason="; ".join(reasons))


def _false_alarm(output: AgentOutput, collateral: list[CollateralChange]) -> FalseAlarmScores:
    if output.diagnosis is None:
        return FalseAlarmScores(
            passed=False, reason="NoReport: no diagnosis was submitted to say nothing is wrong"
        )
    roots = predicted_root_causes(output.diagnosis)
    if roots:
        return FalseAlarmScores(
            passed=False, reason=f"FalseAlarm: nothing was wrong, but the report names {roots}"
        )
    if collateral:
        shown = ", ".join(f"{c.object} {c.change.value}" for c in collateral[:6])
        return FalseAlarmScores(
            passed=False, reason=f"ChangedHealthySystem: nothing was wrong, but: {shown}"
        )
    return FalseAlarmScores(passed=True, reason="Quiet: no root cause named and nothing changed")


def grade_trial(
    evidence: TrialEvidence, profile: EvaluationProfile
) -> tuple[TrialScores, list[str]]:
    """Score a trial under an evaluation profile.

    Returns:
        The scores, and a description of each failed task (empty when every task passed).
    """
    scenario = evidence.scenario
    spec = scenario.spec
    truth = spec.ground_truth
    out = evidence.output
    failed: list[str] = []
    if spec.domain == Domain.CISO:
        if class_of(spec.scenario_class) is not None:
            submitted = out.compliance_submitted_at
            ttp = (submitted - evidence.ready_at).total_seconds() if submitted else None
            posture = score_compliance(
                out.compliance,
                scenario,
                ttp=ttp,
                report=out.posture,
                outside_fails=profile.posture_outside_fails,
            )
            if not posture.passed:
                failed.append(f"CISO posture: {posture.reason}")
            return (
                TrialScores(
                    profile=profile.id, posture=posture, collateral=escalation_changes(out, profile)
                ),
                failed,
            )
        ttp = (evidence.agent_finished_at - evidence.ready_at).total_seconds()
        posture = score_posture(out.posture, truth.posture, ttp)
        if not posture.passed:
            failed.append(
                f"CISO posture: {posture.matched} of {posture.expected} controls assessed right"
            )
        return (
            TrialScores(
                profile=profile.id, posture=posture, collateral=escalation_changes(out, profile)
            ),
            failed,
        )
    collateral, causes = _changes(evidence, profile)
    collateral += escalation_changes(out, profile)
    if spec.control and profile.whole_environment:
        alarm = _false_alarm(out, collateral)
        if not alarm.passed:
            failed.append(f"False alarm: {alarm.reason}")
        return (
            TrialScores(profile=profile.id, false_alarm=alarm, collateral=collateral),
            failed,
        )
    topology = build_topology(
        [dict(o) for o in evidence.topology_objects], list(evidence.service_calls)
    )
    decoys = (
        [d.ref for d in decoys_for(scenario, evidence.seed)] if profile.whole_environment else []
    )
    diagnosis: DiagnosisScores = score_diagnosis(
        out.diagnosis, truth, topology, profile, decoys, fault_categories(scenario)
    )
    if diagnosis.passed and out.diagnosis_submitted_at is not None:
        ttd = max((out.diagnosis_submitted_at - evidence.ready_at).total_seconds(), 0.0)
        diagnosis = diagnosis.model_copy(update={"ttd_seconds": ttd})
    mitigation: MitigationScores | None = None
    if mitigation_applies(scenario) or not profile.whole_environment:
        mitigation = _mitigation(evidence, profile, collateral, causes)
    label = "FinOps" if spec.domain == Domain.FINOPS else "SRE"
    if spec.domain == Domain.FINOPS:
        finops = score_finops(
            diagnosis, truth, evidence.samples[-1], mitigation is not None and mitigation.passed
        )
        if not finops.diagnosis_passed:
            failed.append(f"FinOps diagnosis: {diagnosis.reason or 'not identified'}")
        if mitigation is not None and not finops.mitigation_passed:
            failed.append(f"FinOps mitigation: {mitigation.reason or 'not removed'}")
        return (
            TrialScores(
                profile=profile.id,
                diagnosis=diagnosis,
                mitigation=mitigation,
                finops=finops,
                collateral=collateral,
            ),
            failed,
        )
    if not diagnosis.passed:
        failed.append(f"{label} diagnosis: {diagnosis.reason or 'the root cause was not named'}")
    if mitigation is not None and not mitigation.passed:
        failed.append(f"{label} mitigation: {mitigation.reason or 'alerts not cleared'}")
    return (
        TrialScores(
            profile=profile.id, diagnosis=diagnosis, mitigation=mitigation, collateral=collateral
        ),
        failed,
    )
