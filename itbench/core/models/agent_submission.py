"""The AgentSubmission kind: an agent and how it runs."""

from __future__ import annotations

import re
from decimal import Decimal
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from itbench.core.models.base import (
    AgentLevel,
    ApiModel,
    Condition,
    Domain,
    ObjectMeta,
)


def _image_reference_pattern() -> str:
    # The reference grammar of distribution/reference (the library container runtimes parse
    # image names with): name [":" tag] ["@" digest], written out in ASCII classes so that Go's
    # RE2 (the API server's `pattern`) and Python's re read it alike.
    alnum = "[a-z0-9]+"
    separator = "(?:[._]|__|[-]+)"
    component = f"{alnum}(?:{separator}{alnum})*"
    remote = f"{component}(?:/{component})*"
    label = "(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
    host = rf"(?:{label}(?:\.{label})*|\[[a-fA-F0-9:]+\])"
    domain = f"{host}(?::[0-9]+)?"
    tag = "[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
    digest = "[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
    return f"^(?:{domain}/)?{remote}(?::{tag})?(?:@{digest})?$"


IMAGE_REFERENCE = _image_reference_pattern()
"""An image reference: `[registry[:port]/]path[:tag][@digest]` (distribution/reference)."""
IMAGE_REFERENCE_MAX = 512
"""Longest image reference accepted (a 255-character name, a tag and a sha512 digest fit)."""

_NUMBER = r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
QUANTITY = rf"^\+?{_NUMBER}(?:[KMGTPE]i|[numkMGTPE]|[eE][+-]?{_NUMBER})?$"
"""A non-negative Kubernetes quantity (the resource.Quantity grammar without a minus sign)."""
QUANTITY_MAX = 64
"""Longest quantity text accepted."""

_IMAGE_RE = re.compile(IMAGE_REFERENCE)
_QUANTITY_RE = re.compile(QUANTITY)
_SUFFIXES = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    **{f"{p}i": Decimal(1024) ** (i + 1) for i, p in enumerate("KMGTPE")},
}


def _image(value: str) -> str:
    if not _IMAGE_RE.fullmatch(value):
        raise ValueError(
            "not an image reference: expected [registry[:port]/]path[:tag][@digest] with a "
            "lower-case path, e.g. ghcr.io/org/agent:1.0"
        )
    return value


def _quantity(value: str) -> str:
    if not _QUANTITY_RE.fullmatch(value):
        raise ValueError(
            "not a Kubernetes quantity: expected a non-negative number with an optional "
            "suffix (m, k, M, G, Ki, Mi, Gi, ...), e.g. 500m or 1Gi"
        )
    return value


def quantity_value(text: str) -> Decimal:
    """The value of a quantity that matches `QUANTITY` (e.g. "500m" -> 0.5, "1Ki" -> 1024)."""
    text = text.lstrip("+")
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if suffix and text.endswith(suffix) and not text[: -len(suffix)].endswith(("e", "E")):
            return Decimal(text[: -len(suffix)]) * _SUFFIXES[suffix]
    return Decimal(text)


ImageReference = Annotated[
    str,
    Field(
        min_length=1, max_length=IMAGE_REFERENCE_MAX, json_schema_extra={"pattern": IMAGE_REFERENCE}
    ),
    AfterValidator(_image),
]
Quantity = Annotated[
    str,
    Field(min_length=1, max_length=QUANTITY_MAX, json_schema_extra={"pattern": QUANTITY}),
    AfterValidator(_quantity),
]


