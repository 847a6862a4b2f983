"""A cluster's objects at their baseline, as bytes, so that after a fault is removed the platform
can say which objects differ (and repair only those).

An object's baseline form is what its owner wrote: no status, no metadata the API server owns
(`resourceVersion`, `uid`, `creationTimestamp`, `generation`, `managedFields`), no
last-applied-configuration and no `deployment.kubernetes.io/revision` (the Deployment controller
counts rollouts there). Objects that controllers make and replace (Pods, ReplicaSets, Endpoints,
EndpointSlices, Events, Leases) have no baseline: their names change with every rollout.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from itbench.environments.kube.faults import restorable

Json = dict[str, Any]
Key = tuple[str, str, str | None, str]
"""(apiVersion, kind, namespace, name) of an object."""

CONTROLLER_KINDS = frozenset({"Pod", "ReplicaSet", "Endpoints", "EndpointSlice", "Event", "Lease"})
"""Kinds whose objects controllers make and replace; they are not part of a baseline."""
CONTROLLER_ANNOTATIONS = ("deployment.kubernetes.io/revision",)
"""Annotations a controller keeps up to date on objects others own."""


def key_of(obj: Mapping[str, Any]) -> Key:
    """An object's (apiVersion, kind, namespace, name)."""
    meta = obj.get("metadata") or {}
    return (
        str(obj.get("apiVersion", "")),
        str(obj.get("kind", "")),
        meta.get("namespace") or None,
        str(meta.get("name", "")),
    )


def baseline_bytes(obj: Mapping[str, Any]) -> bytes:
    """An object's baseline form as JSON bytes (keys in the order the API server gave them)."""
    out = restorable(dict(obj))
    meta = out["metadata"]
    annotations = {
        k: v for k, v in (meta.get("annotations") or {}).items() if k not in CONTROLLER_ANNOTATIONS
    }
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    return json.dumps(out, separators=(",", ":"), ensure_ascii=False).encode()


def baseline(objects: Iterable[Mapping[str, Any]]) -> dict[Key, bytes]:
    """The baseline of objects (controllers' kinds left out)."""
    return {key_of(o): baseline_bytes(o) for o in objects if o.get("kind") not in CONTROLLER_KINDS}


def differences(before: Mapping[Key, bytes], after: Mapping[Key, bytes]) -> list[Key]:
    """Objects added, removed or changed between two baselines, sorted."""
    keys = set(before) | set(after)
    return sorted(
        (k for k in keys if before.get(k) != after.get(k)),
        key=lambda k: (k[0], k[1], k[2] or "", k[3]),
    )


def read_baseline(
    api_client: Any, namespace: str, kinds: Mapping[str, str] | None = None
) -> dict[Key, bytes]:
    """The baseline of a cluster: every object of the kinds in the namespace, and every
    cluster-scoped object of them, read through the official client's dynamic API.

    Args:
        api_client: A `kubernetes.client.ApiClient`.
        namespace: The application's namespace.
        kinds: Kind -> apiVersion to read (default: every kind the twin models but the
            controllers'); kinds the server does not serve are skipped.
    """
    from kubernetes.dynamic import DynamicClient
    from kubernetes.dynamic.exceptions import ResourceNotFoundError

    if kinds is None:
        from itbench.environments.sim.objects import KIND_INFO

        kinds = {k: v[0] for k, v in KIND_INFO.items() if k not in CONTROLLER_KINDS}
    dynamic = DynamicClient(api_client)
    objects: list[Json] = []
    for kind, api_version in sorted(kinds.items()):
        try:
            resource = dynamic.resources.get(api_version=api_version, kind=kind)
        except ResourceNotFoundError:
            continue
        listed = resource.get(namespace=namespace) if resource.namespaced else resource.get()
        for item in listed.to_dict().get("items") or []:
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
            objects.append(item)
    return baseline(objects)
