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

from itbench.core.faults import ObjectChange, get_fault
from itbench.core.models.base import Domain
from itbench.core.models.scenario import Scenario
from itbench.core.shop import FLAGD_CONFIGMAP, HPA_WORKLOADS, SERVICES

QUIET_WORKLOADS = frozenset(
    {"frontend", "frontend-proxy", "load-generator", "kafka", "valkey-cart", "flagd"}
)
"""Workloads a decoy never touches: the entry path, the stores and flagd, whose restart is
never quite harmless."""

SCHEDULING_KINDS = frozenset({"Node", "ResourceQuota", "LimitRange", "PriorityClass"})
"""Kinds through which a fault decides where any pod may run, not only its target's."""


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


def blocks_new_pods(scenario: Scenario) -> bool:
    """Whether a fault of the scenario can keep any new pod from running (it cordons a node,
    sets a quota, or adds priorities), so that a rollout or scale-up is no longer benign."""
    namespace = scenario.spec.environment.namespace
    for fault in scenario.spec.faults:
        try:
            changes = get_fault(fault.id).changes(fault.args, namespace)
        except (LookupError, ValueError):
            continue  # a bad fault fails the trial at injection
        if any(c.kind in SCHEDULING_KINDS for c in changes):
            return True
    return False


def _owner_note(workload: str, namespace: str, n: int) -> ObjectChange:
    team = ("payments-team", "storefront-team", "platform-team", "data-team")[n % 4]
    return _annotate("Deployment", workload, namespace, "example.com/owner", team)


def _routine(workload: str, namespace: str, n: int, quiet: bool) -> tuple[str, ObjectChange]:
    """A routine change of an uninvolved workload: a rollout, or where new pods may not run,
    an edit of its annotations (the rollout would break it)."""
    if quiet:
        return (
            f"{workload}'s owner annotation edited",
            _owner_note(workload, namespace, n),
        )
    return (
        f"a routine rollout of {workload} (resource attributes changed)",
        _rollout(workload, namespace, n),
    )


def decoys_for(scenario: Scenario, seed: int) -> list[Decoy]:
    """The benign changes of one trial, drawn from its seed (none in CISO scenarios).

    Two to four changes: a rollout of an uninvolved workload always; then, each with some
    chance, a second rollout, a scale-up of an uninvolved workload (not in FinOps scenarios,
    whose cost it would change) and an edit of the flagd ConfigMap's annotations. Where a fault
    can keep new pods from running (`blocks_new_pods`), the rollouts become edits of the
    workloads' annotations and nothing is scaled: a decoy never causes a symptom.

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
    quiet = blocks_new_pods(scenario)
    out: list[Decoy] = []
    first = picked[0]
    description, change = _routine(first, namespace, rng.randint(2, 9), quiet)
    out.append(
        Decoy(
            kind="Deployment",
            name=first,
            description=description,
            changes=(change,),
            before_fault=rng.random() < 0.5,
        )
    )
    if len(picked) > 1 and rng.random() < 0.6:
        second = picked[1]
        description, change = _routine(second, namespace, rng.randint(2, 9), quiet)
        out.append(
            Decoy(
                kind="Deployment",
                name=second,
                description=description,
                changes=(change,),
                before_fault=rng.random() < 0.5,
            )
        )
    scalable = [w for w in picked[1:] if w not in autoscaled]
    if scalable and scenario.spec.domain != Domain.FINOPS and not quiet and rng.random() < 0.5:
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