class EnvVar(ApiModel):
    """An environment variable for the agent container."""

    name: str = Field(description="Variable name.", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    value: str = Field(default="", description="Variable value.")


class ResourceList(ApiModel):
    """CPU and memory quantities."""

    cpu: Quantity | None = Field(default=None, description="CPU quantity, e.g. 500m.")
    memory: Quantity | None = Field(default=None, description="Memory quantity, e.g. 1Gi.")


class ResourceRequirements(ApiModel):
    """Requests and limits for the agent container."""

    requests: ResourceList = Field(default_factory=ResourceList, description="Requests.")
    limits: ResourceList = Field(default_factory=ResourceList, description="Limits.")

    @model_validator(mode="after")
    def _requests_within_limits(self) -> ResourceRequirements:
        # Pod validation refuses a request above its limit; say so here, not at Job creation.
        for name in ("cpu", "memory"):
            request, limit = getattr(self.requests, name), getattr(self.limits, name)
            if (
                request is not None
                and limit is not None
                and quantity_value(request) > quantity_value(limit)
            ):
                raise ValueError(f"requests.{name}: {request} is more than limits.{name} ({limit})")
        return self


class SecretKeyReference(ApiModel):
    """A Secret in the submission's namespace holding model credentials."""

    name: str = Field(description="Secret name.", min_length=1)


class ImageRuntime(ApiModel):
    """Run the agent as a container image in a per-trial Job."""

    image: ImageReference = Field(
        description="Container image reference, [registry[:port]/]path[:tag][@digest] "
        "(the distribution/reference grammar)."
    )
    command: list[str] = Field(default_factory=list, description="Entrypoint override.")
    args: list[str] = Field(default_factory=list, description="Arguments.")
    env: list[EnvVar] = Field(default_factory=list, description="Extra environment variables.")
    resources: ResourceRequirements = Field(
        default_factory=ResourceRequirements, description="Container resources."
    )
    credentials_secret_ref: SecretKeyReference | None = Field(
        default=None,
        description="Secret whose keys are exposed as environment variables (model credentials).",
    )


class CommandRuntime(ApiModel):
    """Run the agent as a command next to the operator, one process per trial (simulator trials):
    it gets ITBENCH_GATEWAY_URL (the gateway on loopback), ITBENCH_TRIAL and ITBENCH_TOKEN."""

    command: list[str] = Field(
        min_length=1,
        description="The program and its arguments, run without a shell, e.g. "
        "[python, -m, agents.crewai_sre].",
    )
    env: list[EnvVar] = Field(
        default_factory=list,
        description="Extra environment variables (agent arguments as ITBENCH_AGENT__<NAME>).",
    )
    credentials_secret_ref: SecretKeyReference | None = Field(
        default=None,
        description="Secret whose keys are passed as environment variables (model credentials).",
    )
    wall_seconds: int = Field(
        default=1800,
        ge=1,
        le=86400,
        description="Real seconds the command may take per trial before it is stopped.",
    )


class ExternalRuntime(ApiModel):
    """The agent runs elsewhere and polls the agent API for ready trials."""

    poll_interval_seconds: int = Field(
        default=5, ge=1, le=300, description="How often the agent is expected to poll."
    )


class BuiltinAgent(StrEnum):
    """Agents that ship with ITBench and run inside the platform."""

    ORACLE = "oracle"
    NULL = "null"
    RANDOM = "random"
    HEURISTIC_SRE = "heuristic-sre"
    HEURISTIC_FINOPS = "heuristic-finops"


class BuiltinRuntime(ApiModel):
    """A baseline agent that ships with ITBench, run in-process against the agent API."""

    name: BuiltinAgent = Field(description="Which built-in agent.")


class AgentRuntime(ApiModel):
    """How the agent runs: exactly one of image, external, builtin or command."""

    image: ImageRuntime | None = Field(default=None, description="Container image agent.")
    external: ExternalRuntime | None = Field(default=None, description="External polling agent.")
    builtin: BuiltinRuntime | None = Field(default=None, description="Built-in baseline agent.")
    command: CommandRuntime | None = Field(
        default=None, description="Command agent, one process per simulator trial."
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> AgentRuntime:
        names = ("image", "external", "builtin", "command")
        chosen = [n for n in names if getattr(self, n) is not None]
        if len(chosen) != 1:
            raise ValueError(
                "runtime: set exactly one of image, external, builtin or command "
                f"(got {', '.join(chosen) or 'none'})"
            )
        return self

    def kind(self) -> Literal["image", "external", "builtin", "command"]:
        """Which runtime is set."""
        if self.image is not None:
            return "image"
        if self.external is not None:
            return "external"
        if self.command is not None:
            return "command"
        return "builtin"


class AgentSubmissionSpec(ApiModel):
    """What the agent is and how it runs."""

    agent_name: str = Field(description="Display name of the agent.", min_length=1, max_length=128)
    type: Domain = Field(description="Persona the agent plays: SRE, CISO or FinOps.")
    level: AgentLevel = Field(
        default=AgentLevel.EXPERT,
        description="Beginner, Intermediate or Expert: takes scenarios up to Easy, Medium or Hard.",
    )
    scenario_classes: list[str] = Field(
        default_factory=list,
        description="Scenario classes the agent takes (empty means all of its type).",
    )
    runtime: AgentRuntime = Field(description="How the agent runs.")


class RunRecord(ApiModel):
    """A compact record of one BenchmarkRun of this agent."""

    run: str = Field(description="BenchmarkRun name.")
    phase: str = Field(description="The run's phase.")
    diagnosis_pass_at_1: float | None = Field(
        default=None, description="Diagnosis pass@1 (of the agent's persona)."
    )
    mitigation_pass_at_1: float | None = Field(
        default=None, description="Mitigation pass@1 (of the agent's persona)."
    )


class AgentSubmissionPhase(StrEnum):
    """Lifecycle of an AgentSubmission."""

    PENDING = "Pending"
    READY = "Ready"
    INVALID = "Invalid"


class AgentSubmissionStatus(ApiModel):
    """Observed state of an AgentSubmission."""

    phase: AgentSubmissionPhase = Field(
        default=AgentSubmissionPhase.PENDING, description="Pending, Ready or Invalid."
    )
    ready: bool = Field(default=False, description="Whether runs may use this agent.")
    last_runs: list[RunRecord] = Field(
        default_factory=list, description="The most recent runs (newest first, at most 10)."
    )
    best_diagnosis_pass_at_1: float | None = Field(
        default=None, description="Best diagnosis pass@1 over its runs (SRE or FinOps)."
    )
    best_mitigation_pass_at_1: float | None = Field(
        default=None, description="Best mitigation pass@1 over its runs (SRE or FinOps)."
    )
    observed_generation: int | None = Field(default=None, description="Last reconciled generation.")
    conditions: list[Condition] = Field(default_factory=list, description="Standard conditions.")


class AgentSubmission(ApiModel):
    """An agent submitted for benchmarking (namespaced)."""

    api_version: Literal["itbench.io/v1alpha1"] = Field(
        default="itbench.io/v1alpha1", description="API version."
    )
    kind: Literal["AgentSubmission"] = Field(default="AgentSubmission", description="Kind.")
    metadata: ObjectMeta = Field(description="Standard object metadata.")
    spec: AgentSubmissionSpec = Field(description="The agent.")
    status: AgentSubmissionStatus | None = Field(default=None, description="Observed state.")
