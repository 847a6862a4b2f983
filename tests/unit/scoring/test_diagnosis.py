"""Diagnosis scores: localization pass, FL-NTAM and FPC-NTAM of a report."""

from __future__ import annotations

from itbench.core.models.agent_io import DiagnosisReport, PredictedEdge, PredictedEntity
from itbench.core.models.scenario import EntityKind, GroundTruth, GroundTruthEntity, PropagationEdge
from itbench.core.scoring.diagnosis import score_diagnosis
from itbench.core.scoring.profile import DEFAULT_PROFILE
from itbench.core.topology import build_topology


def truth() -> GroundTruth:
    def ent(name: str, root: bool = False) -> GroundTruthEntity:
        return GroundTruthEntity(
            id=name,
            kind=EntityKind.DEPLOYMENT,
            name=name,
            aliases=[f"Service/{name}", f"Pod/{name}-*"],
            root_cause=root,
        )

    return GroundTruth(
        entities=[ent("cart", True), ent("checkout"), ent("frontend")],
        propagation=[
            PropagationEdge(source="cart", target="checkout"),
            PropagationEdge(source="checkout", target="frontend"),
        ],
    )


TOPOLOGY = build_topology(
    [
        {"kind": "Deployment", "metadata": {"name": n}}
        for n in ("cart", "checkout", "frontend", "ad")
    ],
    [("frontend", "checkout"), ("checkout", "cart"), ("frontend", "ad")],
)


def pe(ref: str, root: bool = False) -> PredictedEntity:
    kind, name = ref.split("/")
    return PredictedEntity(kind=EntityKind(kind), name=name, root_cause=root)


def test_a_perfect_report_passes_with_both_ntams_one() -> None:
    report = DiagnosisReport(
        entities=[pe("Service/cart", True), pe("Service/checkout"), pe("Deployment/frontend")]
    )
    scores = score_diagnosis(report, truth(), TOPOLOGY, DEFAULT_PROFILE)
    assert (scores.passed, scores.fl_ntam, scores.fpc_ntam) == (True, 1.0, 1.0)
    assert scores.ttd_seconds is None


def test_propagation_chain_endpoints_count_as_predicted_entities() -> None:
    report = DiagnosisReport(
        entities=[pe("Service/cart", True)],
        propagation_chain=[
            PredictedEdge(source="Service/cart", target="Service/checkout"),
            PredictedEdge(source="Service/checkout", target="Service/frontend"),
        ],
    )
    scores = score_diagnosis(report, truth(), TOPOLOGY, DEFAULT_PROFILE)
    assert scores.fpc_ntam == 1.0


def test_naming_many_root_causes_to_be_sure_does_not_pass() -> None:
    report = DiagnosisReport(entities=[pe("Service/cart", True), pe("Service/ad", True)])
    scores = score_diagnosis(report, truth(), TOPOLOGY, DEFAULT_PROFILE)
    assert not scores.passed
    assert 0 < scores.fl_ntam < 1


def test_wrong_root_cause_fails_but_nearby_earns_partial_ntam() -> None:
    report = DiagnosisReport(entities=[pe("Service/checkout", True)])
    scores = score_diagnosis(report, truth(), TOPOLOGY, DEFAULT_PROFILE)
    assert not scores.passed
    assert 0 < scores.fl_ntam < 1


def test_no_report_scores_zero() -> None:
    scores = score_diagnosis(None, truth(), TOPOLOGY, DEFAULT_PROFILE)
    assert (scores.passed, scores.fl_ntam, scores.fpc_ntam) == (False, 0.0, 0.0)


def test_control_scenario_passes_only_without_a_root_cause() -> None:
    empty = GroundTruth()
    assert score_diagnosis(DiagnosisReport(), empty, TOPOLOGY, DEFAULT_PROFILE).passed
    blamed = DiagnosisReport(entities=[pe("Service/cart", True)])
    scores = score_diagnosis(blamed, empty, TOPOLOGY, DEFAULT_PROFILE)
    assert (scores.passed, scores.fl_ntam) == (False, 0.0)
