"""Shared building blocks of every ITBench resource: model config, enums, conditions, metadata."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

GROUP = "itbench.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
LABEL_PREFIX = f"{GROUP}/"

ApiVersion = Literal["itbench.io/v1alpha1"]


class ApiModel(BaseModel):
    """Base of every API object: camelCase on the wire, unknown fields rejected."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        validate_assignment=False,
        use_attribute_docstrings=False,
    )

    def wire(self) -> dict[str, Any]:
        """Return the JSON-compatible wire form (camelCase, no unset optional fields)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class Domain(StrEnum):
    """The persona a scenario or agent belongs to."""

    SRE = "SRE"
    CISO = "CISO"
    FINOPS = "FinOps"


class Complexity(StrEnum):
    """How hard a scenario is (the paper's Easy/Medium/Hard)."""

    EASY = "Easy"
    MEDIUM = "Medium"
    HARD = "Hard"


class AgentLevel(StrEnum):
    """An agent's declared level; each level takes scenarios up to a complexity."""

    BEGINNER = "Beginner"
    INTERMEDIATE = "Intermediate"
    EXPERT = "Expert"

    def max_complexity(self) -> Complexity:
        """The hardest scenario complexity this level is benchmarked on."""
        return {
            AgentLevel.BEGINNER: Complexity.EASY,
            AgentLevel.INTERMEDIATE: Complexity.MEDIUM,
            AgentLevel.EXPERT: Complexity.HARD,
        }[self]


COMPLEXITY_ORDER: dict[Complexity, int] = {
    Complexity.EASY: 0,
    Complexity.MEDIUM: 1,
    Complexity.HARD: 2,
}


class ConditionStatus(StrEnum):
    """Kubernetes condition status."""

    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Condition(ApiModel):
    """A standard Kubernetes condition (metav1.Condition)."""

    type: str = Field(description="Type of condition in CamelCase, e.g. Ready.")
    status: ConditionStatus = Field(description="Status of the condition: True, False or Unknown.")
    reason: str = Field(
        default="", description="Machine-readable CamelCase reason for the last transition."
    )
    message: str = Field(default="", description="Human-readable details about the transition.")
    last_transition_time: datetime | None = Field(
        default=None, description="When the status last changed (RFC 3339)."
    )
    observed_generation: int | None = Field(
        default=None, description="The .metadata.generation this condition was set from."
    )


def set_condition(
    conditions: list[Condition],
    *,
    type: str,
    status: ConditionStatus,
    reason: str,
    message: str,
    now: datetime,
    generation: int | None = None,
) -> list[Condition]:
    """Return conditions with one condition set; lastTransitionTime changes only on a status flip.

    Args:
        conditions: The current conditions (not modified).
        type: The condition type to set.
        status: Its new status.
        reason: CamelCase reason.
        message: Human-readable message.
        now: The current time, used only when the status flips or the condition is new.
        generation: The object generation the condition reflects.
    """
    result: list[Condition] = []
    found = False
    for cond in conditions:
        if cond.type != type:
            result.append(cond)
            continue
        found = True
        flipped = cond.status != status
        result.append(
            Condition(
                type=type,
                status=status,
                reason=reason,
                message=message,
                last_transition_time=now if flipped else (cond.last_transition_time or now),
                observed_generation=generation,
            )
        )
    if not found:
        result.append(
            Condition(
                type=type,
                status=status,
                reason=reason,
                message=message,
                last_transition_time=now,
                observed_generation=generation,
            )
        )
    return result


def get_condition(conditions: list[Condition], type: str) -> Condition | None:
    """Return the condition of the given type, if present."""
    for cond in conditions:
        if cond.type == type:
            return cond
    return None


class OwnerReference(ApiModel):
    """A reference to the owning object (metav1.OwnerReference)."""

    api_version: str = Field(description="API version of the owner.")
    kind: str = Field(description="Kind of the owner.")
    name: str = Field(description="Name of the owner.")
    uid: str = Field(description="UID of the owner.")
    controller: bool | None = Field(
        default=None, description="Whether the owner is the controller."
    )
    block_owner_deletion: bool | None = Field(
        default=None, description="Whether the owner blocks deletion of this object."
    )


class ObjectMeta(ApiModel):
    """The subset of Kubernetes object metadata ITBench reads and writes."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    name: str = Field(
        description="Object name (DNS-1123 subdomain).",
        pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        max_length=253,
    )
    namespace: str | None = Field(default=None, description="Namespace, for namespaced kinds.")
    labels: dict[str, str] = Field(default_factory=dict, description="Labels.")
    annotations: dict[str, str] = Field(default_factory=dict, description="Annotations.")
    uid: str | None = Field(default=None, description="Server-assigned unique id.")
    generation: int | None = Field(default=None, description="Server-assigned spec generation.")
    resource_version: str | None = Field(default=None, description="Server-assigned version.")
    creation_timestamp: datetime | None = Field(default=None, description="Creation time.")
    owner_references: list[OwnerReference] = Field(
        default_factory=list, description="Objects that own this one."
    )
    finalizers: list[str] = Field(default_factory=list, description="Finalizers.")


class TelemetryToggles(ApiModel):
    """Which observability signals exist (scenario) or are shown to the agent (run mask)."""

    metrics: bool = Field(default=True, description="Prometheus metrics are available.")
    logs: bool = Field(default=True, description="Logs (Loki) are available.")
    traces: bool = Field(default=True, description="Traces (Jaeger) are available.")

    def masked_by(self, mask: TelemetryToggles) -> TelemetryToggles:
        """Return the signals available under both this and another toggle set."""
        return TelemetryToggles(
            metrics=self.metrics and mask.metrics,
            logs=self.logs and mask.logs,
            traces=self.traces and mask.traces,
        )


class LocalObjectReference(ApiModel):
    """A reference to an object by name (in the same namespace)."""

    name: str = Field(
        description="Name of the referenced object (DNS-1123 subdomain).",
        min_length=1,
        max_length=253,
        pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
    )
