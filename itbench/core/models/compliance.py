"""CISO artefacts and their evaluation: what a compliance agent submits (a policy, an evidence
collection) and what the platform found when it ran them against both variants of a scenario.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field, model_validator

from itbench.core.models.base import ApiModel

MAX_ARTEFACT_CHARS = 64 * 1024
"""Largest policy, policy set or collection text an agent may submit (64 KiB each)."""


class CollectionKind(StrEnum):
    """How evidence is collected: a shell script or an Ansible playbook."""

    SCRIPT = "script"
    PLAYBOOK = "playbook"


class EvidenceCollection(ApiModel):
    """A read-only evidence collection the platform runs in its sandbox.

    The sandbox sees the environment (the scenario namespace through `kubectl`, the RHEL9
    host's files and commands), never the network, and cannot write to the environment. The
    collection writes one JSON document, the evidence, to the file named by `$ITBENCH_EVIDENCE`
    (a script may print it on stdout instead); the Rego policy reads it as `input`.
    """

    kind: CollectionKind = Field(description="script (bash) or playbook (Ansible, YAML).")
    content: str = Field(
        min_length=1,
        max_length=MAX_ARTEFACT_CHARS,
        description="The script or playbook text.",
    )


class ComplianceSubmission(ApiModel):
    """The CISO artefacts: a Kyverno or admission policy (set), or a collection with a Rego
    policy. The task says which the scenario's class takes."""

    kyverno: str = Field(
        default="",
        max_length=MAX_ARTEFACT_CHARS,
        description="YAML of one or more policies: Kyverno ValidatingPolicy, Kubernetes "
        "ValidatingAdmissionPolicy (and its binding) or Kyverno ClusterPolicy/Policy; for "
        "an update, the whole updated policy set.",
    )
    rego: str = Field(
        default="",
        max_length=MAX_ARTEFACT_CHARS,
        description="A Rego module: its package defines `violations` (the targets that do not "
        "comply) or, for a single target, `compliant` (a boolean).",
    )
    collection: EvidenceCollection | None = Field(
        default=None, description="The evidence collection the Rego policy reads."
    )
    reasoning: str = Field(default="", max_length=20_000, description="Free-text reasoning.")

    @model_validator(mode="after")
    def _something(self) -> ComplianceSubmission:
        if not self.kyverno.strip() and not self.rego.strip():
            raise ValueError("kyverno: give a policy (kyverno), or a Rego policy (rego)")
        return self


class VerdictResult(StrEnum):
    """What a policy said about one target."""

    PASS = "pass"
    FAIL = "fail"
    ERROR = "error"
    NOT_ASSESSED = "not-assessed"


class TargetVerdict(ApiModel):
    """The evaluated posture of one target."""

    target: str = Field(description="`Kind/name` of the target (or `Host/<name>`).")
    result: VerdictResult = Field(description="pass, fail, error or not-assessed.")
    detail: str = Field(default="", max_length=1000, description="Why (a message, an error).")


class VariantEvaluation(ApiModel):
    """The artefacts run against one variant of the scenario."""

    variant: str = Field(description="`trial` (the agent's environment) or `counterpart`.")
    verdicts: list[TargetVerdict] = Field(
        default_factory=list, description="One verdict per target the policy assessed."
    )
    problem: str = Field(
        default="",
        max_length=2000,
        description="Why the artefacts could not be evaluated here (empty when they were).",
    )
    evidence_bytes: int = Field(default=0, ge=0, description="Size of the collected evidence.")
    engine: str = Field(default="", description="Which engine evaluated the policy.")

    def by_target(self) -> dict[str, TargetVerdict]:
        """The verdicts keyed by target."""
        return {v.target: v for v in self.verdicts}


class ComplianceEvaluation(ApiModel):
    """The platform's evaluation of a trial's artefacts, on its variant and the counterpart."""

    submitted: bool = Field(description="Whether an accepted submission existed.")
    live_only: bool = Field(
        default=False,
        description="The policy is pattern-style Kyverno, which only a live cluster's Kyverno "
        "evaluates; in the twin it cannot be scored.",
    )
    problem: str = Field(
        default="", max_length=2000, description="Why nothing could be evaluated, if so."
    )
    platform_error: bool = Field(
        default=False,
        description="The platform (not the artefacts) failed: the sandbox or an engine is "
        "unavailable on this machine.",
    )
    untouched: list[str] = Field(
        default_factory=list,
        max_length=200,
        description="Update class: what changed that should not have (policies edited, added "
        "or removed outside the requirement).",
    )
    variants: list[VariantEvaluation] = Field(
        default_factory=list, description="The trial's variant first, then the counterpart."
    )
    evaluation_seconds: float = Field(
        default=0.0, ge=0, description="Wall-clock seconds the platform took to evaluate them."
    )

    def summary(self) -> dict[str, Any]:
        """A compact view for logs and records."""
        return {
            "submitted": self.submitted,
            "liveOnly": self.live_only,
            "problem": self.problem,
            "variants": [
                {"variant": v.variant, "problem": v.problem, "verdicts": len(v.verdicts)}
                for v in self.variants
            ],
        }
