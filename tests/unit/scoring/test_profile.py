"""Evaluation profiles: ids, lookup and validation."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from itbench.core.scoring.profile import (
    DEFAULT_PROFILE,
    EvaluationProfile,
    UnknownProfileError,
    get_profile,
)
from itbench.core.topology import EdgeType


def test_default_profile_id_is_name_at_version() -> None:
    assert DEFAULT_PROFILE.id == "default@5"
    assert get_profile("default@5") is DEFAULT_PROFILE
    assert get_profile("default") is DEFAULT_PROFILE, "a bare name means the newest version"


def test_older_profiles_stay_available_so_old_reports_can_be_recomputed() -> None:
    first = get_profile("default@1")
    second = get_profile("default@2")
    assert first.expected_alerts_on_any_object is False
    assert second.expected_alerts_on_any_object is True
    assert not first.whole_environment and not second.whole_environment
    assert DEFAULT_PROFILE.whole_environment and DEFAULT_PROFILE.require_category
    same = {"version", "expected_alerts_on_any_object"}
    assert first.model_dump(exclude=same) == second.model_dump(exclude=same)
    new = {
        "version",
        "whole_environment",
        "shared_aliases",
        "specific_kinds",
        "collateral_allowance",
        "require_category",
    }
    third = get_profile("default@3")
    assert second.model_dump(exclude=new) == third.model_dump(exclude=new)
    fourth = get_profile("default@4")
    assert not third.escalation_disqualifies and fourth.escalation_disqualifies
    escalation = {"version", "escalation_disqualifies"}
    assert third.model_dump(exclude=escalation) == fourth.model_dump(exclude=escalation)
    assert not fourth.posture_outside_fails and DEFAULT_PROFILE.posture_outside_fails
    outside = {"version", "posture_outside_fails"}
    assert fourth.model_dump(exclude=outside) == DEFAULT_PROFILE.model_dump(exclude=outside)


def test_unknown_profile_lists_the_known_ones() -> None:
    with pytest.raises(
        UnknownProfileError, match=r"known: default@1, default@2, default@3, default@4, default@5"
    ):
        get_profile("strict@3")


def test_every_edge_type_has_a_positive_cost_in_the_default_profile() -> None:
    assert set(DEFAULT_PROFILE.edge_costs) == set(EdgeType)
    assert min(DEFAULT_PROFILE.edge_costs.values()) > 0


def test_profiles_reject_non_positive_costs_and_large_under_penalties() -> None:
    data = DEFAULT_PROFILE.model_dump()
    with pytest.raises(ValidationError, match="must be > 0"):
        EvaluationProfile.model_validate({**data, "edge_costs": {"owns": 0.0}})
    with pytest.raises(ValidationError, match="under_prediction_penalty"):
        EvaluationProfile.model_validate({**data, "under_prediction_penalty": 0.5})


def test_profiles_are_immutable() -> None:
    with pytest.raises(ValidationError):
        DEFAULT_PROFILE.distance_decay = 0.9  # type: ignore[misc]
