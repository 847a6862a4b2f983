"""The agent API's own request and response bodies (reports and actions come from the core models).

Plain pydantic models without any web framework, so the SDK shares them with the gateway.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from itbench.core.models.base import ApiModel, Domain, TelemetryToggles

MAX_BODY_BYTES = 256 * 1024
"""Largest request body the gateway accepts (256 KiB); larger ones get 413."""


class TrialSummary(ApiModel):
    """A trial as the polling agent sees it."""

    trial_id: str = Field(description="Trial id, the path segment of every trial endpoint.")
    state: str = Field(description="Waiting, Ready, Started, Finished or Closed.")
    agent_name: str = Field(description="The agent the trial is for.")
    domain: Domain = Field(description="SRE, CISO or FinOps.")
    namespace: str = Field(description="The namespace the trial is scoped to.")
    deadline: datetime | None = Field(default=None, description="When the agent's time is up.")


class TrialList(ApiModel):
    """Trials visible to the caller's token."""

    items: list[TrialSummary] = Field(default_factory=list, description="The trials.")


class TriggeringAlert(ApiModel):
    """A firing alert shown in the task: names and labels, never the ground truth."""

    alertname: str = Field(description="The alert rule name.")
    labels: dict[str, str] = Field(default_factory=dict, description="The alert's labels.")
    state: str = Field(description="pending or firing.")
    active_at: datetime = Field(description="When the alert's condition first held.")


class TaskDescription(ApiModel):
    """What the agent is asked to do in one trial."""

    trial_id: str = Field(description="Trial id.")
    state: str = Field(description="The trial's protocol state.")
    domain: Domain = Field(description="SRE, CISO or FinOps.")
    namespace: str = Field(description="The namespace in scope.")
    now: datetime = Field(description="The environment's time now.")
    deadline: datetime | None = Field(default=None, description="When the agent's time is up.")
    remaining_seconds: float | None = Field(default=None, description="Seconds to the deadline.")
    alerts: list[TriggeringAlert] = Field(
        default_factory=list, description="What happened: the alerts firing now."
    )
    requirement: str = Field(default="", description="CISO: the compliance requirement to assess.")
    telemetry: TelemetryToggles = Field(description="The signals available in this trial.")
    tasks: list[Literal["diagnosis", "mitigation", "posture", "compliance"]] = Field(
        description="The reports this trial expects."
    )
    output_schemas: dict[str, Any] = Field(
        description="JSON Schemas of the reports, keyed by task."
    )
    call_costs_seconds: dict[str, float] = Field(
        description="Virtual seconds each kind of call costs (all 0 on a live cluster)."
    )
    allow_oracle: bool = Field(default=False, description="Whether /oracle answers.")


class ProtocolState(ApiModel):
    """The trial's protocol state after a STARTED or FINISHED report."""

    trial_id: str = Field(description="Trial id.")
    state: str = Field(description="The new state.")
    time: datetime = Field(description="When the report was recorded.")


class WaitRequest(ApiModel):
    """Let time pass in the trial."""

    seconds: float = Field(gt=0, le=3600, description="Seconds to wait (bounded by the deadline).")


class WaitResult(ApiModel):
    """What the wait did."""

    trial_id: str = Field(description="Trial id.")
    waited_seconds: float = Field(description="Seconds that actually passed.")
    now: datetime = Field(description="The environment's time after the wait.")
    remaining_seconds: float | None = Field(default=None, description="Seconds to the deadline.")
    firing_alerts: int = Field(description="How many alerts are firing now.")


class SubmissionReceipt(ApiModel):
    """An accepted report."""

    trial_id: str = Field(description="Trial id.")
    report: Literal["diagnosis", "mitigation", "posture", "compliance"] = Field(
        description="Which report."
    )
    accepted_at: datetime = Field(description="When it was accepted (environment time).")


class KubectlGet(ApiModel):
    """Objects of one kind, as JSON and as `kubectl get` prints them."""

    kind: str = Field(description="The canonical kind.")
    namespace: str = Field(description="The namespace read.")
    items: list[dict[str, Any]] = Field(default_factory=list, description="The objects.")
    text: str = Field(description="The `kubectl get` table.")


class KubectlDescribe(ApiModel):
    """One object with its events, as JSON and as `kubectl describe` prints it."""

    kind: str = Field(description="The canonical kind.")
    name: str = Field(description="The object's name.")
    object: dict[str, Any] = Field(description="The object.")
    events: list[dict[str, Any]] = Field(default_factory=list, description="Its events.")
    text: str = Field(description="The `kubectl describe` text.")


class PodLogs(ApiModel):
    """The last log lines of a pod."""

    pod: str = Field(description="Pod name.")
    lines: list[str] = Field(default_factory=list, description="Log lines, oldest first.")
    text: str = Field(description="The lines joined, as `kubectl logs` prints them.")


class EventList(ApiModel):
    """Kubernetes events in the trial's namespace."""

    items: list[dict[str, Any]] = Field(default_factory=list, description="The events.")
    text: str = Field(description="The `kubectl get events` table.")


class TopologyView(ApiModel):
    """The system topology: entities and typed edges (objects and service calls)."""

    nodes: list[dict[str, Any]] = Field(default_factory=list, description="Entities.")
    edges: list[dict[str, Any]] = Field(default_factory=list, description="Typed edges.")


class HostFile(ApiModel):
    """One file of the trial's RHEL9 host (CISO)."""

    path: str = Field(description="Absolute path.")
    mode: str = Field(description="Permission bits, octal (e.g. 0644).")
    owner: str = Field(description="Owning user.")
    group: str = Field(description="Owning group.")
    content: str | None = Field(default=None, description="The text (only when one file is read).")


class HostFiles(ApiModel):
    """Files of the trial's RHEL9 host: every one (without content) or the one asked for."""

    host: str = Field(description="The host's name.")
    files: list[HostFile] = Field(default_factory=list, description="The files.")


class HostCommand(ApiModel):
    """A read-only command for the trial's RHEL9 host (sshd -T, systemctl is-enabled, rpm -q,
    sysctl, getenforce, sestatus, auditctl -l, modprobe -n -v, lsmod, findmnt, ...)."""

    argv: list[str] = Field(
        min_length=1, max_length=64, description="The command and its arguments."
    )


class HostAnswer(ApiModel):
    """What a host command printed; a command that would change the host is refused (77)."""

    argv: list[str] = Field(description="The command run.")
    stdout: str = Field(description="Its standard output.")
    stderr: str = Field(description="Its standard error.")
    status: int = Field(description="Its exit status.")


class CollectionRun(ApiModel):
    """An evidence collection tried in the sandbox against the trial's environment."""

    ok: bool = Field(description="It ran, wrote nothing, reached no network and left evidence.")
    problem: str = Field(default="", description="Why not, when not ok.")
    exit_code: int | None = Field(default=None, description="Its exit status (None: stopped).")
    evidence_bytes: int = Field(default=0, description="Size of the evidence.")
    evidence: Any = Field(default=None, description="The evidence (when at most 64 KiB).")
    evidence_truncated: bool = Field(default=False, description="The evidence was too large.")
    stdout: str = Field(default="", description="The end of its stdout.")
    stderr: str = Field(default="", description="The end of its stderr.")
