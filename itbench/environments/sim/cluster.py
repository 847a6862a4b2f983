"""The twin's control plane and kubelet: objects in, ReplicaSets, Pods, Endpoints and Events out.

Deployments roll out through ReplicaSets (one per pod template, revisions kept for undo), pods
are scheduled, pull images, start, crash and back off, become ready or not, purely from object
state and the resource demand the traffic model reports.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from itbench.core.shop import NODE_ARCHITECTURE, SERVICE_BY_NAME, image_platforms, image_program
from itbench.environments.sim.objects import (
    KIND_INFO,
    Obj,
    clone,
    labels_match,
    main_container,
    parse_cpu,
    parse_memory,
    template_hash,
)

MiB = 2**20
STARTUP_SECONDS = 5.0
"""Seconds from container start until the application listens and passes readiness."""
CRASH_AFTER_SECONDS = 2.0
"""Seconds a container runs before a start-up crash (OOM at start, exec format error)."""
MAX_BACKOFF_SECONDS = 300.0
POD_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
HPA_TOLERANCE = 0.1
HPA_DOWNSCALE_WINDOW_SECONDS = 300.0


@dataclass
class ContainerRuntime:
    """What the kubelet knows about a pod's application container."""

    state: str = "waiting"
    reason: str = "ContainerCreating"
    message: str = ""
    started_at: float = 0.0
    next_start: float = 0.0
    restarts: int = 0
    last_reason: str = ""
    last_exit_code: int = 0
    last_finished_at: float = 0.0
    pulled: bool = False
    ready: bool = False
    cpu_seconds: float = 0.0
    cfs_periods: float = 0.0
    cfs_throttled: float = 0.0
    working_set: float = 0.0
    leaked: float = 0.0


