"""Report submission over HTTP: validation with field paths, size limits, counting and the audit."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta

import pytest
from gateway_fakes import Gateway

from itbench.client import (
    ControlAssessment,
    DiagnosisReport,
    EntityKind,
    ITBenchAPIError,
    MitigationReport,
    PostureReport,
    PostureResult,
    PredictedEdge,
    PredictedEntity,
)
from itbench.gateway.schemas import MAX_BODY_BYTES


def _diagnosis() -> DiagnosisReport:
    return DiagnosisReport(
        entities=[
            PredictedEntity(kind=EntityKind.DEPLOYMENT, name="cart", root_cause=True),
            PredictedEntity(kind=EntityKind.SERVICE, name="frontend"),
        ],
        propagation_chain=[PredictedEdge(source="Deployment/cart", target="Service/frontend")],
        reasoning="image pull fails",
    )


def test_a_valid_diagnosis_is_stored_with_its_time(gw: Gateway) -> None:
    session = gw.open("t1")
    receipt = gw.client(session).submit_diagnosis(_diagnosis())
    assert receipt.report == "diagnosis"
    assert session.diagnosis == _diagnosis()
    assert session.diagnosis_at == receipt.accepted_at
    assert session.rejected_submissions == 0
    assert (session.audit[-1].action, session.audit[-1].outcome) == ("submit.diagnosis", "ok")


def test_a_valid_mitigation_report_is_stored_but_only_as_a_claim(gw: Gateway) -> None:
    session = gw.open("t1")
    gw.client(session).submit_mitigation(MitigationReport(actions=["undo"], resolved=True))
    assert session.mitigation is not None
    assert session.mitigation.resolved is True
    assert session.mitigation_at is not None
    assert session.env.now() - session.mitigation_at == timedelta(seconds=1)


def test_a_malformed_diagnosis_is_rejected_with_every_field_path(gw: Gateway) -> None:
    session = gw.open("t1")
    body = {
        "entities": [{"kind": "Gadget", "name": "cart", "rootCause": True}, {"kind": "Pod"}],
        "propagationChain": [{"source": "x"}],
        "surprise": 1,
    }
    response = gw.http.post("/v1/trials/t1/diagnosis", json=body, headers=gw.headers(session))
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    fields = {e["field"] for e in problem["errors"]}
    assert {
        "entities.0.kind",
        "entities.1.name",
        "propagationChain.0.source",
        "propagationChain.0.target",
        "surprise",
    } <= fields
    assert "DiagnosisReport is invalid at" in problem["detail"]
    assert session.diagnosis is None
    assert session.rejected_submissions == 1
    entry = session.audit[-1]
    assert (entry.action, entry.outcome) == ("submit.diagnosis", "rejected")
    assert {e["field"] for e in entry.detail["errors"]} == fields


def test_a_body_that_is_not_json_is_rejected(gw: Gateway) -> None:
    session = gw.open("t1")
    response = gw.http.post(
        "/v1/trials/t1/diagnosis", content=b"{not json", headers=gw.headers(session)
    )
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "(body)"
    assert session.rejected_submissions == 1


def test_an_oversized_diagnosis_is_rejected_with_413_and_counted(gw: Gateway) -> None:
    session = gw.open("t1")
    huge = json.dumps({"reasoning": "x" * (MAX_BODY_BYTES + 1)})
    response = gw.http.post(
        "/v1/trials/t1/diagnosis",
        content=huge,
        headers={**gw.headers(session), "content-type": "application/json"},
    )
    assert response.status_code == 413
    problem = response.json()
    assert problem["type"].endswith("/body-too-large")
    assert problem["limit"] == MAX_BODY_BYTES
    assert "256 KiB" in problem["detail"]
    assert session.rejected_submissions == 1
    assert session.audit[-1].outcome == "rejected"


def test_an_oversized_chunked_body_is_rejected_without_a_length_header(gw: Gateway) -> None:
    session = gw.open("t1")

    def chunks() -> Iterator[bytes]:
        for _ in range(40):
            yield b"x" * 10_000

    response = gw.http.post(
        "/v1/trials/t1/mitigation", content=chunks(), headers=gw.headers(session)
    )
    assert response.status_code == 413
    assert session.rejected_submissions == 1


def test_the_sdk_raises_a_typed_error_with_the_field_errors(gw: Gateway) -> None:
    session = gw.open("t1")
    too_long = DiagnosisReport.model_construct(
        entities=[], propagation_chain=[], reasoning="y" * 30_000
    )
    with pytest.raises(ITBenchAPIError) as err:
        gw.client(session).submit_diagnosis(too_long)
    assert err.value.status == 422
    assert err.value.errors[0]["field"] == "reasoning"


def test_a_report_the_domain_does_not_take_is_rejected(gw: Gateway) -> None:
    session = gw.open("t1")
    with pytest.raises(ITBenchAPIError) as err:
        gw.client(session).submit_posture(PostureReport())
    assert err.value.slug == "report-not-expected"
    assert "takes diagnosis and mitigation reports, not posture" in err.value.detail
    assert session.rejected_submissions == 1


def test_a_ciso_trial_takes_the_posture_report(gw: Gateway) -> None:
    session = gw.open("t1", domain="CISO")
    report = PostureReport(
        assessments=[
            ControlAssessment(control_id="CIS 5.2.5", target="Pod/x", result=PostureResult.FAIL)
        ]
    )
    gw.client(session).submit_posture(report)
    assert session.posture == report
    assert session.posture_at is not None


def test_a_later_valid_report_replaces_the_earlier_one(gw: Gateway) -> None:
    session = gw.open("t1")
    client = gw.client(session)
    client.submit_diagnosis(DiagnosisReport(reasoning="first"))
    client.submit_diagnosis(_diagnosis())
    assert session.diagnosis is not None
    assert session.diagnosis.reasoning == "image pull fails"


def test_submissions_after_the_deadline_are_refused(gw: Gateway) -> None:
    session = gw.open("t1", deadline_seconds=5)
    client = gw.client(session)
    client.wait(5)
    with pytest.raises(ITBenchAPIError) as err:
        client.submit_diagnosis(_diagnosis())
    assert err.value.slug == "deadline-passed"
    assert session.diagnosis is None
