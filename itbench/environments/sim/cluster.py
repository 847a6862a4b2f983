"""The twin's control plane: objects in, ReplicaSets, Pods, Endpoints and Events out.

Deployments roll out through ReplicaSets (one per pod template, revisions kept for undo), the
ReplicaSet controller creates pods through quota admission, DaemonSets put a pod on every node
they tolerate, the scheduler places pods by selector, affinity, taints, cordons, claims and free
resources (preempting lower priorities), and the kubelet (`kubelet.py`) runs them; Chaos Mesh
(`chaosmesh.py`) acts on the pods it recorded. All of it purely from object state and the
resource demand the traffic model reports.
"""

from __future__ import annotations

import base64
import math
import random
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from itbench.environments.sim.chaosmesh import ChaosMesh
from itbench.environments.sim.kubelet import (
    IDLE,
    ContainerRuntime,
    Kubelet,
    PodDemand,
    listening_ports,
    main_container_of,
)
from itbench.environments.sim.limits import pod_quota_refusal
from itbench.environments.sim.objects import (
    KIND_INFO,
    Obj,
    address_of,
    clone,
    labels_match,
    main_container,
    parse_cpu,
    parse_memory,
    resolve_env,
    template_hash,
)

__all__ = ["Cluster", "ContainerRuntime", "PodDemand", "listening_ports"]

POD_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
HPA_TOLERANCE = 0.1
HPA_DOWNSCALE_WINDOW_SECONDS = 300.0
_QUOTA_RESOURCES = {
    "cpu": ("requests", "cpu"),
    "requests.cpu": ("requests", "cpu"),
    "memory": ("requests", "memory"),
    "requests.memory": ("requests", "memory"),
    "limits.cpu": ("limits", "cpu"),
    "limits.memory": ("limits", "memory"),
}