@dataclass
class PodDemand:
    """Resource demand of one pod, reported by the traffic model for the last interval."""

    cpu_cores: float = 0.0
    leak_bytes_per_second: float = 0.0
    extra_memory_bytes: float = 0.0


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
    generation: int = 0
    """Increments on every object change; lets readers cache derived state."""

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
        bucket = self.objects.get(kind, {})
        return [bucket[k] for k in sorted(bucket)]

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
        self.objects.setdefault(kind, {})[name] = obj
        for ref in meta.get("ownerReferences") or []:
            owner = str(ref.get("uid"))
            self._children.setdefault(owner, {}).setdefault(kind, {})[name] = obj
        self.generation += 1
        return obj

    def delete(self, kind: str, name: str) -> Obj | None:
        """Remove an object (and, for owners, what it owns); returns it or None."""
        obj = self.objects.get(kind, {}).pop(name, None)
        if obj is None:
            return None
        self.generation += 1
        self._unindex(obj)
        uid = str(obj["metadata"].get("uid"))
        children = self._children.pop(uid, {})
        for child_kind in ("ReplicaSet", "Pod"):
            for child_name in sorted(children.get(child_kind, {})):
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

    def event(self, obj: Obj, reason: str, message: str, kind: str = "Normal") -> None:
        """Record a Kubernetes Event (repeats bump count and lastTimestamp, as the API does)."""
        ref_kind = obj["kind"]
        ref_name = obj["metadata"]["name"]
        key = (ref_kind, ref_name, reason, message)
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
        for d in self.of_kind("Deployment"):
            self._rollout(d)
        for rs in self.of_kind("ReplicaSet"):
            self._replicate(rs)
        for pod in self.of_kind("Pod"):
            self._kubelet(pod, demand.get(pod["metadata"]["name"], PodDemand()), dt)
        for d in self.of_kind("Deployment"):
            self._deployment_status(d)
        for rs in self.of_kind("ReplicaSet"):
            self._replicaset_status(rs)
        self._endpoints()

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
        bucket = self._children.get(str(owner["metadata"].get("uid")), {}).get(kind, {})
        return [bucket[k] for k in sorted(bucket)]

    def _unindex(self, obj: Obj) -> None:
        name = obj["metadata"]["name"]
        for ref in obj["metadata"].get("ownerReferences") or []:
            bucket = self._children.get(str(ref.get("uid")), {}).get(obj["kind"])
            if bucket is not None:
                bucket.pop(name, None)

    def _owner_ref(self, owner: Obj) -> dict[str, Any]:
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
                        "ownerReferences": [self._owner_ref(d)],
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
                    "ownerReferences": [self._owner_ref(rs)],
                },
                "spec": clone(tpl.get("spec") or {}),
                "status": {
                    "phase": "Pending",
                    "podIP": f"10.244.{serial // 250 % 250}.{serial % 250 + 2}",
                },
            }
        )
        self.runtime[name] = ContainerRuntime()
        self.event(rs, "SuccessfulCreate", f"Created pod: {name}")
        return pod

    # ---- kubelet ----------------------------------------------------------------------------
    def _ready(self, pod: Obj) -> bool:
        rt = self.runtime.get(pod["metadata"]["name"])
        return rt is not None and rt.ready

    def _kubelet(self, pod: Obj, demand: PodDemand, dt: float) -> None:
        name = pod["metadata"]["name"]
        rt = self.runtime.setdefault(name, ContainerRuntime())
        spec = pod["spec"]
        status = pod["status"]
        container = main_container(spec)
        cname = str(container.get("name", ""))
        start = self.now - dt
        if not spec.get("nodeName"):
            node = self._schedule(pod)
            if node is None:
                rt.ready = False
                status["phase"] = "Pending"
                status["conditions"] = [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
                ]
                self.event(
                    pod,
                    "FailedScheduling",
                    "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."
                    " preemption: 0/1 nodes are available: 1 Preemption is not helpful for "
                    "scheduling.",
                    "Warning",
                )
                return
            spec["nodeName"] = node
            self.event(pod, "Scheduled", f"Successfully assigned {self.namespace}/{name} to {node}")
            rt.next_start = self.now
        image = str(container.get("image", ""))
        if not rt.pulled:
            self.event(pod, "Pulling", f'Pulling image "{image}"')
            if image_platforms(image) is None:
                first = rt.reason not in ("ErrImagePull", "ImagePullBackOff")
                rt.state, rt.ready = "waiting", False
                rt.reason = "ErrImagePull" if first else "ImagePullBackOff"
                rt.message = (
                    f'failed to pull and unpack image "{image}": failed to resolve reference '
                    f'"{image}": {image}: not found'
                )
                self.event(
                    pod, "Failed", f'Failed to pull image "{image}": {rt.message}', "Warning"
                )
                if not first:
                    self.event(pod, "BackOff", f'Back-off pulling image "{image}"', "Normal")
                self._pod_status(pod, rt, cname, image)
                return
            rt.pulled = True
            self.event(pod, "Pulled", f'Successfully pulled image "{image}"')
            rt.next_start = max(rt.next_start, start)
        limit = self._memory_limit(container)
        cpu_limit = self._cpu_limit(container)
        base = self._base_working_set(container, image)
        arch_ok = NODE_ARCHITECTURE in (image_platforms(image) or frozenset())
        t = start
        # Walk the interval event by event: start, crash, back-off, start again.
        for _ in range(64):
            if rt.state == "waiting":
                if rt.next_start > self.now:
                    break
                t = max(t, rt.next_start)
                rt.state, rt.reason, rt.message = "running", "", ""
                rt.started_at = t
                rt.working_set = base
                rt.leaked = 0.0
                if rt.restarts == 0 and rt.last_reason == "":
                    self.event(pod, "Created", f"Created container {cname}")
                    self.event(pod, "Started", f"Started container {cname}")
            if rt.state != "running":
                break
            crash_at, reason, code = self._crash_time(rt, t, base, limit, demand, arch_ok)
            if crash_at is None or crash_at > self.now:
                break
            rt.restarts += 1
            rt.last_reason, rt.last_exit_code, rt.last_finished_at = reason, code, crash_at
            backoff = min(10.0 * 2 ** (rt.restarts - 1), MAX_BACKOFF_SECONDS)
            rt.state, rt.reason = "waiting", "CrashLoopBackOff"
            rt.message = (
                f"back-off {int(backoff)}s restarting failed container={cname} pod={name}"
                f"_{self.namespace}({pod['metadata']['uid']})"
            )
            rt.next_start = crash_at + backoff
            rt.ready = False
            rt.leaked = 0.0
            if reason == "OOMKilled":
                self.event(
                    pod,
                    "OOMKilling",
                    f"Memory cgroup out of memory: Killed process (container {cname})",
                    "Warning",
                )
            self.event(
                pod,
                "BackOff",
                f"Back-off restarting failed container {cname} in pod {name}_{self.namespace}"
                f"({pod['metadata']['uid']})",
                "Warning",
            )
            t = crash_at
        if rt.state == "running":
            up = self.now - rt.started_at
            rt.leaked += demand.leak_bytes_per_second * (self.now - t)
            rt.working_set = min(base + demand.extra_memory_bytes + rt.leaked, limit or math.inf)
            ran = min(dt, up)
            used = demand.cpu_cores if cpu_limit is None else min(demand.cpu_cores, cpu_limit)
            rt.cpu_seconds += used * ran
            periods = ran / 0.1
            rt.cfs_periods += periods
            if cpu_limit is not None and cpu_limit > 0:
                rt.cfs_throttled += periods * _throttled_share(demand.cpu_cores / cpu_limit)
            probe_ok = self._probe_ok(container, image)
            rt.ready = probe_ok and up >= STARTUP_SECONDS and not self._pod_failure(pod)
            if not probe_ok and up >= STARTUP_SECONDS:
                port = _probe_port(container)
                self.event(
                    pod,
                    "Unhealthy",
                    f"Readiness probe failed: dial tcp {pod['status'].get('podIP')}:{port}: "
                    "connect: connection refused",
                    "Warning",
                )
        self._pod_status(pod, rt, cname, image)

    def _crash_time(
        self,
        rt: ContainerRuntime,
        t: float,
        base: float,
        limit: float | None,
        demand: PodDemand,
        arch_ok: bool,
    ) -> tuple[float | None, str, int]:
        if not arch_ok:
            return max(rt.started_at + 0.5, t), "Error", 1
        need = base + demand.extra_memory_bytes
        if limit is not None and need > limit:
            return max(rt.started_at + CRASH_AFTER_SECONDS, t), "OOMKilled", 137
        if limit is not None and demand.leak_bytes_per_second > 0:
            room = max(limit - need - rt.leaked, 0.0)
            return t + room / demand.leak_bytes_per_second, "OOMKilled", 137
        return None, "", 0

    def _pod_failure(self, pod: Obj) -> bool:
        labels = pod["metadata"].get("labels") or {}
        return any(
            (c.get("spec") or {}).get("action") == "pod-failure"
            and chaos_selects(c, labels, self.namespace)
            for c in self.of_kind("PodChaos")
        )

    def _schedule(self, pod: Obj) -> str | None:
        selector = pod["spec"].get("nodeSelector") or {}
        for node in self.of_kind("Node"):
            if labels_match(selector, node["metadata"].get("labels") or {}):
                return str(node["metadata"]["name"])
        return None

    def _memory_limit(self, container: Obj) -> float | None:
        raw = ((container.get("resources") or {}).get("limits") or {}).get("memory")
        try:
            return parse_memory(raw) if raw is not None else None
        except ValueError:
            return None

    def _cpu_limit(self, container: Obj) -> float | None:
        raw = ((container.get("resources") or {}).get("limits") or {}).get("cpu")
        try:
            return parse_cpu(raw) if raw is not None else None
        except ValueError:
            return None

    def _base_working_set(self, container: Obj, image: str) -> float:
        program = image_program(image)
        spec = SERVICE_BY_NAME.get(program or "")
        return float(spec.working_set_mi * MiB) if spec else 4.0 * MiB

    def _probe_ok(self, container: Obj, image: str) -> bool:
        probe = container.get("readinessProbe")
        if not probe:
            return True
        port = _probe_port(container)
        if port is None:
            return "exec" in probe
        return port in listening_ports(image)

    def _pod_status(self, pod: Obj, rt: ContainerRuntime, cname: str, image: str) -> None:
        status = pod["status"]
        started = rt.restarts > 0 or rt.state == "running"
        status["phase"] = "Running" if started else "Pending"
        state: Obj
        if rt.state == "running":
            state = {"running": {"startedAt": self.timestamp(rt.started_at)}}
        else:
            state = {"waiting": {"reason": rt.reason, "message": rt.message}}
        cs: Obj = {
            "name": cname,
            "image": image,
            "ready": rt.ready,
            "started": rt.state == "running",
            "restartCount": rt.restarts,
            "state": state,
        }
        if rt.last_reason:
            cs["lastState"] = {
                "terminated": {
                    "reason": rt.last_reason,
                    "exitCode": rt.last_exit_code,
                    "finishedAt": self.timestamp(rt.last_finished_at),
                }
            }
        status["containerStatuses"] = [cs]
        ready = "True" if rt.ready else "False"
        status["conditions"] = [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Initialized", "status": "True"},
            {"type": "ContainersReady", "status": ready},
            {"type": "Ready", "status": ready},
        ]
        status["hostIP"] = "172.18.0.2"

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
        signature = (
            self.generation,
            tuple(p["metadata"]["name"] for p in pods if self._ready(p)),
        )
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
        self._endpoint_signature = (
            self.generation,
            tuple(p["metadata"]["name"] for p in self.of_kind("Pod") if self._ready(p)),
        )

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
            used = sum(demand.get(p["metadata"]["name"], PodDemand()).cpu_cores for p in ready)
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
def rfc3339(t: float) -> str:
    """RFC 3339 text (second precision, UTC) of an epoch time."""
    return datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _throttled_share(utilization: float) -> float:
    """Share of CFS periods that hit the quota at a demand/limit ratio (bursty traffic)."""
    return max(0.0, min(1.0, (utilization - 0.5) * 2.0))


