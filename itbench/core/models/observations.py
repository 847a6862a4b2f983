"""What environments report and accept: alerts, health snapshots and agent actions, as data.

Environments (the simulator, a live cluster) produce these; the trial runner and the graders
consume them. Nothing here does I/O.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import Field, field_validator

from itbench.core.models.base import ApiModel


class AlertState(StrEnum):
    """Prometheus alert states."""

    PENDING = "pending"
    FIRING = "firing"


class Alert(ApiModel):
    """An active alert, as Prometheus' /api/v1/alerts reports it."""

    alertname: str = Field(description="The alert rule name.")
    labels: dict[str, str] = Field(default_factory=dict, description="All labels of the alert.")
    annotations: dict[str, str] = Field(default_factory=dict, description="Annotations.")
    state: AlertState = Field(description="pending or firing.")
    active_at: datetime = Field(description="When the alert's condition first held.")
    value: float = Field(default=0.0, description="The value of the rule expression.")

    def matches(self, alertname: str, labels: dict[str, str]) -> bool:
        """Whether this alert has the given name and carries all the given labels."""
        return self.alertname == alertname and all(
            self.labels.get(k) == v for k, v in labels.items()
        )


class AlertInterval(ApiModel):
    """One firing interval of one alert series (end is None while still firing)."""

    alertname: str = Field(description="The alert rule name.")
    labels: dict[str, str] = Field(default_factory=dict, description="Labels of the series.")
    start: datetime = Field(description="When it started firing.")
    end: datetime | None = Field(default=None, description="When it stopped firing.")


class WorkloadHealth(ApiModel):
    """Health of one workload (Deployment or StatefulSet) at one instant."""

    kind: str = Field(description="Deployment or StatefulSet.")
    name: str = Field(description="Workload name.")
    desired_replicas: int = Field(ge=0, description="spec.replicas.")
    ready_replicas: int = Field(ge=0, description="Ready pods.")
    requests_per_second: float = Field(
        default=0.0, ge=0, description="Requests served per second (0 when it serves none)."
    )
    error_ratio: float = Field(default=0.0, ge=0, le=1, description="Share of failed requests.")


class EnvironmentSnapshot(ApiModel):
    """What graders compare with the baseline: workloads, alerting config, resource footprint."""

    time: datetime = Field(description="When the snapshot was taken.")
    workloads: list[WorkloadHealth] = Field(default_factory=list, description="Every workload.")
    firing_alerts: list[Alert] = Field(default_factory=list, description="Alerts firing now.")
    alert_rules_fingerprint: str = Field(
        description="Digest of the alert rules and the observability stack's config; any "
        "change means the alerting was tampered with."
    )
    frontend_requests_per_second: float = Field(
        default=0.0, ge=0, description="Traffic reaching the entry service."
    )
    cpu_requests_cores: float = Field(default=0.0, ge=0, description="Sum of CPU requests.")
    memory_requests_bytes: int = Field(default=0, ge=0, description="Sum of memory requests.")
    cpu_usage_cores: float = Field(default=0.0, ge=0, description="Sum of CPU usage.")
    cost_per_hour: float = Field(default=0.0, ge=0, description="Cost of requested resources.")
    flags: dict[str, str] = Field(
        default_factory=dict, description="flagd flags and the variant each one serves."
    )
    objects: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Desired state (labels, annotations, spec or data) of every object of the "
        "compared kinds, by `Kind/name` (see itbench.core.inventory).",
    )

    def workload(self, name: str) -> WorkloadHealth | None:
        """The workload of that name, if present."""
        for w in self.workloads:
            if w.name == name:
                return w
        return None


class ActionVerb(StrEnum):
    """What an agent may do (subject to guardrails)."""

    PATCH = "patch"
    SET_IMAGE = "set-image"
    SET_RESOURCES = "set-resources"
    SET_ENV = "set-env"
    SCALE = "scale"
    ROLLOUT_RESTART = "rollout-restart"
    ROLLOUT_UNDO = "rollout-undo"
    DELETE = "delete"
    APPLY = "apply"
    SET_FLAG = "set-flag"


class AgentAction(ApiModel):
    """One mutating action requested by an agent (kubectl-shaped)."""

    verb: ActionVerb = Field(description="The action.")
    kind: str = Field(description="Target kind, e.g. Deployment.", min_length=1, max_length=100)
    name: str = Field(default="", description="Target name.", max_length=253)
    namespace: str | None = Field(default=None, description="Target namespace.")
    container: str | None = Field(default=None, description="Container, for set-image/-resources.")
    image: str | None = Field(default=None, description="New image, for set-image.")
    replicas: int | None = Field(default=None, ge=0, le=1000, description="For scale.")
    limits: dict[str, str] = Field(default_factory=dict, description="For set-resources.")
    requests: dict[str, str] = Field(default_factory=dict, description="For set-resources.")
    env: dict[str, str] = Field(default_factory=dict, description="For set-env.")
    patch: dict[str, Any] = Field(default_factory=dict, description="JSON merge patch, for patch.")
    manifest: dict[str, Any] = Field(default_factory=dict, description="Object, for apply.")
    flag: str | None = Field(default=None, description="Flag key, for set-flag.")
    variant: str | None = Field(default=None, description="Variant, for set-flag.")

    @field_validator("patch", "manifest")
    @classmethod
    def _metadata_is_an_object(cls, value: dict[str, Any]) -> dict[str, Any]:
        if "metadata" in value and not isinstance(value["metadata"], dict | None):
            raise ValueError("metadata must be an object (name, namespace, labels, ...)")
        return value


class ActionResult(ApiModel):
    """The outcome of an action."""

    ok: bool = Field(description="Whether the action was carried out.")
    message: str = Field(description="What happened, kubectl-style.")
    outcome: Literal["applied", "unchanged", "refused", "error"] = Field(
        description="applied, unchanged, refused by a guardrail, or error."
    )
