"""Scenario complexity: the paper's Eq. 6 for SRE, and the class-based levels of CISO and FinOps.

Eq. 6: score = cbrt(propagation length x resolution steps x technologies). Thresholds on the score
put a scenario in Easy, Medium or Hard; `TABLE_12` holds the paper's 21 SRE patterns they fit.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from itbench.core.models.base import Complexity, Domain
from itbench.core.models.scenario import ScenarioSpec

EASY_BELOW = 1.7
"""Scores below this are Easy: products up to 4 (e.g. 2 entities x 1 step x 2 technologies)."""

HARD_FROM = 2.0
"""Scores from this up are Hard: products of 8 and more (e.g. 2 x 2 x 2). Medium lies between."""

# Why these thresholds: the paper reports 24 % Easy, 24 % Medium and 52 % Hard over Table 12, but
# five of its 21 rows share the score cbrt(6) = 1.82, so no pair of thresholds gives exactly 5/5/11.
# Easy < 1.7 <= Medium < 2.0 <= Hard gives 4/5/12 rows, the closest split (off by one row in two
# classes); every other split that respects the ties is further away.

CLASS_COMPLEXITY: dict[Domain, dict[str, Complexity]] = {
    Domain.CISO: {
        "Kyverno": Complexity.EASY,
        "K8sOPA": Complexity.MEDIUM,
        "RHEL9OPA": Complexity.MEDIUM,
        "KyvernoUpdate": Complexity.HARD,
    },
    Domain.FINOPS: {
        "CostAlertMisconfiguration": Complexity.EASY,
        "AutoscalerMisconfiguration": Complexity.HARD,
    },
}
"""CISO and FinOps complexity follows the scenario class (paper, Section 4.3)."""


class Table12Row(NamedTuple):
    """One row of the paper's Table 12: an SRE fault pattern and its Eq. 6 inputs."""

    pattern: str
    technologies: tuple[str, ...]
    propagation_length: int
    resolution_steps: int


TABLE_12: tuple[Table12Row, ...] = (
    Table12Row("CacheFailure", ("nodejs",), 3, 2),
    Table12Row("HighCPU", ("Java", "nodejs"), 3, 2),
    Table12Row("ServiceFailure", ("Java", "nodejs"), 4, 3),
    Table12Row("ManualGarbageCollection", ("Java", "nodejs"), 3, 2),
    Table12Row("MemoryLeak", ("python", "Node.js", "Go"), 8, 6),
    Table12Row("CorruptDeployment", ("Go", "Java", "nodejs"), 8, 6),
    Table12Row("CorruptDeployment", ("Java", "Go", "nodejs"), 7, 5),
    Table12Row("CorruptDeployment", ("Go", "nodejs"), 2, 1),
    Table12Row("NetworkDelay", ("Go", "python", "nodejs"), 4, 1),
    Table12Row("PodFault", ("Go", "nodejs"), 2, 2),
    Table12Row("NetworkPartition", ("Tonic", "Rust", "Go", "nodejs"), 4, 1),
    Table12Row("CorruptImage", ("Go", "nodejs"), 3, 1),
    Table12Row("CorruptImage", ("nodejs",), 2, 1),
    Table12Row("CPUStress", ("python", "nodejs"), 2, 2),
    Table12Row("HTTPRequestBodyTamperFault", ("Ruby", "Go"), 3, 1),
    Table12Row("HTTPRequestAbortFault", ("PHP", "Go", "Tonic", "Rust", "nodejs"), 4, 1),
    Table12Row("HTTPRequestBodyTamperFault", ("Ruby", "Go", "nodejs"), 3, 2),
    Table12Row("JVMCodeReturnFault", ("Java", "nodejs"), 3, 1),
    Table12Row("PodFailure", ("Java", "nodejs"), 1, 1),
    Table12Row("IncorrectAuthentication", (".NET", "Go", "nodejs"), 2, 1),
    Table12Row("MemoryResourceLimit", ("Go", "nodejs"), 1, 2),
)
"""The paper's Table 12, row by row (patterns repeat where the paper lists variants)."""


class UnknownComplexityError(ValueError):
    """A CISO or FinOps scenario whose class has no known complexity and that gives none."""


def complexity_score(propagation_length: int, resolution_steps: int, technologies: int) -> float:
    """Eq. 6: the geometric mean of the three difficulty factors.

    Args:
        propagation_length: Entities on the fault propagation chain (at least 1).
        resolution_steps: Steps of the shortest accepted mitigation (at least 1).
        technologies: Distinct technologies involved (at least 1).

    Returns:
        cbrt(propagation_length x resolution_steps x technologies), rounded to 4 decimals.

    Raises:
        ValueError: If a factor is below 1.
    """
    for name, value in (
        ("propagation_length", propagation_length),
        ("resolution_steps", resolution_steps),
        ("technologies", technologies),
    ):
        if value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")
    return round(math.cbrt(propagation_length * resolution_steps * technologies), 4)


def classify_score(score: float) -> Complexity:
    """Map an Eq. 6 score to Easy (< 1.7), Medium (< 2.0) or Hard (>= 2.0).

    Args:
        score: An Eq. 6 score.

    Returns:
        The complexity class of the score.
    """
    if score < EASY_BELOW:
        return Complexity.EASY
    if score < HARD_FROM:
        return Complexity.MEDIUM
    return Complexity.HARD


def technology_count(technologies: list[str]) -> int:
    """Distinct technologies, compared case-insensitively; an empty list counts as one.

    Args:
        technologies: Technology names as written in the scenario.

    Returns:
        The number of distinct technologies, at least 1 (the application itself).
    """
    return max(len({t.strip().lower() for t in technologies if t.strip()}), 1)


def sre_score(spec: ScenarioSpec) -> float:
    """The Eq. 6 score of a scenario, from its ground truth and technologies.

    Args:
        spec: The scenario spec.

    Returns:
        The Eq. 6 score.
    """
    truth = spec.ground_truth
    return complexity_score(
        truth.propagation_length(),
        truth.resolution_steps(),
        technology_count(spec.environment.technologies),
    )


def effective_complexity(spec: ScenarioSpec) -> tuple[Complexity, float | None]:
    """The complexity a scenario runs at, and its Eq. 6 score for SRE scenarios.

    A complexity given in the spec wins. Otherwise SRE scenarios are classified by their Eq. 6 score
    and CISO and FinOps scenarios by their class (`CLASS_COMPLEXITY`).

    Args:
        spec: The scenario spec.

    Returns:
        (complexity, score); the score is None outside SRE.

    Raises:
        UnknownComplexityError: A CISO or FinOps scenario of an unknown class without complexity.
    """
    if spec.domain == Domain.SRE:
        score = sre_score(spec)
        return (spec.complexity or classify_score(score)), score
    if spec.complexity is not None:
        return spec.complexity, None
    by_class = CLASS_COMPLEXITY.get(spec.domain, {})
    known = by_class.get(spec.scenario_class)
    if known is None:
        raise UnknownComplexityError(
            f"class {spec.scenario_class!r} has no default complexity for {spec.domain.value} "
            f"(known: {', '.join(sorted(by_class)) or 'none'}); set spec.complexity"
        )
    return known, None
