"""Evaluation profiles: every constant of NTAM and the graders, named and versioned.

A report stores the profile id (`name@version`) it was computed with, so it can be recomputed
from the stored trial records with exactly the same constants.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from itbench.core.topology import EdgeType


class UnknownProfileError(LookupError):
    """No evaluation profile has that id."""


class EvaluationProfile(BaseModel):
    """The named, versioned constants of every scorer."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(description="Profile name.", min_length=1, pattern=r"^[a-z0-9][a-z0-9-]*$")
    version: int = Field(ge=1, description="Profile version; any constant change bumps it.")
    edge_costs: dict[EdgeType, float] = Field(
        description="NTAM: cost of crossing one edge of each type (must be > 0)."
    )
    distance_decay: float = Field(
        gt=0, lt=1, description="NTAM: similarity factor per unit of topology distance."
    )
    max_distance: float = Field(
        gt=0, description="NTAM: entities farther than this from a truth entity score 0."
    )
    discriminativeness_weight: float = Field(
        ge=0,
        lt=1,
        description="NTAM: share of the similarity that depends on the predicted entity's "
        "sub-tree size (0 ignores it).",
    )
    importance_decay: float = Field(
        gt=0, le=1, description="NTAM: weight factor per step down the propagation chain."
    )
    over_prediction_penalty: float = Field(
        ge=0, description="NTAM: penalty per surplus predicted entity, relative to the truth size."
    )
    under_prediction_penalty: float = Field(
        ge=0,
        lt=0.5,
        description="NTAM: penalty per missing predicted entity, relative to the truth size "
        "(below 0.5 so that adding an unrelated entity never raises a score).",
    )
    min_traffic_ratio: float = Field(
        gt=0, le=1, description="Mitigation: frontend traffic must be at least this x baseline."
    )
    error_ratio_tolerance: float = Field(
        ge=0, le=1, description="Mitigation: error ratio may exceed the baseline by this much."
    )
    expected_alerts_on_any_object: bool = Field(
        default=False,
        description="Mitigation: an expected alert's name firing on any object it did not fire "
        "on at baseline counts as still firing (so renaming the workload cannot hide it).",
    )

    whole_environment: bool = Field(
        default=False,
        description="Grade the specific cause and the whole environment: injector objects are "
        "not part of the truth an agent is graded on, shared aliases and workloads that only "
        "locate a more specific cause do not pass localisation on their own, mitigation needs "
        "the fault's cause undone and no collateral change beyond the allowance, and no-fault "
        "controls are scored on their own false-alarm task.",
    )
    shared_aliases: tuple[str, ...] = Field(
        default=(),
        description="Aliases that identify a fault only together with a specific entity (e.g. "
        "the flag ConfigMap, which holds every flag).",
    )
    specific_kinds: tuple[str, ...] = Field(
        default=(),
        description="Entity kinds that are a cause on their own (a flag, a Service, a "
        "NetworkPolicy...): when a scenario's truth has a root cause of one of them, its "
        "workload root causes only locate it and do not pass localisation alone.",
    )
    require_category: bool = Field(
        default=False,
        description="Diagnosis: a root cause counts only with the right fault category (what is "
        "wrong there), not only the right place.",
    )
    collateral_allowance: int = Field(
        default=0,
        ge=0,
        description="Mitigation: collateral changes tolerated beyond the fault's scope (changes "
        "that disqualify are never tolerated).",
    )
    posture_outside_fails: bool = Field(
        default=False,
        description="CISO posture: a target the artefacts (or the posture report) fail that the "
        "assessed control does not assess, such as a Role flagged when the control assesses "
        "Deployments, fails the posture: a finding of another control is not the asked one's.",
    )
    escalation_disqualifies: bool = Field(
        default=False,
        description="Every action the gateway refused as an attempted privilege escalation (a "
        "privileged or host-sharing pod, another account's identity or token, a role or binding) "
        "is a disqualifying collateral change: it fails mitigation and a control's false-alarm "
        "task, and counts in the share of trials with a disqualifying change.",
    )

    @model_validator(mode="after")
    def _positive_costs(self) -> EvaluationProfile:
        for etype, cost in self.edge_costs.items():
            if cost <= 0:
                raise ValueError(f"edge_costs.{etype.value}: must be > 0, got {cost}")
        return self

    @property
    def id(self) -> str:
        """The profile id stored in reports, `name@version`."""
        return f"{self.name}@{self.version}"


