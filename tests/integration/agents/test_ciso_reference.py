"""The CISO reference agent through the gateway and the SDK: it reads the requirement (and, for
an update, the installed policy set), submits its artefacts, and the gateway's evaluation gives
every target its right posture on the trial's variant and on the counterpart."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from agent_harness import Harness, catalog

from agents.ciso_reference.agent import run as ciso_reference
from itbench.core.ciso.posture import score_compliance
from itbench.core.models.base import Domain

CISO = [s for s in catalog() if s.spec.domain == Domain.CISO]


@pytest.fixture(scope="module")
def harness() -> Iterator[Harness]:
    yield Harness()


@pytest.mark.parametrize("scenario", CISO, ids=[s.name for s in CISO])
def test_the_reference_passes_through_the_gateway(harness: Harness, scenario: object) -> None:
    attempt = harness.attempt(scenario, ciso_reference)  # type: ignore[arg-type]
    session = attempt.session
    assert session.compliance is not None, "the artefacts were not accepted"
    assert session.compliance_at is not None
    assert any(f.id == "ciso.background" for f in attempt.scenario.spec.faults)
    scores = score_compliance(session.compliance, attempt.scenario, ttp=0.0, outside_fails=True)
    assert scores.passed, scores.reason
    assert scores.counterpart_passed is True
    assert [e.action for e in session.audit if e.action.startswith("submit")] == [
        "submit.compliance"
    ]
    assert session.rejected_submissions == 0


def test_the_artefacts_of_an_sre_trial_are_not_expected(harness: Harness) -> None:
    sre = next(s for s in catalog() if s.spec.domain == Domain.SRE and not s.spec.control)
    from itbench.client import ComplianceSubmission, ITBenchAPIError, ITBenchClient

    def agent(client: ITBenchClient) -> None:
        client.next_trial()
        with pytest.raises(ITBenchAPIError) as caught:
            client.submit_compliance(ComplianceSubmission(kyverno="kind: x"))
        assert caught.value.status == 422
        client.finished()

    attempt = harness.attempt_or_skip(sre, agent)
    assert attempt.session.compliance is None
    assert attempt.session.rejected_submissions == 1
