"""Decoys: benign changes close to the injection time, so that "what changed" is not the answer.

A real incident happens while the team keeps working: a rollout of another service, a scaled
Deployment, an edited ConfigMap. Each trial gets a few such changes, drawn from its seed, on
workloads the scenario does not involve. They cause no symptom. They are recorded with the
trial's ground truth as "not a cause": naming one as a root cause fails the diagnosis, and
reverting one is a collateral change.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from itbench.core.faults import ObjectChange
from itbench.core.models.base import Domain
from itbench.core.models.scenario import Scenario
from itbench.core.shop import FLAGD_CONFIGMAP, HPA_WORKLOADS, SERVICES

QUIET_WORKLOADS = frozenset(
    {"frontend", "frontend-proxy", "load-generator", "kafka", "valkey-cart", "flagd"}
)
"""Workloads a decoy never touches: the entry path, the stores and flagd, whose restart is
never quite harmless."""


@dataclass(frozen=True)
class Decoy:
    """One benign change of a trial.

    Attributes:
        kind: Kind of the changed object.
        name: Name of the changed object.
        description: What the change is, in words (never shown to the agent).
        changes: The object changes that make it.
        before_fault: Made just before the fault is injected (else just after).
    """

    kind: str
    name: str
    description: str
    changes: tuple[ObjectChange, ...]
    before_fault: bool

    @property
    def ref(self) -> str:
        """The changed object, `Kind/name`."""
        return f"{self.kind}/{self.name}"


def involved_names(scenario: Scenario) -> frozenset[str]:
    """Every object name the scenario's faults, ground truth and mitigations mention."""
    spec = scenario.spec
    names: set[str] = set()
    for entity in spec.ground_truth.entities:
        names.add(entity.name)
        names.update(a.split("/", 1)[-1].rstrip("*").rstrip("-") for a in entity.aliases)
    for mitigation in spec.ground_truth.mitigations:
        names.update(step.name for step in mitigation.steps)
    for fault in spec.faults:
        names.update(str(v) for v in fault.args.values())
    return frozenset(names)


def _rollout(workload: str, namespace: str, n: int) -> ObjectChange:
    env = [
        {
            "name": "OTEL_RESOURCE_ATTRIBUTES",
            "value": f"service.namespace=opentelemetry-demo,deployment.revision={n}",
        }
    ]
    return ObjectChange(
        op="merge-patch",
        api_version="apps/v1",
        kind="Deployment",
        name=workload,
        namespace=namespace,
        body={"spec": {"template": {"spec": {"containers": [{"name": workload, "env": env}]}}}},
    )


def _scale(workload: str, namespace: str, replicas: int) -> ObjectChange:
    return ObjectChange(
        op="merge-patch",
        api_version="apps/v1",
        kind="Deployment",
        name=workload,
        namespace=namespace,
        body={"spec": {"replicas": replicas}},
    )


def _annotate(kind: str, name: str, namespace: str, key: str, value: str) -> ObjectChange:
    return ObjectChange(
        op="merge-patch",
        kind=kind,
        name=name,
        namespace=namespace,
        body={"metadata": {"annotations": {key: value}}},
    )


def decoys_for(scenario: Scenario, seed: int) -> list[Decoy]:
    """The benign changes of one trial, drawn from its seed (none in CISO scenarios).

    Two to four changes: a rollout of an uninvolved workload always; then, each with some
    chance, a second rollout, a scale-up of an uninvolved workload (not in FinOps scenarios,
    whose cost it would change) and an edit of the flagd ConfigMap's annotations.

    Args:
        scenario: The scenario (its involved objects are never touched).
        seed: The trial's seed.
    """
    if scenario.spec.domain == Domain.CISO:
        return []  # the compliance twin has no rollouts, scaling or flags to stir
    rng = random.Random(f"{seed}/decoys/{scenario.name}")
    namespace = scenario.spec.environment.namespace
    involved = involved_names(scenario)
    autoscaled = {w for w, *_ in HPA_WORKLOADS}
    candidates = sorted(
        s.name
        for s in SERVICES
        if s.name not in involved and s.name not in QUIET_WORKLOADS and s.port is not None
    )
    if not candidates:
        return []
    picked = rng.sample(candidates, k=min(len(candidates), 3))
    out: list[Decoy] = []
    first = picked[0]
    out.append(
        Decoy(
            kind="Deployment",
            name=first,
            description=f"a routine rollout of {first} (resource attributes changed)",
            changes=(_rollout(first, namespace, rng.randint(2, 9)),),
            before_fault=rng.random() < 0.5,
        )
    )
    if len(picked) > 1 and rng.random() < 0.6:
        second = picked[1]
        out.append(
            Decoy(
                kind="Deployment",
                name=second,
                description=f"a routine rollout of {second} (resource attributes changed)",
                changes=(_rollout(second, namespace, rng.randint(2, 9)),),
                before_fault=rng.random() < 0.5,
            )
        )
    scalable = [w for w in picked[1:] if w not in autoscaled]
    if scalable and scenario.spec.domain != Domain.FINOPS and rng.random() < 0.5:
        target = scalable[-1]
        out.append(
            Decoy(
                kind="Deployment",
                name=target,
                description=f"{target} scaled from 1 to 2 replicas ahead of expected load",
                changes=(_scale(target, namespace, 2),),
                before_fault=rng.random() < 0.5,
            )
        )
    if FLAGD_CONFIGMAP not in involved or rng.random() < 0.5:
        reviewer = rng.choice(["platform-team", "release-bot", "sre-oncall"])
        out.append(
            Decoy(
                kind="ConfigMap",
                name=FLAGD_CONFIGMAP,
                description="the flag configuration's review annotation edited",
                changes=(
                    _annotate(
                        "ConfigMap",
                        FLAGD_CONFIGMAP,
                        namespace,
                        "flags.example.com/reviewed-by",
                        reviewer,
                    ),
                ),
                before_fault=rng.random() < 0.5,
            )
        )
    return out
