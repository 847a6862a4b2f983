"""The CrewAI FinOps baseline, offline with scripted models, through the real gateway: it finds
the autoscaler behind a cost alert, restores it, and the cost returns to the optimum."""

from __future__ import annotations

from pathlib import Path

import pytest

from itbench.client import Domain
from itbench.core.models.trial import TrialPhase
from tests.integration.agents.crew_harness import (
    offline_crew,
    recorded,
    run_crew,
    skip_without_crewai,
)

skip_without_crewai()

__all__ = ["offline_crew"]


@pytest.mark.slow
def test_the_finops_crew_restores_a_wasteful_autoscaler_and_the_cost_alerts_clear(
    offline_crew: Path, tmp_path: Path
) -> None:
    reasoning, tool = recorded("crewai_finops_hpa.yaml")
    run = run_crew(
        "finops-frontend-hpa-misconfiguration",
        reasoning,
        tool,
        crew="agents.crewai_finops.crew",
        domain=Domain.FINOPS,
        steps_path=tmp_path / "steps.jsonl",
    )
    status = run.status
    assert run.reasoning.remaining == 0 and run.tool.remaining == 0, status.message
    assert status.phase == TrialPhase.SUCCEEDED, f"{status.reason}: {status.message}"
    scores = status.scores
    assert scores is not None and scores.finops is not None
    assert scores.finops.diagnosis_passed and scores.finops.mitigation_passed
    assert scores.finops.cost_proximity > 0.9
    patch = [e for e in run.audit if e["action"] == "act.patch"]
    assert len(patch) == 1 and patch[0]["outcome"] == "ok"
    hpa = [s.text for s in run.steps if s.kind.value == "tool-result" and s.tool == "nl2kubectl"]
    assert "averageUtilization: 5" in hpa[0] or "targetCPUUtilizationPercentage: 5" in hpa[0]
