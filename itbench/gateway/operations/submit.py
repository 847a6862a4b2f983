"""Reports on a trial session (diagnosis, mitigation, posture) and the oracle's ground truth."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from itbench.core.ciso.posture import fault_posture
from itbench.core.models.agent_io import DiagnosisReport, MitigationReport, PostureReport
from itbench.core.models.base import Domain
from itbench.core.models.compliance import ComplianceEvaluation, ComplianceSubmission
from itbench.core.models.scenario import GroundTruth, Scenario
from itbench.core.scoring.diagnosis import graded_truth
from itbench.core.scoring.profile import DEFAULT_PROFILE
from itbench.core.scoring.trial import fault_categories
from itbench.core.tasks import mitigation_applies
from itbench.gateway.errors import CallError, InvalidError, RefusedError
from itbench.gateway.operations.calls import Origin, audited
from itbench.gateway.operations.payloads import Payload, validate
from itbench.gateway.operations.protocol import REPORT_MODELS, TASKS_BY_DOMAIN, ReportName
from itbench.gateway.schemas import SubmissionReceipt
from itbench.gateway.sessions import TrialSession


def submit(
    session: TrialSession, origin: Origin, report: ReportName, body: BaseModel | Payload
) -> SubmissionReceipt:
    """Submit a report; the last valid one of each kind counts.

    A rejected report (not expected in this domain, malformed, too large) is counted in the
    session's `rejected_submissions`; the trial is still scored.

    Raises:
        InvalidError: The report is not expected here, or does not validate.
        TooLargeError: Its body is beyond the size limit.
    """
    with audited(session, origin, f"submit.{report}", session.virtual_cost.submission) as call:
        domain = session.scenario.spec.domain
        if report not in TASKS_BY_DOMAIN[domain]:
            session.rejected_submissions += 1
            raise InvalidError(
                "report-not-expected",
                "Report not expected",
                f"a {domain.value} trial takes {' and '.join(TASKS_BY_DOMAIN[domain])} reports, "
                f"not {report}",
            )
        try:
            parsed = validate(REPORT_MODELS[report], body, call)
        except CallError:
            session.rejected_submissions += 1
            raise
        now = session.env.now()
        if isinstance(parsed, DiagnosisReport):
            session.diagnosis, session.diagnosis_at = parsed, now
        elif isinstance(parsed, MitigationReport):
            session.mitigation, session.mitigation_at = parsed, now
        elif isinstance(parsed, PostureReport):
            session.posture, session.posture_at = parsed, now
        elif isinstance(parsed, ComplianceSubmission):
            session.compliance, session.compliance_at = evaluate_compliance(session, parsed), now
            call.detail["compliance"] = session.compliance.summary()
        return SubmissionReceipt(trial_id=session.trial_id, report=report, accepted_at=now)


def evaluate_compliance(
    session: TrialSession, submission: ComplianceSubmission
) -> ComplianceEvaluation:
    """The platform's evaluation of CISO artefacts on the trial's variant and its counterpart
    (in the twin: policy engines in a child process, collections in the evidence sandbox; on a
    live cluster: Kyverno's PolicyReports and the live objects): whatever the artefacts do, the
    answer is an evaluation, possibly with a problem, never an error."""
    from itbench.ciso.cluster import evaluate_on

    return evaluate_on(session.env, session.scenario, submission)


def oracle(session: TrialSession, origin: Origin) -> dict[str, Any]:
    """The ground truth (root causes, propagation, accepted mitigations), only when the run
    allows the oracle agent.

    Raises:
        RefusedError: The run hides the ground truth (`forbidden-ground-truth`).
    """
    with audited(session, origin, "oracle", 0.0):
        if not session.allow_oracle:
            raise RefusedError(
                "forbidden-ground-truth",
                "Refused by a guardrail",
                "the ground truth is hidden from agents; this run does not allow the oracle",
                extra={"rule": "ground-truth"},
            )
        return oracle_truth(session.scenario).wire()


def oracle_truth(scenario: Scenario) -> GroundTruth:
    """The ground truth as the default profile grades it: what an agent can observe, the
    specific root causes, and the accepted mitigations only where the agent can reach the cause."""
    truth = graded_truth(
        scenario.spec.ground_truth, DEFAULT_PROFILE, fault_categories(scenario)
    ).truth
    categories = fault_categories(scenario)
    if categories:
        entities = [
            e.model_copy(update={"category": categories[0]})
            if e.root_cause and e.category is None
            else e
            for e in truth.entities
        ]
        truth = truth.model_copy(update={"entities": entities})
    if not mitigation_applies(scenario):
        truth = truth.model_copy(update={"mitigations": []})
    if scenario.spec.domain == Domain.CISO:
        truth = truth.model_copy(update={"posture": [*fault_posture(scenario), *truth.posture]})
    return truth
