"""FinOps scoring: diagnosis and mitigation passes and proximity to the optimal footprint."""

from __future__ import annotations

from itbench.core.models.observations import EnvironmentSnapshot
from itbench.core.models.scenario import GroundTruth
from itbench.core.models.trial import DiagnosisScores, FinOpsScores


def proximity(observed: float, optimal: float) -> float:
    """`clip(1 - |observed - optimal| / optimal, 0, 1)`: 1 at the optimum, 0 at twice it or 0.

    Args:
        observed: The measured value.
        optimal: The optimal value (> 0; a non-positive optimum gives 0).
    """
    if optimal <= 0:
        return 0.0
    return min(max(1.0 - abs(observed - optimal) / optimal, 0.0), 1.0)


def score_finops(
    diagnosis: DiagnosisScores | None,
    truth: GroundTruth,
    final: EnvironmentSnapshot,
    mitigation_passed: bool,
) -> FinOpsScores:
    """Score a FinOps trial.

    Args:
        diagnosis: The diagnosis scores (None when no diagnosis was submitted).
        truth: The scenario's ground truth, with the optimal footprint in `finops`.
        final: The last snapshot of the observation window.
        mitigation_passed: Whether the mitigation grader passed the trial.

    Returns:
        Passes and proximities of cost, CPU requests, memory requests and efficiency
        (CPU usage / CPU requests); proximities are 0 when the truth has no optimum.
    """
    target = truth.finops
    efficiency = final.cpu_usage_cores / final.cpu_requests_cores if final.cpu_requests_cores else 0
    return FinOpsScores(
        diagnosis_passed=diagnosis is not None and diagnosis.passed,
        mitigation_passed=mitigation_passed,
        cost_proximity=proximity(final.cost_per_hour, target.cost_per_hour) if target else 0.0,
        cpu_proximity=proximity(final.cpu_requests_cores, target.cpu_cores) if target else 0.0,
        memory_proximity=(
            proximity(float(final.memory_requests_bytes), float(target.memory_bytes))
            if target
            else 0.0
        ),
        efficiency_proximity=proximity(efficiency, target.efficiency) if target else 0.0,
    )
