"""What agents submit through the agent API: diagnosis, mitigation, posture and FinOps reports."""

from __future__ import annotations

from pydantic import Field

from itbench.core.models.base import ApiModel
from itbench.core.models.scenario import EntityKind, FaultCategory, PostureResult

MAX_REPORT_ENTITIES = 200
MAX_TEXT = 20_000


class PredictedEntity(ApiModel):
    """An entity the agent names, optionally as a root cause."""

    kind: EntityKind = Field(description="Kind of the entity, e.g. Deployment, Pod, Service.")
    name: str = Field(description="Name of the entity.", min_length=1, max_length=253)
    root_cause: bool = Field(default=False, description="The agent believes this is a root cause.")
    condition: str = Field(
        default="", max_length=1000, description="The fault condition the agent sees here."
    )
    category: FaultCategory | None = Field(
        default=None,
        description="For a root cause: what is wrong here, from the closed list (a root cause "
        "counts only with the right category).",
    )

    def ref(self) -> str:
        """The entity as `Kind/name`."""
        return f"{self.kind.value}/{self.name}"


class PredictedEdge(ApiModel):
    """One step of the propagation chain as the agent sees it (entities as `Kind/name`)."""

    source: str = Field(description="Source entity, `Kind/name`.", min_length=3, max_length=300)
    target: str = Field(description="Target entity, `Kind/name`.", min_length=3, max_length=300)
    condition: str = Field(default="", max_length=1000, description="Condition at the source.")
    effect: str = Field(default="", max_length=1000, description="Effect at the target.")


class DiagnosisReport(ApiModel):
    """The SRE (or FinOps) diagnosis: entities, root causes and the propagation chain."""

    entities: list[PredictedEntity] = Field(
        default_factory=list,
        max_length=MAX_REPORT_ENTITIES,
        description="Entities involved; flag root causes with rootCause: true.",
    )
    propagation_chain: list[PredictedEdge] = Field(
        default_factory=list,
        max_length=MAX_REPORT_ENTITIES,
        description="The fault propagation chain, root cause first.",
    )
    reasoning: str = Field(default="", max_length=MAX_TEXT, description="Free-text reasoning.")


class MitigationReport(ApiModel):
    """What the agent did to mitigate. Claims are recorded, never trusted for scoring."""

    actions: list[str] = Field(
        default_factory=list, max_length=100, description="Actions taken, in words."
    )
    resolved: bool = Field(default=False, description="Whether the agent believes it resolved it.")
    reasoning: str = Field(default="", max_length=MAX_TEXT, description="Free-text reasoning.")


class ControlAssessment(ApiModel):
    """The CISO agent's assessment of one control on one target."""

    control_id: str = Field(description="Control id.", min_length=1, max_length=200)
    target: str = Field(description="Assessed target (`Kind/name` or host).", max_length=300)
    result: PostureResult = Field(description="pass or fail.")
    evidence: str = Field(default="", max_length=MAX_TEXT, description="Collected evidence.")


class PostureReport(ApiModel):
    """The CISO posture assessment."""

    assessments: list[ControlAssessment] = Field(
        default_factory=list, max_length=1000, description="One entry per control and target."
    )
    reasoning: str = Field(default="", max_length=MAX_TEXT, description="Free-text reasoning.")