def _probe_port(container: Obj) -> int | None:
    probe = container.get("readinessProbe") or {}
    for handler in ("tcpSocket", "httpGet", "grpc"):
        if handler in probe:
            port = (probe[handler] or {}).get("port")
            if isinstance(port, int):
                return port
            for p in container.get("ports") or []:
                if p.get("name") == port:
                    return int(p.get("containerPort", 0))
            return -1
    return None


def listening_ports(image: str) -> set[int]:
    """Ports the program in an image listens on."""
    program = image_program(image)
    spec = SERVICE_BY_NAME.get(program or "")
    if spec is None or NODE_ARCHITECTURE not in (image_platforms(image) or frozenset()):
        return set()
    ports = {spec.port} if spec.port is not None else set()
    return ports | {p for _, p in spec.extra_ports}


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


def chaos_selects(chaos: Obj, labels: dict[str, str], namespace: str) -> bool:
    """Whether a Chaos Mesh object's selector picks a pod with these labels."""
    spec = chaos.get("spec") or {}
    selector = spec.get("selector") or {}
    namespaces = selector.get("namespaces")
    if namespaces and namespace not in namespaces:
        return False
    wanted = selector.get("labelSelectors") or {}
    if not wanted and not selector.get("expressionSelectors"):
        return False
    if not all(labels.get(k) == v for k, v in wanted.items()):
        return False
    return labels_match({"matchExpressions": selector.get("expressionSelectors") or []}, labels)
