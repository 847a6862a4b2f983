"""What the platform records about an agent: who it is (AgentInfo), what it did step by step as its
model saw it (AgentStep) and what its model calls cost (ModelUsage, AgentUsage).
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from pydantic import Field

from itbench.core.models.base import ApiModel, Domain

MAX_STEP_TEXT = 20_000
"""Longest text one trajectory step keeps (a longer one is cut, saying so)."""


class AgentRuntimeKind(StrEnum):
    """How an agent runs."""

    CALLABLE = "callable"
    COMMAND = "command"
    IMAGE = "image"
    EXTERNAL = "external"


class AgentInfo(ApiModel):
    """An agent as a run records it: enough to name it in reports and to run it again."""

    name: str = Field(
        description="The agent's name (registered name, or derived from its command).",
        pattern=r"^[a-z0-9]([a-z0-9._-]{0,62}[a-z0-9])?$",
    )
    version: str = Field(
        default="",
        max_length=200,
        description="The agent's version: its distribution's version, or a digest of its script.",
    )
    runtime: AgentRuntimeKind = Field(
        description="callable, command, image, or external (it runs elsewhere and polls)."
    )
    target: str = Field(
        min_length=1,
        max_length=4000,
        description="What runs: `module:attribute` for a callable, the command line for a "
        "command, the image reference for an image, the gateway it polls for an external one.",
    )
    registered: bool = Field(
        default=False, description="Found in the agent registry (entry points `itbench.agents`)."
    )
    args: dict[str, str] = Field(
        default_factory=dict,
        description="Arguments recorded for the agent (e.g. model, baseUrl); never credentials.",
    )
    domains: list[Domain] = Field(
        default_factory=list, description="Domains the agent takes (empty: every domain)."
    )
    wall_seconds: float = Field(
        default=120.0, gt=0, le=86_400, description="Real seconds the agent may take per trial."
    )

    def takes(self, domain: Domain) -> bool:
        """Whether the agent is benchmarked on scenarios of a domain."""
        return not self.domains or domain in self.domains


class AgentStepKind(StrEnum):
    """What one trajectory step records."""

    THOUGHT = "thought"
    TOOL_CALL = "tool-call"
    TOOL_RESULT = "tool-result"
    MODEL_CALL = "model-call"
    NOTE = "note"


class AgentStep(ApiModel):
    """One step of an agent's trajectory, as the agent reports it (one JSON line each)."""

    kind: AgentStepKind = Field(description="thought, tool-call, tool-result, model-call or note.")
    actor: str = Field(
        default="", max_length=200, description="Which part of the agent (e.g. a crew member)."
    )
    elapsed_seconds: float = Field(
        default=0.0, ge=0, description="Real seconds since the agent started."
    )
    text: str = Field(
        default="",
        max_length=MAX_STEP_TEXT + 200,
        description="The thought, the tool input, the tool result as the model saw it, or the "
        "model's answer.",
    )
    tool: str | None = Field(default=None, max_length=200, description="Tool name.")
    model: str | None = Field(default=None, max_length=300, description="Model called.")
    prompt_tokens: int | None = Field(default=None, ge=0, description="Prompt tokens.")
    completion_tokens: int | None = Field(default=None, ge=0, description="Completion tokens.")
    latency_seconds: float | None = Field(
        default=None, ge=0, description="Real seconds the model call took."
    )
    cost_usd: float | None = Field(
        default=None, ge=0, description="Estimated cost of the model call (None: unknown)."
    )
    truncated_from: int | None = Field(
        default=None,
        ge=0,
        description="Characters of the tool output before it was cut to the agent's budget.",
    )


