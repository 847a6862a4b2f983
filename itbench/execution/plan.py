"""Planning an embedded benchmark: which agent attempts which scenario, how often, which seed."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import Field, field_validator

from itbench.core.catalog import Variants
from itbench.core.models.agent_record import AgentInfo
from itbench.core.models.agent_submission import BuiltinAgent
from itbench.core.models.base import ApiModel, LocalObjectReference, TelemetryToggles
from itbench.core.models.benchmark_run import Timeouts
from itbench.core.models.scenario import ParameterValue, Scenario, Split
from itbench.core.models.trial import TrialSpec
from itbench.core.runner.context import TrialContext
from itbench.core.variants import instance_seed
from itbench.execution.agents import builtin, from_registry

DEFAULT_AGENTS = (BuiltinAgent.HEURISTIC_SRE, BuiltinAgent.HEURISTIC_FINOPS)
"""The agents `itbench run` benchmarks when none is named."""


class TrialPlan(ApiModel):
    """One planned trial of the embedded benchmark."""

    name: str = Field(description="Trial name (unique within the run).")
    uid: str = Field(description="Trial uid; every action key starts with it.")
    run: str = Field(description="The run's name.")
    agent: AgentInfo = Field(
        description="The agent attempting it: name, version, what runs and its arguments."
    )
    scenario: Scenario = Field(description="The scenario (with ground truth).")
    attempt: int = Field(ge=0, description="Attempt index, 0-based.")
    seed: int = Field(ge=0, description="Seed of the trial's environment.")
    telemetry: TelemetryToggles = Field(
        default_factory=TelemetryToggles, description="Run-wide telemetry mask."
    )
    timeouts: Timeouts = Field(default_factory=Timeouts, description="Time limits.")
    allow_oracle: bool = Field(default=False, description="The oracle agent is allowed.")
    split: Split = Field(default=Split.DEV, description="The split the instance was drawn from.")
    parameters: dict[str, ParameterValue] = Field(
        default_factory=dict, description="The instance's parameter values (empty: plain)."
    )
    catalog_digest: str = Field(default="", description="Digest of the catalog planned from.")

    @field_validator("agent", mode="before")
    @classmethod
    def _agent_by_name(cls, value: Any) -> Any:
        # Plans written before agents were recorded name a built-in agent only.
        if isinstance(value, str):
            return from_registry(value)
        return value

    def spec(self) -> TrialSpec:
        """The Trial spec of this plan."""
        return TrialSpec(
            run_ref=LocalObjectReference(name=self.run),
            agent_ref=LocalObjectReference(name=self.agent.name),
            scenario=self.scenario.name,
            attempt=self.attempt,
            seed=self.seed,
            telemetry=self.telemetry,
            timeouts=self.timeouts,
            allow_oracle=self.allow_oracle,
        )

    def context(self, agent_name: str | None = None) -> TrialContext:
        """The state machine's view of this trial.

        Args:
            agent_name: The agent the session is published to [default: the built-in agent].
        """
        return TrialContext(
            uid=self.uid,
            name=self.name,
            spec=self.spec(),
            scenario=self.scenario,
            agent_name=agent_name or self.agent.name,
        )


def trial_seed(seed: int, scenario: str, attempt: int) -> int:
    """The environment seed of one attempt: stable, different per attempt, same for every agent.

    Args:
        seed: The run's seed.
        scenario: Scenario name.
        attempt: Attempt index.
    """
    digest = hashlib.sha256(f"{seed}/{scenario}/{attempt}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def plan_trials(
    run: str,
    scenarios: Sequence[Scenario],
    agents: Sequence[AgentInfo | BuiltinAgent],
    *,
    trials: int,
    seed: int,
    telemetry: TelemetryToggles | None = None,
    timeouts: Timeouts | None = None,
    allow_oracle: bool = False,
    variants: Mapping[str, Variants] | None = None,
    split: Split = Split.DEV,
    seed_secret: str | None = None,
    catalog_digest: str = "",
) -> list[TrialPlan]:
    """Plan `trials` attempts of every scenario in each agent's domains.

    A scenario with variants (a template) is expanded per attempt: in the dev split every
    attempt gets the instance the run's seed draws; in the test split each attempt draws its
    own from `variants.secret_seed(seed_secret, scenario, attempt)`. Every agent gets the same
    instance for the same attempt. The secret itself is never stored in a plan.

    Args:
        run: The run's name.
        scenarios: Candidate scenarios.
        agents: The agents (a built-in one by its name); each takes the scenarios of its
            domains (all when it declares none).
        trials: Attempts per scenario and agent.
        seed: The run's seed.
        telemetry: Run-wide telemetry mask.
        timeouts: Time limits.
        allow_oracle: Whether the oracle may read the ground truth.
        variants: The catalog's variants by scenario name; a scenario without them runs as
            given.
        split: dev or test.
        seed_secret: The secret of the test split.
        catalog_digest: Digest of the catalog, recorded in every plan.

    Returns:
        The plans, ordered by agent, scenario and attempt.

    Raises:
        ValueError: The test split without a seed secret, or two agents with the same name.
    """
    if split == Split.TEST and not seed_secret:
        raise ValueError("the test split needs a seed secret")
    given = [builtin(a) if isinstance(a, BuiltinAgent) else a for a in agents]
    names = [a.name for a in given]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"two agents of a run are named {', '.join(twice)}; name them apart")
    plans: list[TrialPlan] = []
    for agent in given:
        for scenario in sorted(scenarios, key=lambda s: s.name):
            if not agent.takes(scenario.spec.domain):
                continue
            for attempt in range(trials):
                name = f"{agent.name}--{scenario.name}--{attempt}"
                chosen, values = scenario, {}
                if variants is not None and scenario.name in variants:
                    draw = instance_seed(
                        split,
                        seed=seed,
                        scenario=scenario.name,
                        attempt=attempt,
                        secret=seed_secret,
                    )
                    instance = variants[scenario.name].instance(draw)
                    chosen, values = instance.scenario, dict(instance.values)
                plans.append(
                    TrialPlan(
                        name=name,
                        uid=str(
                            uuid.uuid4()
                        ),  # random: agents must not derive the scenario from it
                        run=run,
                        agent=agent,
                        scenario=chosen,
                        attempt=attempt,
                        seed=trial_seed(seed, scenario.name, attempt),
                        telemetry=telemetry or TelemetryToggles(),
                        timeouts=timeouts or Timeouts(),
                        allow_oracle=allow_oracle,
                        split=split,
                        parameters=values,
                        catalog_digest=catalog_digest,
                    )
                )
    return plans
