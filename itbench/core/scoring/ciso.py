"""CISO scoring: the agent's posture assessment against the expected posture of each control."""

from __future__ import annotations

from itbench.core.models.agent_io import PostureReport
from itbench.core.models.scenario import ExpectedPosture, PostureResult
from itbench.core.models.trial import PostureScores


def _key(control_id: str, target: str) -> tuple[str, str]:
    return control_id.strip(), target.strip()


def score_posture(
    report: PostureReport | None, expected: list[ExpectedPosture], ttp: float | None
) -> PostureScores:
    """Score a posture report: every expected control result must be matched.

    A control counts as matched when the report assesses the same control on the same target
    with the expected result and never also with the opposite one. The scenario passes when
    a report was submitted and every expected control is matched, on compliant (pass) and
    non-compliant (fail) variants alike.

    Args:
        report: The accepted posture report, or None when the agent submitted none.
        expected: The expected result per control and target.
        ttp: Time to process in seconds (from Ready to the accepted report), if any.
    """
    if report is None:
        return PostureScores(passed=False, matched=0, expected=len(expected), ttp_seconds=ttp)
    claimed: dict[tuple[str, str], set[PostureResult]] = {}
    for assessment in report.assessments:
        claimed.setdefault(_key(assessment.control_id, assessment.target), set()).add(
            assessment.result
        )
    matched = sum(1 for e in expected if claimed.get(_key(e.control_id, e.target)) == {e.result})
    return PostureScores(
        passed=matched == len(expected),
        matched=matched,
        expected=len(expected),
        ttp_seconds=ttp,
    )