class ModelUsage(ApiModel):
    """Model calls of one trial (or summed over many), from the agent's trajectory."""

    model_calls: int = Field(default=0, ge=0, description="Model calls.")
    prompt_tokens: int = Field(default=0, ge=0, description="Prompt tokens, summed.")
    completion_tokens: int = Field(default=0, ge=0, description="Completion tokens, summed.")
    model_seconds: float = Field(
        default=0.0, ge=0, description="Real seconds spent waiting for the model, summed."
    )
    cost_usd: float | None = Field(
        default=None,
        ge=0,
        description="Estimated cost of the priced calls; None when no call was priced (it is "
        "unknown, not zero: see unpricedCalls).",
    )
    unpriced_calls: int = Field(
        default=0, ge=0, description="Calls without a price (local or unknown models)."
    )
    tool_calls: int = Field(default=0, ge=0, description="Tool calls.")
    models: list[str] = Field(default_factory=list, description="Models called, sorted.")
    invalid_steps: int = Field(
        default=0,
        ge=0,
        description="Lines of the agent's steps file that were not valid steps and were left "
        "out (not JSON, or not an AgentStep).",
    )
    dropped_steps: int = Field(
        default=0,
        ge=0,
        description="Lines or chunks of the steps file beyond the limits (steps, bytes), left out.",
    )

    @property
    def total_tokens(self) -> int:
        """Prompt and completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    def cost_text(self) -> str:
        """The cost as a reader should see it: `$0.0123`, `unpriced` when no call had a price,
        `$0.0123 + 4 unpriced calls` when some had none, `-` without model calls."""
        if not self.model_calls and self.cost_usd is None:
            return "-"
        if self.cost_usd is None:
            return "unpriced"
        text = f"${self.cost_usd:.4f}"
        return f"{text} + {self.unpriced_calls} unpriced calls" if self.unpriced_calls else text

    def plus(self, other: ModelUsage) -> ModelUsage:
        """The sum of two usages (a cost is None only when neither side priced a call)."""
        costs = [c for c in (self.cost_usd, other.cost_usd) if c is not None]
        return ModelUsage(
            model_calls=self.model_calls + other.model_calls,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            model_seconds=self.model_seconds + other.model_seconds,
            cost_usd=sum(costs) if costs else None,
            unpriced_calls=self.unpriced_calls + other.unpriced_calls,
            tool_calls=self.tool_calls + other.tool_calls,
            models=sorted(set(self.models) | set(other.models)),
            invalid_steps=self.invalid_steps + other.invalid_steps,
            dropped_steps=self.dropped_steps + other.dropped_steps,
        )


def usage_of(steps: Iterable[AgentStep]) -> ModelUsage:
    """Sum the model calls and tool calls of a trajectory.

    Args:
        steps: The trajectory's steps.

    Returns:
        Calls, tokens, model seconds, estimated cost (priced calls only; None when none was
        priced) and models.
    """
    usage = ModelUsage()
    models: set[str] = set()
    calls = prompt = completion = unpriced = tools = 0
    seconds = cost = 0.0
    priced = False
    for step in steps:
        if step.kind == AgentStepKind.TOOL_CALL:
            tools += 1
        if step.kind != AgentStepKind.MODEL_CALL:
            continue
        calls += 1
        prompt += step.prompt_tokens or 0
        completion += step.completion_tokens or 0
        seconds += step.latency_seconds or 0.0
        if step.cost_usd is None:
            unpriced += 1
        else:
            cost += step.cost_usd
            priced = True
        if step.model:
            models.add(step.model)
    return usage.model_copy(
        update={
            "model_calls": calls,
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "model_seconds": seconds,
            "cost_usd": cost if priced else None,
            "unpriced_calls": unpriced,
            "tool_calls": tools,
            "models": sorted(models),
        }
    )


class AgentUsage(ApiModel):
    """One agent of a report: who it is and what its model calls cost over its trials."""

    agent: AgentInfo = Field(description="The agent.")
    trials: int = Field(ge=0, description="Trials of the agent in the report.")
    trials_with_trajectory: int = Field(
        ge=0, description="Trials whose agent reported a trajectory."
    )
    usage: ModelUsage = Field(description="Model calls, tokens and estimated cost, summed.")