@dataclass
class Cluster:
    """The object store plus the controllers' private bookkeeping."""

    namespace: str
    rng: random.Random
    now: float
    objects: dict[str, dict[str, Obj]] = field(default_factory=dict)
    runtime: dict[str, ContainerRuntime] = field(default_factory=dict)
    events: list[Obj] = field(default_factory=list)
    _event_index: dict[tuple[str, str, str, str], Obj] = field(default_factory=dict)
    _serial: int = 0
    _hpa_history: dict[str, list[tuple[float, int]]] = field(default_factory=dict)
    _children: dict[str, dict[str, dict[str, Obj]]] = field(default_factory=dict)
    _hashes: dict[tuple[str, str], str] = field(default_factory=dict)
    _endpoint_signature: tuple[object, ...] = ()
    _nominated: dict[str, str] = field(default_factory=dict)
    # Sorted names of each kind's objects, and of each owner's children of a kind, kept until
    # a name comes or goes (the controllers ask for them many times per pass).
    _names: dict[str, list[str]] = field(default_factory=dict)
    _child_names: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    generation: int = 0
    """Increments on every object change; lets readers cache derived state."""
    _event_writes: int = 0
    """Increments on every Event written or repeated."""
    _settled: dict[str, tuple[object, ...] | None] = field(default_factory=dict)
    _bindings: int = 0
    """Increments whenever a pod is bound to a node (a change `generation` does not count)."""
    _free_cache: dict[str, tuple[tuple[object, ...], float, float]] = field(default_factory=dict)
    """Per node, the resources its pods leave free, with the state they were computed in: the
    scheduler asks for each pending pod, and a namespace at its pod quota has many."""
    """Per group of controllers (see `reconcile`), the inputs of its last pass when that pass
    changed nothing."""

    def __post_init__(self) -> None:
        self.kubelet = Kubelet(self)
        self.chaos = ChaosMesh(self)

    # ---- store ------------------------------------------------------------------------------
    def timestamp(self, t: float | None = None) -> str:
        """RFC 3339 text of a virtual time (default: now)."""
        return rfc3339(self.now if t is None else t)

    def _next(self) -> int:
        self._serial += 1
        return self._serial

    def get(self, kind: str, name: str) -> Obj | None:
        """One object, or None."""
        return self.objects.get(kind, {}).get(name)

    def of_kind(self, kind: str) -> list[Obj]:
        """Every object of a kind, sorted by name."""
        bucket = self.objects.get(kind)
        if not bucket:
            return []
        names = self._names.get(kind)
        if names is None or len(names) != len(bucket):
            names = sorted(bucket)
            self._names[kind] = names
        return [bucket[k] for k in names]

    def put(self, obj: Obj) -> Obj:
        """Create or replace an object, filling server-side metadata; returns the stored object."""
        kind = obj["kind"]
        meta = obj.setdefault("metadata", {})
        name = meta["name"]
        old = self.get(kind, name)
        info = KIND_INFO.get(kind)
        if info is not None:
            obj.setdefault("apiVersion", info[0])
            if info[2]:
                meta["namespace"] = self.namespace
        if old is None:
            serial = self._next()
            meta.setdefault("uid", f"00000000-0000-4000-8000-{serial:012d}")
            meta.setdefault("creationTimestamp", self.timestamp())
            meta["generation"] = 1
        else:
            old_meta = old["metadata"]
            meta["uid"] = old_meta.get("uid")
            meta["creationTimestamp"] = old_meta.get("creationTimestamp")
            changed = old.get("spec") != obj.get("spec")
            meta["generation"] = int(old_meta.get("generation", 1)) + (1 if changed else 0)
            if "status" in old and "status" not in obj:
                obj["status"] = old["status"]
        meta["resourceVersion"] = str(self._next())
        if old is not None:
            self._unindex(old)
        else:
            self._names.pop(kind, None)
        self.objects.setdefault(kind, {})[name] = obj
        for ref in meta.get("ownerReferences") or []:
            owner = str(ref.get("uid"))
            self._children.setdefault(owner, {}).setdefault(kind, {})[name] = obj
            self._child_names.pop((owner, kind), None)
        self.generation += 1
        return obj

    def delete(self, kind: str, name: str) -> Obj | None:
        """Remove an object (and, for owners, what it owns); returns it or None."""
        obj = self.objects.get(kind, {}).pop(name, None)
        if obj is None:
            return None
        self._names.pop(kind, None)
        self.generation += 1
        self._unindex(obj)
        uid = str(obj["metadata"].get("uid"))
        children = self._children.pop(uid, {})
        for child_kind in children:
            self._child_names.pop((uid, child_kind), None)
        for child_kind in sorted(children):
            for child_name in sorted(children[child_kind]):
                self.delete(child_kind, child_name)
        if kind == "Pod":
            self.runtime.pop(name, None)
        if kind == "Namespace" and name == self.namespace:
            # Namespace deletion takes everything in it along.
            for other, (_, _, namespaced) in KIND_INFO.items():
                if namespaced:
                    for child_name in sorted(self.objects.get(other, {})):
                        self.delete(other, child_name)
        if kind == "Node":
            # Pods bound to a deleted node are gone; their ReplicaSets recreate them.
            for pod in self.of_kind("Pod"):
                if pod["spec"].get("nodeName") == name:
                    self.delete("Pod", pod["metadata"]["name"])
        return obj

    def touch(self, obj: Obj) -> None:
        """Note an in-place change of a stored object (a controller edited it)."""
        obj["metadata"]["resourceVersion"] = str(self._next())
        self.generation += 1

    def event(self, obj: Obj, reason: str, message: str, kind: str = "Normal") -> None:
        """Record a Kubernetes Event (repeats bump count and lastTimestamp, as the API does)."""
        ref_kind = obj["kind"]
        ref_name = obj["metadata"]["name"]
        key = (ref_kind, ref_name, reason, message)
        self._event_writes += 1
        existing = self._event_index.get(key)
        if existing is not None:
            existing["count"] += 1
            existing["lastTimestamp"] = self.timestamp()
            return
        serial = self._next()
        ev: Obj = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{ref_name}.{serial:016x}", "namespace": self.namespace},
            "involvedObject": {
                "apiVersion": obj.get("apiVersion", "v1"),
                "kind": ref_kind,
                "name": ref_name,
                "namespace": self.namespace,
                "uid": obj["metadata"].get("uid"),
            },
            "reason": reason,
            "message": message,
            "type": kind,
            "count": 1,
            "firstTimestamp": self.timestamp(),
            "lastTimestamp": self.timestamp(),
            "source": {"component": _EVENT_SOURCE.get(ref_kind, "kubelet")},
        }
        self._event_index[key] = ev
        self.events.append(ev)

    # ---- controllers ------------------------------------------------------------------------
    def reconcile(self, demand: dict[str, PodDemand], dt: float) -> None:
        """One control-loop pass: HPAs, Deployments, ReplicaSets, the kubelet and Endpoints.

        Args:
            demand: Resource demand per pod name over the interval that just ended.
            dt: Seconds since the last pass.
        """
        self._autoscale(demand)
        # The workload controllers and the status writers read only the objects and which
        # pods are ready, never the clock: a pass over the inputs of a pass that changed
        # nothing would change nothing again, and is skipped.
        inputs = self._unsettled("workloads")
        if inputs is not None:
            for d in self.of_kind("Deployment"):
                self._rollout(d)
            for rs in self.of_kind("ReplicaSet"):
                self._replicate(rs)
            for ds in self.of_kind("DaemonSet"):
                self._daemon(ds)
            self._settle("workloads", inputs)
        self._claims()
        self.chaos.reconcile()
        for pod in sorted(self.of_kind("Pod"), key=_priority_order):
            self._kubelet(pod, demand.get(pod["metadata"]["name"], IDLE), dt)
        inputs = self._unsettled("statuses")
        if inputs is not None:
            for d in self.of_kind("Deployment"):
                self._deployment_status(d)
            for rs in self.of_kind("ReplicaSet"):
                self._replicaset_status(rs)
            self._quotas()
            self._settle("statuses", inputs)
        self._endpoints()

    def _ready_pod_names(self) -> tuple[str, ...]:
        return tuple(p["metadata"]["name"] for p in self.of_kind("Pod") if self._ready(p))

    def _controller_inputs(self) -> tuple[object, ...]:
        return (self.generation, self._event_writes, self._ready_pod_names())

    def _unsettled(self, group: str) -> tuple[object, ...] | None:
        """The inputs a group of controllers must run on, or None when a pass of it over the
        same inputs changed nothing."""
        inputs = self._controller_inputs()
        return None if self._settled.get(group) == inputs else inputs

    def _settle(self, group: str, before: tuple[object, ...]) -> None:
        """After a pass of a group over `before`: remember them when it changed nothing."""
        self._settled[group] = before if self._controller_inputs() == before else None

    def deployment_hash(self, d: Obj) -> str:
        """The pod-template-hash of a Deployment's current template (cached per version)."""
        key = (str(d["metadata"].get("uid")), str(d["metadata"].get("resourceVersion")))
        h = self._hashes.get(key)
        if h is None:
            h = template_hash(d["spec"].get("template") or {})
            self._hashes[key] = h
        return h

    def owned(self, kind: str, owner: Obj) -> list[Obj]:
        """Objects of a kind whose controller is owner, by name."""
        uid = str(owner["metadata"].get("uid"))
        bucket = self._children.get(uid, {}).get(kind)
        if not bucket:
            return []
        names = self._child_names.get((uid, kind))
        if names is None or len(names) != len(bucket):
            names = sorted(bucket)
            self._child_names[(uid, kind)] = names
        return [bucket[k] for k in names]

    def _unindex(self, obj: Obj) -> None:
        name = obj["metadata"]["name"]
        for ref in obj["metadata"].get("ownerReferences") or []:
            owner = str(ref.get("uid"))
            bucket = self._children.get(owner, {}).get(obj["kind"])
            if bucket is not None:
                bucket.pop(name, None)
                self._child_names.pop((owner, obj["kind"]), None)

    def owner_ref(self, owner: Obj) -> dict[str, Any]:
        """A controller ownerReference to an object."""
        return {
            "apiVersion": owner["apiVersion"],
            "kind": owner["kind"],
            "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }

    def _rollout(self, d: Obj) -> None:
        name = d["metadata"]["name"]
        template = d["spec"].get("template") or {}
        h = self.deployment_hash(d)
        sets = self.owned("ReplicaSet", d)
        revisions = [
            int(rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"]) for rs in sets
        ]
        top = max(revisions, default=0)
        current = next(
            (rs for rs in sets if rs["metadata"]["labels"].get("pod-template-hash") == h), None
        )
        if current is None:
            tpl = clone(template)
            tpl.setdefault("metadata", {}).setdefault("labels", {})["pod-template-hash"] = h
            current = self.put(
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "metadata": {
                        "name": f"{name}-{h}",
                        "labels": dict(tpl["metadata"]["labels"]),
                        "annotations": {"deployment.kubernetes.io/revision": str(top + 1)},
                        "ownerReferences": [self.owner_ref(d)],
                    },
                    "spec": {
                        "replicas": 0,
                        "selector": {
                            "matchLabels": {
                                **((d["spec"].get("selector") or {}).get("matchLabels") or {}),
                                "pod-template-hash": h,
                            }
                        },
                        "template": tpl,
                    },
                }
            )
            sets.append(current)
        elif int(current["metadata"]["annotations"]["deployment.kubernetes.io/revision"]) < top:
            current["metadata"]["annotations"]["deployment.kubernetes.io/revision"] = str(top + 1)
        revision = current["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
        annotations = d["metadata"].setdefault("annotations", {})
        if annotations.get("deployment.kubernetes.io/revision") != revision:
            # The Deployment controller records the revision it rolled out on the Deployment.
            annotations["deployment.kubernetes.io/revision"] = revision
        desired = int(d["spec"].get("replicas", 1))
        old = sorted(
            (rs for rs in sets if rs is not current),
            key=lambda rs: -int(rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"]),
        )
        self._scale_rs(current, desired, d)
        new_ready = sum(1 for p in self.owned("Pod", current) if self._ready(p))
        keep = max(0, desired - new_ready)
        for rs in old:
            have = int(rs["spec"].get("replicas", 0))
            target = min(have, keep)
            keep -= target
            self._scale_rs(rs, target, d)
        history = int(d["spec"].get("revisionHistoryLimit", 10))
        idle = [
            rs
            for rs in old
            if int(rs["spec"].get("replicas", 0)) == 0 and not self.owned("Pod", rs)
        ]
        for rs in idle[history:]:
            self.delete("ReplicaSet", rs["metadata"]["name"])

    def _scale_rs(self, rs: Obj, replicas: int, d: Obj) -> None:
        before = int(rs["spec"].get("replicas", 0))
        if before == replicas:
            return
        rs["spec"]["replicas"] = replicas
        rs["metadata"]["generation"] = int(rs["metadata"].get("generation", 1)) + 1
        self.generation += 1
        verb = "up" if replicas > before else "down"
        self.event(
            d,
            "ScalingReplicaSet",
            f"Scaled {verb} replica set {rs['metadata']['name']} from {before} to {replicas}",
        )

    def _replicate(self, rs: Obj) -> None:
        pods = self.owned("Pod", rs)
        want = int(rs["spec"].get("replicas", 0))
        while len(pods) < want:
            refused = self._admit(rs)
            if refused is not None:
                self.event(rs, "FailedCreate", f"Error creating: {refused}", "Warning")
                break
            pods.append(self._create_pod(rs))
        if len(pods) > want:
            # Not-ready pods go first, then the youngest, as the ReplicaSet controller does.
            order = sorted(
                pods,
                key=lambda p: (self._ready(p), -int(p["metadata"]["uid"].rsplit("-", 1)[1])),
            )
            for pod in order[: len(pods) - want]:
                self.delete("Pod", pod["metadata"]["name"])
                self.event(rs, "SuccessfulDelete", f"Deleted pod: {pod['metadata']['name']}")

    def _pod_spec(self, template: Obj) -> Obj:
        spec = clone(template.get("spec") or {})
        priority_class = spec.get("priorityClassName")
        if priority_class:
            found = self.get("PriorityClass", str(priority_class))
            spec["priority"] = int((found or {}).get("value", 0))
        return spec

    def _admit(self, owner: Obj) -> str | None:
        """Admission of a pod from an owner's template: why it is refused, or None."""
        spec = ((owner.get("spec") or {}).get("template") or {}).get("spec") or {}
        name = f"{owner['metadata']['name']}-"
        refused = pod_quota_refusal(name, len(self.objects.get("Pod", {})))
        if refused is not None:
            return refused
        priority_class = spec.get("priorityClassName")
        if priority_class and self.get("PriorityClass", str(priority_class)) is None:
            return (
                f'pods "{name}" is forbidden: no PriorityClass with name {priority_class} was found'
            )

        for quota in self.of_kind("ResourceQuota"):
            hard = (quota.get("spec") or {}).get("hard") or {}
            used = self._quota_usage(quota)
            for resource, limit_text in sorted(hard.items()):
                if resource == "pods":
                    if used.get("pods", 0.0) + 1 > float(limit_text):
                        return (
                            f'pods "{name}" is forbidden: exceeded quota: '
                            f"{quota['metadata']['name']}, requested: pods=1, used: "
                            f"pods={int(used['pods'])}, limited: pods={limit_text}"
                        )
                    continue
                if resource not in _QUOTA_RESOURCES:
                    continue
                section, res = _QUOTA_RESOURCES[resource]
                missing = [
                    str(c.get("name"))
                    for c in (spec.get("initContainers") or []) + (spec.get("containers") or [])
                    if res not in (_effective(c).get(section) or {})
                ]
                if missing:
                    return (
                        f'pods "{name}" is forbidden: failed quota: {quota["metadata"]["name"]}: '
                        f"must specify {resource} for: {','.join(missing)}"
                    )
                asked = _pod_amount(spec, section, res)
                limit = _quantity(limit_text, res)
                if used.get(resource, 0.0) + asked > limit:
                    return (
                        f'pods "{name}" is forbidden: exceeded quota: {quota["metadata"]["name"]}, '
                        f"requested: {resource}={_format(asked, res)}, used: "
                        f"{resource}={_format(used.get(resource, 0.0), res)}, limited: "
                        f"{resource}={limit_text}"
                    )
        return None

    def _quota_usage(self, quota: Obj) -> dict[str, float]:
        hard = (quota.get("spec") or {}).get("hard") or {}
        used: dict[str, float] = {"pods": float(len(self.of_kind("Pod")))}
        for resource in hard:
            if resource in _QUOTA_RESOURCES:
                section, res = _QUOTA_RESOURCES[resource]
                used[resource] = sum(
                    _pod_amount(p["spec"], section, res) for p in self.of_kind("Pod")
                )
        return used

    def _quotas(self) -> None:
        for quota in self.of_kind("ResourceQuota"):
            hard = dict((quota.get("spec") or {}).get("hard") or {})
            used = self._quota_usage(quota)
            quota["status"] = {
                "hard": hard,
                "used": {
                    k: (
                        str(int(used[k]))
                        if k == "pods"
                        else _format(used.get(k, 0.0), _QUOTA_RESOURCES.get(k, ("", "memory"))[1])
                    )
                    for k in hard
                },
            }

    def _create_pod(self, rs: Obj) -> Obj:
        suffix = "".join(self.rng.choice(POD_NAME_ALPHABET) for _ in range(5))
        name = f"{rs['metadata']['name']}-{suffix}"
        tpl = rs["spec"]["template"]
        serial = self._serial + 1
        pod = self.put(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": name,
                    "labels": dict((tpl.get("metadata") or {}).get("labels") or {}),
                    "annotations": dict((tpl.get("metadata") or {}).get("annotations") or {}),
                    "ownerReferences": [self.owner_ref(rs)],
                },
                "spec": self._pod_spec(tpl),
                "status": {
                    "phase": "Pending",
                    "podIP": f"10.244.1.{serial % 250 + 2}",
                },
            }
        )
        self.runtime[name] = ContainerRuntime()
        self.event(rs, "SuccessfulCreate", f"Created pod: {name}")
        return pod

    # ---- daemon sets and claims --------------------------------------------------------------
    def _daemon(self, ds: Obj) -> None:
        pods = self.owned("Pod", ds)
        tpl = (ds.get("spec") or {}).get("template") or {}
        tolerations = (tpl.get("spec") or {}).get("tolerations") or []
        nodes = [n for n in self.of_kind("Node") if _tolerates(n, tolerations)]
        placed = {str(p["spec"].get("nodeName", "")) for p in pods}
        for node in nodes:
            if node["metadata"]["name"] in placed:
                continue
            refused = self._admit(ds)
            if refused is not None:
                self.event(ds, "FailedCreate", f"Error creating: {refused}", "Warning")
                break
            pod = self._create_pod(ds)
            pod["spec"]["nodeName"] = node["metadata"]["name"]
            self._bindings += 1
        desired = len(nodes)
        ready = sum(1 for p in self.owned("Pod", ds) if self._ready(p))
        ds["status"] = {
            "desiredNumberScheduled": desired,
            "currentNumberScheduled": len(self.owned("Pod", ds)),
            "numberReady": ready,
            "numberAvailable": ready,
            "observedGeneration": ds["metadata"].get("generation", 1),
        }

    def _claims(self) -> None:
        classes = {c["metadata"]["name"] for c in self.of_kind("StorageClass")}
        default = next(
            (
                c["metadata"]["name"]
                for c in self.of_kind("StorageClass")
                if (c["metadata"].get("annotations") or {}).get(
                    "storageclass.kubernetes.io/is-default-class"
                )
                == "true"
            ),
            None,
        )
        for claim in self.of_kind("PersistentVolumeClaim"):
            wanted = (claim.get("spec") or {}).get("storageClassName", default)
            if wanted in classes:
                claim["status"] = {
                    "phase": "Bound",
                    "accessModes": claim["spec"].get("accessModes", []),
                }
                continue
            claim["status"] = {"phase": "Pending"}
            self.event(
                claim,
                "ProvisioningFailed",
                f'storageclass.storage.k8s.io "{wanted}" not found',
                "Warning",
            )

    # ---- scheduler and kubelet ----------------------------------------------------------------
    def pod_ready(self, pod: Obj) -> bool:
        """Whether every container of a pod is ready."""
        rt = self.runtime.get(pod["metadata"]["name"])
        return rt is not None and self.kubelet.pod_ready(rt, pod)

    def _ready(self, pod: Obj) -> bool:
        return self.pod_ready(pod)

    def _kubelet(self, pod: Obj, demand: PodDemand, dt: float) -> None:
        name = pod["metadata"]["name"]
        rt = self.runtime.get(name)
        if rt is None:
            rt = self.runtime[name] = ContainerRuntime()
        spec = pod["spec"]
        if not spec.get("nodeName"):
            node, why = self._schedule(pod)
            if node is None:
                rt.ready = False
                pod["status"]["phase"] = "Pending"
                pod["status"]["conditions"] = [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": why,
                    }
                ]
                self.event(pod, "FailedScheduling", why, "Warning")
                return
            spec["nodeName"] = node
            self._bindings += 1
            self.event(pod, "Scheduled", f"Successfully assigned {self.namespace}/{name} to {node}")
            rt.next_start = self.now
            rt.init_next = self.now
        self.kubelet.run(pod, rt, demand, dt)

    def _schedule(self, pod: Obj) -> tuple[str | None, str]:
        """The node a pod fits on, or None and the scheduler's reason."""
        spec = pod["spec"]
        nodes = self.of_kind("Node")
        total = len(nodes)
        tail = (
            f"preemption: 0/{total} nodes are available: {total} Preemption is not helpful for "
            "scheduling."
        )
        for volume in spec.get("volumes") or []:
            claim_ref = volume.get("persistentVolumeClaim")
            if not isinstance(claim_ref, dict):
                continue
            claim = self.get("PersistentVolumeClaim", str(claim_ref.get("claimName", "")))
            if claim is None:
                return (
                    None,
                    f'persistentvolumeclaim "{claim_ref.get("claimName")}" not found. {tail}',
                )
            if (claim.get("status") or {}).get("phase") != "Bound":
                return (
                    None,
                    f"0/{total} nodes are available: pod has unbound immediate "
                    f"PersistentVolumeClaims. {tail}",
                )
        reasons: Counter[str] = Counter()
        fitting: list[str] = []
        short: list[str] = []
        for node in nodes:
            reason = self._node_refuses(pod, node)
            if reason is None:
                fitting.append(node["metadata"]["name"])
            else:
                reasons[reason] += 1
                if reason.startswith("Insufficient"):
                    short.append(node["metadata"]["name"])
        if fitting:
            return fitting[0], ""
        for node_name in short:
            if self._preempt(pod, node_name):
                return node_name, ""
        detail = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items()))
        return None, f"0/{total} nodes are available: {detail}. {tail}"

    def _node_refuses(self, pod: Obj, node: Obj) -> str | None:
        spec = pod["spec"]
        if (node.get("spec") or {}).get("unschedulable"):
            return "node(s) were unschedulable"
        for taint in (node.get("spec") or {}).get("taints") or []:
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(
                {"spec": {"taints": [taint]}}, spec.get("tolerations") or []
            ):
                key, value = taint.get("key"), taint.get("value", "")
                return f"node(s) had untolerated taint {{{key}: {value}}}"
        labels = node["metadata"].get("labels") or {}
        if not labels_match(spec.get("nodeSelector") or {}, labels) or not _node_affinity(
            spec, labels
        ):
            return "node(s) didn't match Pod's node affinity/selector"
        if self._anti_affinity_blocks(pod, node["metadata"]["name"]):
            return "node(s) didn't match pod anti-affinity rules"
        free_cpu, free_mem = self._free(node)
        cpu, mem = _pod_amount(spec, "requests", "cpu"), _pod_amount(spec, "requests", "memory")
        if cpu > free_cpu:
            return "Insufficient cpu"
        if mem > free_mem:
            return "Insufficient memory"
        return None

    def _free(self, node: Obj) -> tuple[float, float]:
        name = node["metadata"]["name"]
        state = (self.generation, self._bindings, node["metadata"].get("resourceVersion"))
        cached = self._free_cache.get(name)
        if cached is not None and cached[0] == state:
            return cached[1], cached[2]
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        cpu = parse_cpu(allocatable.get("cpu", "0"))
        mem = parse_memory(allocatable.get("memory", "0"))
        for other in self.of_kind("Pod"):
            if other["spec"].get("nodeName") == name:
                cpu -= _pod_amount(other["spec"], "requests", "cpu")
                mem -= _pod_amount(other["spec"], "requests", "memory")
        self._free_cache[name] = (state, cpu, mem)
        return cpu, mem

    def _anti_affinity_blocks(self, pod: Obj, node: str) -> bool:
        terms = ((pod["spec"].get("affinity") or {}).get("podAntiAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        ) or []
        for term in terms:
            selector = term.get("labelSelector") or {}
            for other in self.of_kind("Pod"):
                if other is pod or other["spec"].get("nodeName") != node:
                    continue
                if labels_match(selector, other["metadata"].get("labels") or {}):
                    return True
        return False

    def _preempt(self, pod: Obj, node_name: str) -> bool:
        """Evict lower-priority pods from a node until the pod fits (True when it does)."""
        mine = _priority(pod)
        victims = sorted(
            (
                p
                for p in self.of_kind("Pod")
                if p["spec"].get("nodeName") == node_name and _priority(p) < mine
            ),
            key=_priority,
        )
        node = self.get("Node", node_name)
        if node is None or not victims:
            return False
        cpu = _pod_amount(pod["spec"], "requests", "cpu")
        mem = _pod_amount(pod["spec"], "requests", "memory")
        free_cpu, free_mem = self._free(node)
        chosen: list[Obj] = []
        for victim in victims:
            if free_cpu >= cpu and free_mem >= mem:
                break
            chosen.append(victim)
            free_cpu += _pod_amount(victim["spec"], "requests", "cpu")
            free_mem += _pod_amount(victim["spec"], "requests", "memory")
        if free_cpu < cpu or free_mem < mem:
            return False
        for victim in chosen:
            self.event(
                victim,
                "Preempted",
                f"Preempted by pod {pod['metadata']['uid']} on node {node_name}",
            )
            self.delete("Pod", victim["metadata"]["name"])
        return True

    # ---- what pods can reach ------------------------------------------------------------------
    def lookup(self, kind: str, name: str, key: str) -> str | None:
        """A value of a Secret (decoded) or ConfigMap, as env valueFrom reads it."""
        obj = self.get(kind, name)
        if obj is None:
            return None
        if key in (obj.get("stringData") or {}):
            return str(obj["stringData"][key])
        raw = (obj.get("data") or {}).get(key)
        if raw is None:
            return None
        if kind == "Secret":
            try:
                return base64.b64decode(str(raw)).decode()
            except (ValueError, UnicodeDecodeError):
                return str(raw)
        return str(raw)

    def environment(self, pod: Obj) -> dict[str, str]:
        """The application container's environment as its process sees it (fixed at start)."""
        rt = self.runtime.get(pod["metadata"]["name"])
        if rt is not None and rt.env:
            return rt.env
        return resolve_env(main_container_of(pod), self.lookup)

    def tcp_reachable(self, host: str, port: int, at: float | None = None) -> bool:
        """Whether a Service name and port lead to a running pod whose program listens there
        (by time `at`, when given: a program listens a few seconds after it starts)."""
        from itbench.environments.sim.kubelet import STARTUP_SECONDS

        name = host.split(".", 1)[0]
        svc = self.get("Service", name)
        if svc is None:
            return False
        target = None
        for sp in (svc.get("spec") or {}).get("ports") or []:
            if int(sp.get("port", 0)) == port:
                target = sp.get("targetPort", sp.get("port"))
        selector = (svc.get("spec") or {}).get("selector")
        if target is None or not selector:
            return False
        for dst in self.of_kind("Pod"):
            if not labels_match(selector, dst["metadata"].get("labels") or {}):
                continue
            rt = self.runtime.get(dst["metadata"]["name"])
            if rt is None or rt.state != "running":
                continue
            if at is not None and rt.started_at + STARTUP_SECONDS > at:
                continue
            if at is None and not self.pod_ready(dst):
                continue
            container = main_container(dst["spec"])
            number = target if isinstance(target, int) else _named_port(container, str(target))
            if number in listening_ports(str(container.get("image", ""))):
                return True
        return False

    def address_reachable(
        self, env: dict[str, str], var: str, protocol: str = "", at: float | None = None
    ) -> bool:
        """Whether the address in an environment variable can be connected to."""
        host, port, _ = address_of(env, var, protocol)
        return host is not None and self.tcp_reachable(host, port, at)

    def _deployment_status(self, d: Obj) -> None:
        sets = self.owned("ReplicaSet", d)
        h = self.deployment_hash(d)
        pods = [p for rs in sets for p in self.owned("Pod", rs)]
        ready = sum(1 for p in pods if self._ready(p))
        updated = sum(
            len(self.owned("Pod", rs))
            for rs in sets
            if rs["metadata"]["labels"].get("pod-template-hash") == h
        )
        desired = int(d["spec"].get("replicas", 1))
        available = ready
        complete = updated == desired and ready >= desired and len(pods) == desired
        d["status"] = {
            "observedGeneration": d["metadata"].get("generation", 1),
            "replicas": len(pods),
            "updatedReplicas": updated,
            "readyReplicas": ready,
            "availableReplicas": available,
            "unavailableReplicas": max(0, desired - available),
            "conditions": [
                {
                    "type": "Available",
                    "status": "True" if available >= max(desired - desired // 4, 0) else "False",
                    "reason": "MinimumReplicasAvailable"
                    if available >= max(desired - desired // 4, 0)
                    else "MinimumReplicasUnavailable",
                },
                {
                    "type": "Progressing",
                    "status": "True",
                    "reason": "NewReplicaSetAvailable" if complete else "ReplicaSetUpdated",
                },
            ],
        }

    def _replicaset_status(self, rs: Obj) -> None:
        pods = self.owned("Pod", rs)
        ready = sum(1 for p in pods if self._ready(p))
        rs["status"] = {
            "replicas": len(pods),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "observedGeneration": rs["metadata"].get("generation", 1),
        }

    def _endpoints(self) -> None:
        pods = self.of_kind("Pod")
        signature = (self.generation, self._ready_pod_names())
        if signature == self._endpoint_signature:
            return
        for svc in self.of_kind("Service"):
            name = svc["metadata"]["name"]
            selector = (svc.get("spec") or {}).get("selector")
            ready_addr: list[Obj] = []
            not_ready: list[Obj] = []
            if selector:
                for p in pods:
                    if labels_match(selector, p["metadata"].get("labels") or {}):
                        addr = {
                            "ip": p["status"].get("podIP"),
                            "nodeName": p["spec"].get("nodeName"),
                            "targetRef": {"kind": "Pod", "name": p["metadata"]["name"]},
                        }
                        (ready_addr if self._ready(p) else not_ready).append(addr)
            ports = [
                {"name": sp.get("name", ""), "port": _target_number(sp), "protocol": "TCP"}
                for sp in (svc.get("spec") or {}).get("ports") or []
            ]
            subset: Obj = {"ports": ports}
            if ready_addr:
                subset["addresses"] = ready_addr
            if not_ready:
                subset["notReadyAddresses"] = not_ready
            ep = {
                "apiVersion": "v1",
                "kind": "Endpoints",
                "metadata": {"name": name, "labels": dict(svc["metadata"].get("labels") or {})},
                "subsets": [subset] if (ready_addr or not_ready) else [],
            }
            old = self.get("Endpoints", name)
            if old is None or old.get("subsets") != ep["subsets"]:
                self.put(ep)
        for name in list(self.objects.get("Endpoints", {})):
            if self.get("Service", name) is None:
                self.delete("Endpoints", name)
        self._endpoint_signature = (self.generation, self._ready_pod_names())

    # ---- autoscaling ------------------------------------------------------------------------
    def _autoscale(self, demand: dict[str, PodDemand]) -> None:
        for h in self.of_kind("HorizontalPodAutoscaler"):
            spec = h.get("spec") or {}
            ref = spec.get("scaleTargetRef") or {}
            d = self.get("Deployment", str(ref.get("name", "")))
            name = h["metadata"]["name"]
            if d is None or ref.get("kind", "Deployment") != "Deployment":
                h["status"] = {"currentReplicas": 0, "desiredReplicas": 0}
                continue
            target = _cpu_target(spec)
            current = int(d["spec"].get("replicas", 1))
            if current == 0:
                # Scaling is disabled while the target is scaled to zero.
                h["status"] = {"currentReplicas": 0, "desiredReplicas": 0}
                continue
            pods = [p for rs in self.owned("ReplicaSet", d) for p in self.owned("Pod", rs)]
            ready = [p for p in pods if self._ready(p)]
            requests = sum(_cpu_request(p) for p in ready)
            used = sum(demand.get(p["metadata"]["name"], IDLE).cpu_cores for p in ready)
            minimum = int(spec.get("minReplicas", 1))
            maximum = int(spec.get("maxReplicas", minimum))
            utilization = 100.0 * used / requests if requests > 0 else None
            desired = current
            if utilization is not None and target:
                ratio = utilization / target
                if abs(ratio - 1.0) > HPA_TOLERANCE:
                    desired = math.ceil(current * ratio)
            desired = max(minimum, min(maximum, desired))
            history = self._hpa_history.setdefault(name, [])
            history.append((self.now, desired))
            history[:] = [(t, r) for t, r in history if t > self.now - HPA_DOWNSCALE_WINDOW_SECONDS]
            if desired < current:
                desired = max(r for _, r in history)
            if desired != current:
                d["spec"]["replicas"] = desired
                d["metadata"]["generation"] = int(d["metadata"].get("generation", 1)) + 1
                self.generation += 1
                why = "above" if desired > current else "below"
                self.event(
                    h,
                    "SuccessfulRescale",
                    f"New size: {desired}; reason: cpu resource utilization (percentage of "
                    f"request) {why} target",
                )
            h["status"] = {
                "currentReplicas": current,
                "desiredReplicas": desired,
                "currentMetrics": [
                    {
                        "type": "Resource",
                        "resource": {
                            "name": "cpu",
                            "current": {
                                "averageUtilization": round(utilization or 0.0),
                                "averageValue": f"{round(1000 * used / max(len(ready), 1))}m",
                            },
                        },
                    }
                ],
                "lastScaleTime": self.timestamp(),
            }


_EVENT_SOURCE = {
    "Deployment": "deployment-controller",
    "ReplicaSet": "replicaset-controller",
    "HorizontalPodAutoscaler": "horizontal-pod-autoscaler",
}


@lru_cache(maxsize=4096)
@lru_cache(maxsize=8192)
def rfc3339(t: float) -> str:
    """RFC 3339 text (second precision, UTC) of an epoch time (remembered: the controllers
    write the same few times over and over)."""
    return datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _target_number(service_port: Obj) -> int | str:
    target = service_port.get("targetPort", service_port.get("port", 0))
    if isinstance(target, int):
        return target
    text = str(target)
    return int(text) if text.isdigit() else text


def _cpu_request(pod: Obj) -> float:
    raw = ((main_container(pod["spec"]).get("resources") or {}).get("requests") or {}).get("cpu")
    try:
        return parse_cpu(raw) if raw is not None else 0.0
    except ValueError:
        return 0.0


def _cpu_target(spec: Obj) -> float | None:
    for metric in spec.get("metrics") or []:
        resource = metric.get("resource") or {}
        if metric.get("type") == "Resource" and resource.get("name") == "cpu":
            value = (resource.get("target") or {}).get("averageUtilization")
            return float(value) if value else None
    return None


def _effective(container: Obj) -> dict[str, Any]:
    resources = container.get("resources") or {}
    requests = dict(resources.get("requests") or {})
    for name, value in (resources.get("limits") or {}).items():
        requests.setdefault(name, value)
    return {"requests": requests, "limits": dict(resources.get("limits") or {})}


def _quantity(text: object, resource: str) -> float:
    try:
        return parse_cpu(str(text)) if resource == "cpu" else parse_memory(str(text))
    except ValueError:
        return 0.0


def _pod_amount(spec: Obj, section: str, resource: str) -> float:
    """A pod's request (or limit) of a resource: its containers' sum or its largest init."""
    main = 0.0
    for c in spec.get("containers") or []:
        main += _container_amount(c, section, resource)
    init: float | None = None
    for c in spec.get("initContainers") or []:
        amount = _container_amount(c, section, resource)
        if init is None or amount > init:  # as max() keeps the first of equals
            init = amount
    return max(main, 0.0 if init is None else init)


def _container_amount(container: Obj, section: str, resource: str) -> float:
    """A container's request (or limit) of a resource, as `_effective` has it: a request it
    does not set defaults to its limit."""
    resources = container.get("resources") or {}
    requests = resources.get("requests") or {}
    limits = resources.get("limits") or {}
    if section == "requests":
        raw = requests[resource] if resource in requests else limits.get(resource)
    else:
        raw = (limits if section == "limits" else {}).get(resource)
    return _quantity(raw, resource) if raw is not None else 0.0


def _format(amount: float, resource: str) -> str:
    if resource == "cpu":
        milli = round(amount * 1000)
        return f"{milli // 1000}" if milli % 1000 == 0 else f"{milli}m"
    mib = amount / 2**20
    if amount >= 2**30 and amount % 2**30 == 0:
        return f"{int(amount // 2**30)}Gi"
    return f"{round(mib)}Mi" if abs(mib - round(mib)) < 1e-6 else f"{int(amount)}"


def _tolerates(node: Obj, tolerations: list[Obj]) -> bool:
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not any(
            (t.get("operator") == "Exists" and not t.get("key"))
            or (
                t.get("key") == taint.get("key")
                and (t.get("operator") == "Exists" or t.get("value", "") == taint.get("value", ""))
                and t.get("effect") in (None, "", taint.get("effect"))
            )
            for t in tolerations
        ):
            return False
    return True


def _node_affinity(spec: Obj, labels: dict[str, str]) -> bool:
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        return True
    return any(
        labels_match({"matchExpressions": t.get("matchExpressions") or []}, labels) for t in terms
    )


def _priority(pod: Obj) -> int:
    return int(pod["spec"].get("priority", 0) or 0)


def _priority_order(pod: Obj) -> tuple[int, str]:
    # Higher priorities are scheduled first, as the scheduling queue orders them.
    return (-_priority(pod), pod["metadata"]["name"])


def _named_port(container: Obj, name: str) -> int | None:
    if name.isdigit():
        return int(name)
    for p in container.get("ports") or []:
        if p.get("name") == name:
            return int(p.get("containerPort", 0))
    return None
