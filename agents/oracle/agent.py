"""The oracle agent: reads the ground truth, reports it, applies the accepted mitigation.

It proves the graders can reach 100 %: a run must allow it (`allowOracle`), otherwise the gateway
refuses `/oracle` and the agent only reports FINISHED.
"""

from __future__ import annotations

from agents.ciso_reference.agent import artefacts as ciso_artefacts
from agents.routines import begin, finish, ref, wait_for_quiet
from itbench.client import (
    ControlAssessment,
    DiagnosisReport,
    Domain,
    GroundTruth,
    ITBenchAPIError,
    ITBenchClient,
    MitigationReport,
    PostureReport,
    PredictedEdge,
    PredictedEntity,
    mitigation_to_actions,
)


def diagnosis_of(truth: GroundTruth) -> DiagnosisReport:
    """The diagnosis report that restates the ground truth: its root causes and propagation
    chain (entities involved but off the chain are left out, as a chain-scored report should)."""
    refs = {e.id: ref(e.kind.value, e.name) for e in truth.entities}
    on_chain = {p.source for p in truth.propagation} | {p.target for p in truth.propagation}
    named = [e for e in truth.entities if e.root_cause or e.id in on_chain or not on_chain]
    return DiagnosisReport(
        entities=[
            PredictedEntity(
                kind=e.kind,
                name=e.name,
                root_cause=e.root_cause,
                condition=e.condition[:1000],
                category=e.category if e.root_cause else None,
            )
            for e in named
        ],
        propagation_chain=[
            PredictedEdge(
                source=refs[p.source],
                target=refs[p.target],
                condition=p.condition[:1000],
                effect=p.effect[:1000],
            )
            for p in truth.propagation
        ],
        reasoning="The ground truth, as the oracle reads it.",
    )


def run(client: ITBenchClient) -> None:
    """Work one trial with the ground truth.

    Args:
        client: The SDK client holding the trial's token.
    """
    task = begin(client)
    try:
        truth = client.oracle()
    except ITBenchAPIError:
        finish(client)
        return
    if task.domain == Domain.CISO:
        # A CISO trial is scored on artefacts: the oracle submits the reference ones.
        artefacts = ciso_artefacts(client, task)
        if artefacts is not None:
            client.submit_compliance(artefacts)
        client.submit_posture(
            PostureReport(
                assessments=[
                    ControlAssessment(control_id=p.control_id, target=p.target, result=p.result)
                    for p in truth.posture
                ],
                reasoning="The expected posture, as the oracle reads it.",
            )
        )
        finish(client)
        return
    client.submit_diagnosis(diagnosis_of(truth))
    done: list[str] = []
    if truth.mitigations:
        for action in mitigation_to_actions(truth.mitigations[0], task.namespace):
            result = client.act(action)
            done.append(f"{action.verb.value} {action.kind}/{action.name}: {result.message}")
    quiet = wait_for_quiet(client, budget_seconds=600.0, step_seconds=15.0)
    client.submit_mitigation(
        MitigationReport(
            actions=done,
            resolved=quiet,
            reasoning=truth.mitigations[0].description if truth.mitigations else "nothing to do",
        )
    )
    finish(client)
