"""Conditions, telemetry masks and agent levels behave as the API promises."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from itbench.core.models import AgentLevel, Complexity, ConditionStatus, TelemetryToggles
from itbench.core.models.agent_submission import AgentRuntime
from itbench.core.models.base import set_condition
from itbench.core.models.benchmark_run import ScenarioSelection

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_last_transition_time_changes_only_when_status_flips() -> None:
    conds = set_condition(
        [], type="Ready", status=ConditionStatus.FALSE, reason="A", message="a", now=T0
    )
    later = T0 + timedelta(minutes=5)
    same = set_condition(
        conds, type="Ready", status=ConditionStatus.FALSE, reason="B", message="b", now=later
    )
    assert same[0].last_transition_time == T0
    assert same[0].reason == "B"
    flipped = set_condition(
        same, type="Ready", status=ConditionStatus.TRUE, reason="C", message="c", now=later
    )
    assert flipped[0].last_transition_time == later
    assert len(flipped) == 1


def test_telemetry_mask_hides_signals_the_scenario_has() -> None:
    scenario = TelemetryToggles(metrics=True, logs=True, traces=True)
    effective = scenario.masked_by(TelemetryToggles(traces=False))
    assert (effective.metrics, effective.logs, effective.traces) == (True, True, False)


def test_levels_map_to_complexity() -> None:
    assert AgentLevel.BEGINNER.max_complexity() is Complexity.EASY
    assert AgentLevel.EXPERT.max_complexity() is Complexity.HARD


def test_runtime_requires_exactly_one_kind() -> None:
    with pytest.raises(ValidationError, match="exactly one of image, external, builtin or command"):
        AgentRuntime.model_validate({"external": {}, "builtin": {"name": "oracle"}})
    assert AgentRuntime.model_validate({"builtin": {"name": "oracle"}}).kind() == "builtin"


def test_selection_requires_names_or_selector() -> None:
    with pytest.raises(ValidationError, match="exactly one of names or selector"):
        ScenarioSelection.model_validate({})
    sel = ScenarioSelection.model_validate({"selector": {"domains": ["SRE"]}})
    assert sel.selector is not None and sel.selector.domains[0].value == "SRE"
