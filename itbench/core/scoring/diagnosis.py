"""Diagnosis scoring: fault-localization pass, FL-NTAM and FPC-NTAM of a diagnosis report."""

from __future__ import annotations

from itbench.core.matching import entity_matches
from itbench.core.models.agent_io import DiagnosisReport
from itbench.core.models.scenario import GroundTruth
from itbench.core.models.trial import DiagnosisScores
from itbench.core.scoring.ntam import fl_ntam, fpc_ntam
from itbench.core.scoring.profile import EvaluationProfile
from itbench.core.topology import Topology


def predicted_root_causes(report: DiagnosisReport) -> list[str]:
    """The entities the report flags as root causes, `Kind/name`, without duplicates."""
    return sorted({e.ref() for e in report.entities if e.root_cause})


def predicted_entities(report: DiagnosisReport) -> list[str]:
    """Every entity the report names: its entities and both ends of each propagation edge."""
    refs = {e.ref() for e in report.entities}
    for edge in report.propagation_chain:
        refs.update((edge.source, edge.target))
    return sorted(refs)


def localization_passed(root_causes: list[str], truth: GroundTruth) -> bool:
    """Whether the predicted root causes localise the fault.

    Passes when at least one root cause is predicted, every predicted root cause names a
    ground-truth root cause (naming many entities to be sure does not pass), and at least one
    ground-truth root cause is named. With no ground-truth root cause (a no-fault control), it
    passes only when no root cause is predicted.
    """
    truth_roots = truth.root_causes()
    if not truth_roots:
        return not root_causes
    if not root_causes:
        return False
    return all(any(entity_matches(p, g) for g in truth_roots) for p in root_causes)


def score_diagnosis(
    report: DiagnosisReport | None,
    truth: GroundTruth,
    topology: Topology,
    profile: EvaluationProfile,
) -> DiagnosisScores:
    """Score a diagnosis report against the ground truth on the system topology.

    Args:
        report: The accepted diagnosis, or None when the agent submitted none.
        truth: The scenario's ground truth.
        topology: The application's topology at evaluation time.
        profile: The evaluation profile.

    Returns:
        Pass, FL-NTAM and FPC-NTAM; `ttd_seconds` is left for the runner, which knows when the
        diagnosis was accepted.
    """
    if report is None:
        report = DiagnosisReport()
    roots = predicted_root_causes(report)
    return DiagnosisScores(
        passed=localization_passed(roots, truth),
        fl_ntam=fl_ntam(roots, truth, topology, profile),
        fpc_ntam=fpc_ntam(predicted_entities(report), truth, topology, profile),
    )
