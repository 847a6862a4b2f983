"""The effects the runner asks its executor to carry out, as idempotent data, and the
decision one step returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field

from itbench.core.faults import ObjectChange
from itbench.core.models.base import ApiModel, TelemetryToggles
from itbench.core.models.trial import TrialStatus

# ---- actions ---------------------------------------------------------------------------------


class _Action(ApiModel):
    """What every action carries: the key that makes carrying it out twice change nothing."""

    key: str = Field(description="Idempotency key.")


class ProvisionEnvironment(_Action):
    """Bring the environment to its healthy baseline (idempotent)."""

    type: Literal["ProvisionEnvironment"] = Field(
        default="ProvisionEnvironment", description="Action type."
    )


class TakeBaseline(_Action):
    """Store the environment's snapshot as the trial's baseline (first write wins)."""

    type: Literal["TakeBaseline"] = Field(default="TakeBaseline", description="Action type.")


class InjectFault(_Action):
    """Apply one fault's changes under a key (the environment applies a key once)."""

    type: Literal["InjectFault"] = Field(default="InjectFault", description="Action type.")
    key: str = Field(description="Idempotency key: `<uid>/inject/<i>`.")
    fault_id: str = Field(description="Fault-library id.")
    changes: list[ObjectChange] = Field(description="The object changes to apply.")


class OpenSession(_Action):
    """Open the trial's gateway session (no-op when it is open)."""

    type: Literal["OpenSession"] = Field(default="OpenSession", description="Action type.")
    trial_id: str = Field(description="Session id (the trial name).")
    agent_name: str = Field(description="The agent the trial is published to.")
    telemetry: TelemetryToggles = Field(description="Signals the agent may read.")
    allow_oracle: bool = Field(description="Whether the oracle endpoint answers.")


class MarkReady(_Action):
    """Let the agent in, with its deadline (environment time)."""

    type: Literal["MarkReady"] = Field(default="MarkReady", description="Action type.")
    trial_id: str = Field(description="Session id.")
    deadline: datetime = Field(description="When the agent's time is up.")


class RecordTopology(_Action):
    """Store the application's objects and call graph as the agent finds them (first write
    wins): diagnoses are scored against the system as it was when the agent was let in."""

    type: Literal["RecordTopology"] = Field(default="RecordTopology", description="Action type.")
    kinds: list[str] = Field(description="Object kinds to record.")


class CloseSession(_Action):
    """Store the agent's output and audit trail, then revoke the session's token."""

    type: Literal["CloseSession"] = Field(default="CloseSession", description="Action type.")
    trial_id: str = Field(description="Session id.")


class CollectSample(_Action):
    """Store a snapshot of the environment under a sample key (first write wins)."""

    type: Literal["CollectSample"] = Field(default="CollectSample", description="Action type.")
    key: str = Field(description="Sample key: `<uid>/sample/<i>`.")


class RemoveFault(_Action):
    """Undo the changes injected under a key (no-op when nothing is there)."""

    type: Literal["RemoveFault"] = Field(default="RemoveFault", description="Action type.")
    key: str = Field(description="The injection key to remove.")


class ResetEnvironment(_Action):
    """Bring the environment back to its baseline, undoing the agent's changes too."""

    type: Literal["ResetEnvironment"] = Field(
        default="ResetEnvironment", description="Action type."
    )


class MarkForRebuild(_Action):
    """The environment could not be restored: take it out of service until rebuilt."""

    type: Literal["MarkForRebuild"] = Field(default="MarkForRebuild", description="Action type.")
    reason: str = Field(description="What was still different from the baseline.")


Action = Annotated[
    ProvisionEnvironment
    | TakeBaseline
    | InjectFault
    | OpenSession
    | MarkReady
    | RecordTopology
    | CloseSession
    | CollectSample
    | RemoveFault
    | ResetEnvironment
    | MarkForRebuild,
    Field(discriminator="type"),
]
"""Every effect the state machine asks for."""


@dataclass(frozen=True)
class Decision:
    """The result of one step.

    Attributes:
        status: The trial's next status (persist it after executing the actions).
        actions: Idempotent effects to carry out, in order.
        wait_seconds: How much environment time should pass before the next step
            (0: step again at once).
    """

    status: TrialStatus
    actions: list[Action] = field(default_factory=list)
    wait_seconds: float = 0.0

    @property
    def done(self) -> bool:
        """Whether the trial has reached a final phase."""
        return self.status.phase.final
