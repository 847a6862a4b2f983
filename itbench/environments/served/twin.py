"""The twin behind the served API: a `SimEnvironment` ticking on a real-time clock, its objects
published into the API's store after every tick and every write.

The twin's clock runs `speed` virtual seconds per wall second from its start (1: real time). Each
15-second physics step runs when the wall clock reaches it; API writes to the twin's objects go
straight into its store, where its controllers see them at the next step.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from itbench.environments.served.resources import ResourceType
from itbench.environments.served.store import ApiError, ObjectStore
from itbench.environments.sim.environment import TICK_SECONDS, SimEnvironment
from itbench.environments.sim.limits import LimitExceededError, admit
from itbench.environments.sim.objects import KIND_INFO, Obj, api_defaults, clone

log = logging.getLogger(__name__)

TWIN_CLUSTER_KINDS = frozenset({"Node", "PriorityClass", "StorageClass"})
"""Cluster-scoped kinds whose every object is the twin's (its scheduler reads them)."""
SHARED_CLUSTER_KINDS = frozenset({"Namespace", "ClusterRole", "ClusterRoleBinding"})
"""Cluster-scoped kinds the twin holds only some objects of (its namespace, the chart's RBAC)."""


class TwinBackend:
    """The store's backend for the twin's objects (`itbench.environments.served.store.Backend`).

    Args:
        env: The twin (provisioned).
        store: The API's store.
    """

    def __init__(self, env: SimEnvironment, store: ObjectStore) -> None:
        self.env = env
        self.store = store
        self._seen: dict[tuple[str, str], Obj] = {}

    @property
    def namespace(self) -> str:
        """The twin's namespace."""
        return self.env.namespace

    def owns(self, rtype: ResourceType, namespace: str | None, name: str | None) -> bool:
        """Whether the object is the twin's: its kinds in its namespace, its nodes and classes,
        its Namespace, and the cluster-wide RBAC objects it holds."""
        info = KIND_INFO.get(rtype.kind)
        if info is None or info[0] != rtype.api_version:
            return False
        if rtype.namespaced:
            return namespace == self.env.namespace
        if rtype.kind in TWIN_CLUSTER_KINDS:
            return True
        if rtype.kind == "Namespace":
            return name == self.env.namespace
        return name is not None and self.env.cluster.get(rtype.kind, name) is not None

    def create(self, rtype: ResourceType, obj: Obj) -> None:
        """Store a new object in the twin (the API server's defaults filled in)."""
        cluster = self.env.cluster
        if rtype.kind == "Event":
            event = clone(obj)
            event["metadata"]["namespace"] = self.namespace
            cluster.events.append(event)
            return
        if rtype.kind == "Namespace":
            raise ApiError(
                409, "AlreadyExists", f'namespaces "{obj["metadata"]["name"]}" already exists'
            )
        new = api_defaults(clone(obj))
        _admit(new, len(cluster.objects.get(rtype.kind, {})))
        cluster.put(new)

    def replace(self, rtype: ResourceType, obj: Obj) -> None:
        """Store a new version of one of the twin's objects."""
        cluster = self.env.cluster
        name = str(obj["metadata"]["name"])
        if rtype.kind == "Event":
            for i, event in enumerate(cluster.events):
                if event["metadata"]["name"] == name:
                    cluster.events[i] = clone(obj)
                    return
            raise ApiError(404, "NotFound", f'events "{name}" not found')
        new = api_defaults(clone(obj))
        _admit(new, None)
        cluster.put(new)

    def delete(self, rtype: ResourceType, namespace: str | None, name: str) -> None:
        """Delete one of the twin's objects (what it owns goes with it)."""
        cluster = self.env.cluster
        if rtype.kind == "Event":
            cluster.events[:] = [e for e in cluster.events if e["metadata"]["name"] != name]
            return
        cluster.delete(rtype.kind, name)

    def sync(self) -> None:
        """Publish every twin object that changed since the last sync; retract deleted ones."""
        cluster = self.env.cluster
        types = self.store.types
        live: set[tuple[str, str]] = set()
        for kind, bucket in cluster.objects.items():
            info = KIND_INFO.get(kind)
            if info is None:
                continue
            rtype = types.by_kind(info[0], kind)
            if rtype is None:
                continue
            for name, obj in bucket.items():
                self._publish(rtype, kind, name, obj, live)
        events = types.by_kind("v1", "Event")
        if events is not None:
            for event in cluster.events:
                self._publish(events, "Event", str(event["metadata"]["name"]), event, live)
        for key in [k for k in self._seen if k not in live]:
            kind, name = key
            del self._seen[key]
            info = KIND_INFO.get(kind)
            rtype = types.by_kind(info[0], kind) if info is not None else None
            if rtype is not None:
                self.store.retract(rtype, self.namespace if rtype.namespaced else None, name)

    def _publish(
        self, rtype: ResourceType, kind: str, name: str, obj: Obj, live: set[tuple[str, str]]
    ) -> None:
        key = (kind, name)
        live.add(key)
        if self._seen.get(key) == obj:
            return
        self._seen[key] = clone(obj)
        served = clone(obj)
        served["apiVersion"] = rtype.api_version
        served["kind"] = rtype.kind
        meta = served.setdefault("metadata", {})
        if rtype.namespaced:
            meta["namespace"] = self.namespace
        else:
            meta.pop("namespace", None)
        self.store.publish(rtype, served)


