"""The desired state of an environment's objects, in one comparable shape.

Environments report it in their snapshots and the graders compare it with the baseline and with
what the agent found, over every kind the platform models: what an object is meant to be (spec,
data, labels, annotations), never what controllers report (status, revisions, resource versions).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from itbench.core.shop import FLAGD_CONFIG_KEY, FLAGD_CONFIGMAP

STATE_KINDS = (
    "Deployment",
    "StatefulSet",
    "DaemonSet",
    "Service",
    "ConfigMap",
    "Secret",
    "NetworkPolicy",
    "HorizontalPodAutoscaler",
    "PodDisruptionBudget",
    "Ingress",
    "ServiceAccount",
    "CronJob",
)
"""Kinds whose desired state is compared with the baseline."""

WORKLOAD_KINDS = frozenset({"Deployment", "StatefulSet", "DaemonSet"})

VOLATILE_ANNOTATIONS = frozenset(
    {
        "deployment.kubernetes.io/revision",
        "kubectl.kubernetes.io/last-applied-configuration",
        "autoscaling.alpha.kubernetes.io/conditions",
    }
)
"""Annotations controllers and clients write on their own; never a change of intent."""

ObjectStates = dict[str, dict[str, Any]]
"""Desired states by `Kind/name`."""


def desired_state(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The part of an object that says what it is meant to be.

    Keeps labels, annotations (without the volatile ones) and the spec, data or type; drops
    status and every server-written metadata field.
    """
    meta = obj.get("metadata") or {}
    annotations = {
        str(k): v
        for k, v in (meta.get("annotations") or {}).items()
        if k not in VOLATILE_ANNOTATIONS
    }
    out: dict[str, Any] = {"labels": dict(meta.get("labels") or {}), "annotations": annotations}
    for key in ("spec", "data", "binaryData", "stringData", "type"):
        if key in obj:
            out[key] = obj[key]
    return out


def object_states(objects: Iterable[Mapping[str, Any]]) -> ObjectStates:
    """Desired states of the objects of `STATE_KINDS`, by `Kind/name`."""
    out: ObjectStates = {}
    for obj in objects:
        kind = str(obj.get("kind", ""))
        if kind not in STATE_KINDS:
            continue
        name = str((obj.get("metadata") or {}).get("name", ""))
        out[f"{kind}/{name}"] = desired_state(obj)
    return out


def flag_specs(states: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]] | None:
    """Each flag's definition in the flagd ConfigMap, or None when the ConfigMap is gone.

    A ConfigMap whose flag file does not parse has no flags.
    """
    state = states.get(f"ConfigMap/{FLAGD_CONFIGMAP}")
    if state is None:
        return None
    text = str((state.get("data") or {}).get(FLAGD_CONFIG_KEY, ""))
    try:
        doc = json.loads(text) if text else {}
    except json.JSONDecodeError:
        return {}
    flags = doc.get("flags") if isinstance(doc, dict) else None
    if not isinstance(flags, dict):
        return {}
    return {str(k): v for k, v in flags.items() if isinstance(v, dict)}


def autoscaled(states: Mapping[str, Mapping[str, Any]]) -> frozenset[str]:
    """`Kind/name` of the workloads an HPA scales (their replica count is the HPA's)."""
    out: set[str] = set()
    for ref, state in states.items():
        if ref.startswith("HorizontalPodAutoscaler/"):
            target = (state.get("spec") or {}).get("scaleTargetRef") or {}
            if target.get("kind") and target.get("name"):
                out.add(f"{target['kind']}/{target['name']}")
    return frozenset(out)
