"""A lived-in past for a freshly installed twin, drawn from a seed.

A real shop has history: Deployments at varied revisions with earlier ReplicaSets kept for
rollback, routine restarts, NetworkPolicies the team wrote, flags that were rolled out and paused.
Without it "what changed" names the fault. Everything here is healthy and stays healthy: no
earlier revision, policy or flag causes a symptom. The workloads and flags a scenario's faults
act on are left alone where history could mask the fault (a policy that allowed the port a fault
blocks, a paused flag that the fault switches on).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from dataclasses import dataclass

from itbench.core.faults import ObjectChange
from itbench.core.shop import FLAGD_CONFIG_KEY, FLAGD_CONFIGMAP, SERVICE_BY_NAME
from itbench.environments.sim.cluster import Cluster, rfc3339
from itbench.environments.sim.objects import (
    COMPONENT_LABEL,
    Obj,
    clone,
    template_hash,
)
from itbench.environments.sim.registry import DEMO_RELEASES as KNOWN_DEMO_VERSIONS
from itbench.environments.sim.registry import DEMO_REPOSITORY
from itbench.stack import demo_version

DEMO_VERSION = demo_version()

DAY = 86400.0
REVISION_WEIGHTS = ((1, 30), (2, 30), (3, 25), (4, 15))
"""How many revisions a Deployment has lived through, and how often."""
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"


@dataclass(frozen=True)
class Protected:
    """What history must not touch, because it would mask or mimic a scenario's fault.

    Attributes:
        workloads: Workloads whose ingress a fault blocks (an allowing policy would undo it).
        flags: Flags a fault switches (a paused rollout of the same flag would hide it).
    """

    workloads: frozenset[str] = frozenset()
    flags: frozenset[str] = frozenset()


def _older_versions() -> list[str]:
    return [v for v in KNOWN_DEMO_VERSIONS if v < DEMO_VERSION]


def _weighted(rng: random.Random, table: Iterable[tuple[int, int]]) -> int:
    items = list(table)
    return rng.choices([v for v, _ in items], weights=[w for _, w in items])[0]


def _earlier_template(template: Obj, rng: random.Random, t: float, step: int) -> Obj:
    """The pod template a Deployment ran before its latest rollout."""
    older = clone(template)
    spec = older.setdefault("spec", {})
    containers = spec.get("containers") or []
    if not containers:
        return older
    main = containers[0]
    image = str(main.get("image", ""))
    choices = ["restart", "env"]
    versions = _older_versions()
    if image.startswith(f"{DEMO_REPOSITORY}:{DEMO_VERSION}-") and versions:
        choices.append("image")
    kind = rng.choice(choices)
    meta = older.setdefault("metadata", {})
    if kind == "image":
        version = versions[-1 - min(step, len(versions) - 1)]
        main["image"] = image.replace(f":{DEMO_VERSION}-", f":{version}-", 1)
    elif kind == "env":
        env = [e for e in main.get("env") or [] if e.get("name") != "OTEL_RESOURCE_ATTRIBUTES"]
        env.append(
            {
                "name": "OTEL_RESOURCE_ATTRIBUTES",
                "value": f"service.namespace=opentelemetry-demo,deployment.revision={step}",
            }
        )
        main["env"] = env
    else:
        meta.setdefault("annotations", {})[RESTARTED_AT] = rfc3339(t)
    return older


def _history_of(cluster: Cluster, d: Obj, rng: random.Random, installed: float) -> None:
    revisions = _weighted(rng, REVISION_WEIGHTS)
    if revisions <= 1:
        return
    name = d["metadata"]["name"]
    template = d["spec"].get("template") or {}
    times = sorted(
        installed + rng.uniform(0.5, 1.0) * (cluster.now - installed) * k / revisions
        for k in range(1, revisions)
    )
    current = template  # `_earlier_template` copies what it starts from
    if rng.random() < 0.5:
        # The latest rollout was a routine restart.
        current = clone(template)
        current.setdefault("metadata", {}).setdefault("annotations", {})[RESTARTED_AT] = rfc3339(
            times[-1]
        )
        d["spec"]["template"] = current
    older = current
    earlier: list[Obj] = []
    for step in range(revisions - 1, 0, -1):
        older = _earlier_template(older, rng, times[step - 1] - DAY, step)
        earlier.append(older)
    uid = d["metadata"]["uid"]
    for revision, tpl in enumerate(reversed(earlier), start=1):
        h = template_hash(tpl)
        labels = {**((tpl.get("metadata") or {}).get("labels") or {}), "pod-template-hash": h}
        # Each earlier template is a copy of its own, used for this ReplicaSet only.
        rs_tpl = tpl
        rs_tpl.setdefault("metadata", {})["labels"] = dict(labels)
        cluster.put(
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {
                    "name": f"{name}-{h}",
                    "labels": labels,
                    "annotations": {"deployment.kubernetes.io/revision": str(revision)},
                    "creationTimestamp": rfc3339(
                        installed if revision == 1 else times[revision - 2]
                    ),
                    "ownerReferences": [
                        {
                            "apiVersion": "apps/v1",
                            "kind": "Deployment",
                            "name": name,
                            "uid": uid,
                            "controller": True,
                            "blockOwnerDeletion": True,
                        }
                    ],
                },
                "spec": {
                    "replicas": 0,
                    "selector": {
                        "matchLabels": {
                            **((d["spec"].get("selector") or {}).get("matchLabels") or {}),
                            "pod-template-hash": h,
                        }
                    },
                    "template": rs_tpl,
                },
            }
        )


def _policy(service: str, ports: list[int], namespace: str) -> Obj:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": f"{service}-ingress",
            "namespace": namespace,
            "labels": {"app.kubernetes.io/part-of": "opentelemetry-demo"},
        },
        "spec": {
            "podSelector": {"matchLabels": {COMPONENT_LABEL: service}},
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "from": [
                        {"podSelector": {}},
                        {
                            "namespaceSelector": {
                                "matchLabels": {"kubernetes.io/metadata.name": "observability"}
                            }
                        },
                    ],
                    "ports": [{"protocol": "TCP", "port": p} for p in ports],
                }
            ],
        },
    }


def _paused_rollouts(cluster: Cluster, rng: random.Random, protected: frozenset[str]) -> None:
    """Switch a few flags to a non-default variant behind a rollout held at 0 %."""
    cm = cluster.get("ConfigMap", FLAGD_CONFIGMAP)
    if cm is None:
        return
    try:
        doc = json.loads(str((cm.get("data") or {}).get(FLAGD_CONFIG_KEY, "")))
    except json.JSONDecodeError:
        return
    flags = doc.get("flags") if isinstance(doc, dict) else None
    if not isinstance(flags, dict):
        return
    candidates = sorted(
        k
        for k, spec in flags.items()
        if k not in protected and isinstance(spec, dict) and len(spec.get("variants") or {}) > 1
    )
    for key in rng.sample(candidates, k=min(len(candidates), rng.randint(1, 3))):
        spec = flags[key]
        off = str(spec.get("defaultVariant", "off"))
        others = sorted(v for v in spec.get("variants") or {} if v != off)
        variant = rng.choice(others)
        spec["defaultVariant"] = variant
        spec["targeting"] = {"fractional": [[variant, 0], [off, 100]]}
    after = clone(cm)
    after["data"][FLAGD_CONFIG_KEY] = json.dumps(doc, indent=2) + "\n"
    cluster.put(after)


def live_in(
    cluster: Cluster, rng: random.Random, protected: Protected, *, days: float = 40.0
) -> None:
    """Give the installed baseline a past: revisions, policies and paused flag rollouts.

    Call once after the baseline objects are stored and before the first reconcile (the
    controllers then create each Deployment's current ReplicaSet at the next revision).

    Args:
        cluster: The twin's store, holding the chart's objects.
        rng: The seeded source of every choice.
        protected: What must stay as the chart installs it.
        days: How long ago the shop was installed.
    """
    installed = cluster.now - days * DAY
    for d in cluster.of_kind("Deployment"):
        d["metadata"]["creationTimestamp"] = rfc3339(installed)
        _history_of(cluster, d, rng, installed)
    listening = sorted(
        s.name
        for s in SERVICE_BY_NAME.values()
        if s.port is not None and s.name not in protected.workloads
    )
    for service in rng.sample(listening, k=min(len(listening), rng.randint(2, 4))):
        spec = SERVICE_BY_NAME[service]
        ports = [p for p in [spec.port, *(p for _, p in spec.extra_ports)] if p is not None]
        cluster.put(_policy(service, ports, cluster.namespace))
    _paused_rollouts(cluster, rng, protected.flags)


def protected_by(changes: Iterable[ObjectChange]) -> Protected:
    """What history must leave alone for a scenario whose faults make these changes."""
    workloads: set[str] = set()
    flags: set[str] = set()
    for change in changes:
        if change.op == "set-flag":
            flags.add(change.flag)
        elif change.kind == "NetworkPolicy":
            selector = (change.body.get("spec") or {}).get("podSelector") or {}
            name = (selector.get("matchLabels") or {}).get(COMPONENT_LABEL)
            if name:
                workloads.add(str(name))
    return Protected(workloads=frozenset(workloads), flags=frozenset(flags))