class TwinClock:
    """Runs a twin's physics on the wall clock, `speed` virtual seconds per wall second.

    Args:
        env: The twin (provisioned: its clock starts where provisioning left it).
        speed: Virtual seconds per wall second.
        wall: The wall clock (epoch seconds).
        lock: Guards every step (and the API's store).
    """

    def __init__(
        self,
        env: SimEnvironment,
        *,
        speed: float = 1.0,
        wall: Callable[[], float] = time.time,
        lock: threading.RLock | None = None,
    ) -> None:
        if not speed > 0:
            raise ValueError(f"the twin's speed must be positive, got {speed}")
        self.env = env
        self.speed = speed
        self.lock = lock or threading.RLock()
        self._wall = wall
        self.after_step: list[Callable[[], None]] = []
        """Called under the lock after each step (publishing, rule files)."""
        self.virtual_origin = env.now().timestamp()
        self.wall_origin = wall()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.steps = 0
        self.behind_seconds = 0.0
        """How far the last catch-up ended behind the clock (virtual seconds)."""

    def now(self) -> float:
        """The twin's time now (continuous, virtual epoch seconds)."""
        return self.virtual_origin + (self._wall() - self.wall_origin) * self.speed

    def now_datetime(self) -> datetime:
        """The twin's time now, as an aware datetime."""
        return datetime.fromtimestamp(self.now(), tz=UTC)

    def catch_up(self) -> int:
        """Run every step that is due now; returns how many ran."""
        target = self.now()
        ran = 0
        while not self._stop.is_set():
            with self.lock:
                due = self.env.now().timestamp() + TICK_SECONDS
                if due > target + 1e-6:
                    break
                self.env.advance(TICK_SECONDS)
                for callback in self.after_step:
                    callback()
            ran += 1
            self.steps += 1
        self.behind_seconds = max(target - self.env.now().timestamp() - TICK_SECONDS, 0.0)
        return ran

    def start(self) -> None:
        """Step the twin from a background thread until `stop`."""
        self._thread = threading.Thread(target=self._run, name="twin-clock", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.catch_up()
            except Exception:
                log.exception("a twin step failed")
            next_due = self.env.now().timestamp() + TICK_SECONDS
            wait = max((next_due - self.now()) / self.speed, 0.005)
            self._stop.wait(min(wait, 1.0))

    def stop(self) -> None:
        """Stop stepping (the twin keeps its state)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)


def _admit(obj: Obj, existing: int | None) -> None:
    """The twin's limits on a write (`itbench.environments.sim.limits`), answered as
    kube-apiserver's Status (422 Invalid from the replica policy, 403 Forbidden from quota)."""
    try:
        admit(obj, existing)
    except LimitExceededError as exc:
        raise ApiError(exc.status, exc.reason, str(exc).removeprefix("The ")) from None
