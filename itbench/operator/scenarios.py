"""Scenario handlers: validate with the catalog's validator, compute complexity, mark Ready."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf

from itbench.core.catalog import validate_document
from itbench.core.complexity import effective_complexity
from itbench.core.models.base import GROUP, VERSION
from itbench.core.models.scenario import ScenarioPhase, ScenarioStatus
from itbench.operator.bodies import (
    condition,
    parsed_status,
    plain,
    problem_text,
    scenario_document,
    source,
)
from itbench.operator.kubeapi import SCENARIOS
from itbench.operator.runtime import OperatorRuntime


def reconcile_scenario(runtime: OperatorRuntime, body: kopf.Body) -> None:
    """Validate one Scenario and write its status (Ready or Invalid), with an Event on a change.

    Args:
        runtime: The operator's runtime.
        body: The Scenario object.
    """
    obj = plain(body)
    name = obj["metadata"]["name"]
    generation = obj["metadata"].get("generation")
    raw = body.get("status")
    old = dict(raw) if isinstance(raw, Mapping) else {}
    previous = parsed_status(ScenarioStatus, body) or ScenarioStatus()
    scenario, problems = validate_document(scenario_document(body), source(obj))
    if scenario is None:
        message = (
            f"Scenario {name} is invalid: {problem_text(problems)}; fix the spec and apply again"
        )
        status = previous.model_copy(
            update={
                "phase": ScenarioPhase.INVALID,
                "complexity": None,
                "complexity_score": None,
                "observed_generation": generation,
                "conditions": condition(
                    condition(
                        previous.conditions, "Valid", False, "InvalidSpec", message, generation
                    ),
                    "Ready",
                    False,
                    "InvalidSpec",
                    message,
                    generation,
                ),
            }
        )
    else:
        complexity, score = effective_complexity(scenario.spec)
        message = f"valid; complexity {complexity.value}"
        status = previous.model_copy(
            update={
                "phase": ScenarioPhase.READY,
                "complexity": complexity,
                "complexity_score": round(score, 4) if score is not None else None,
                "observed_generation": generation,
                "conditions": condition(
                    condition(previous.conditions, "Valid", True, "Validated", message, generation),
                    "Ready",
                    True,
                    "Validated",
                    message,
                    generation,
                ),
            }
        )
    new = status.wire()
    if status.phase != previous.phase or (
        status.phase == ScenarioPhase.INVALID and previous.observed_generation != generation
    ):
        runtime.api.event(
            obj, "Invalid" if scenario is None else "Ready", message, warning=scenario is None
        )
    if new != old:
        runtime.api.patch_status(SCENARIOS, None, name, new, old)


def register(registry: kopf.OperatorRegistry, runtime: OperatorRuntime) -> None:
    """Register the Scenario handlers of one operator instance.

    Args:
        registry: The operator's Kopf registry.
        runtime: What the handlers share.
    """

    @kopf.on.resume(GROUP, VERSION, SCENARIOS, id="validate-on-resume", registry=registry)
    @kopf.on.create(GROUP, VERSION, SCENARIOS, id="validate-on-create", registry=registry)
    @kopf.on.update(
        GROUP, VERSION, SCENARIOS, id="validate-on-update", field="spec", registry=registry
    )
    def validate(body: kopf.Body, **_: Any) -> None:
        with runtime.metrics.reconcile("Scenario"):
            reconcile_scenario(runtime, body)