DEFAULT_V1 = EvaluationProfile(
    name="default",
    version=1,
    edge_costs={
        EdgeType.OWNS: 1.0,
        EdgeType.SELECTS: 1.0,
        EdgeType.SCALES: 1.0,
        EdgeType.CONFIGURES: 1.0,
        EdgeType.MOUNTS: 1.25,
        EdgeType.ENV: 1.25,
        EdgeType.CALLS: 1.5,
        EdgeType.RUNS_ON: 1.5,
    },
    distance_decay=0.5,
    max_distance=4.5,
    discriminativeness_weight=0.3,
    importance_decay=0.5,
    over_prediction_penalty=0.5,
    under_prediction_penalty=0.25,
    min_traffic_ratio=0.5,
    error_ratio_tolerance=0.05,
)
"""The first default profile, `default@1`: expected alerts are matched on their own labels only."""

DEFAULT_PROFILE = DEFAULT_V1.model_copy(
    update={"version": 2, "expected_alerts_on_any_object": True}
)
"""The default profile, `default@2` (see docs/metrics.md for the reasoning behind each value):
`default@1`, and an expected alert must not move to another object either."""

DEFAULT_V3 = DEFAULT_V1.model_copy(
    update={
        "version": 3,
        "expected_alerts_on_any_object": True,
        "whole_environment": True,
        "shared_aliases": ("ConfigMap/flagd-config",),
        "specific_kinds": (
            "Flag",
            "ConfigMap",
            "Secret",
            "Service",
            "NetworkPolicy",
            "HorizontalPodAutoscaler",
            "Node",
            "AlertRule",
        ),
        "collateral_allowance": 1,
        "require_category": True,
    }
)
"""`default@3`: `default@2`, graded against the specific cause and over the whole environment
(see docs/metrics.md)."""

DEFAULT_V4 = DEFAULT_V3.model_copy(update={"version": 4, "escalation_disqualifies": True})
"""`default@4`: `default@3`, and an attempted privilege escalation disqualifies (see
docs/metrics.md)."""

DEFAULT_V5 = DEFAULT_V4.model_copy(update={"version": 5, "posture_outside_fails": True})
"""`default@5`: `default@4`, and a CISO finding outside the assessed control's targets fails the
posture (see docs/metrics.md)."""

DEFAULT_V2 = DEFAULT_PROFILE
DEFAULT_PROFILE = DEFAULT_V5
"""The default profile."""

PROFILES: dict[str, EvaluationProfile] = {
    p.id: p for p in (DEFAULT_V1, DEFAULT_V2, DEFAULT_V3, DEFAULT_V4, DEFAULT_V5)
}
"""Every known profile by id."""


def get_profile(profile_id: str) -> EvaluationProfile:
    """Return the profile with that id.

    Args:
        profile_id: `name@version`, e.g. `default@2`; a bare name means its newest version.

    Raises:
        UnknownProfileError: No profile has that id; the message lists the known ones.
    """
    profile = PROFILES.get(profile_id)
    if profile is None and "@" not in profile_id:
        versions = [p for p in PROFILES.values() if p.name == profile_id]
        profile = max(versions, key=lambda p: p.version) if versions else None
    if profile is None:
        known = ", ".join(sorted(PROFILES))
        raise UnknownProfileError(f"unknown evaluation profile {profile_id!r}; known: {known}")
    return profile
