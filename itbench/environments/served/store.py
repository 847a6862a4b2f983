"""The served API's object store: resource versions, the watch history, finalizers and garbage
collection, for every object the API serves.

Objects of a `Backend` (the twin's) are written through it and published back into the store,
which gives each version a resourceVersion and a watch event; every other object lives only
here. One re-entrant lock guards the store and the backend, so a twin's tick and a request never
interleave.
"""

from __future__ import annotations

import asyncio
import base64
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from itbench.core.crds import crd_refusal
from itbench.environments.served.defaults import (
    crd_status,
    creation_defaults,
    keeps_generation,
    service_defaults,
)
from itbench.environments.served.resources import ResourceType, ResourceTypes, crd_type
from itbench.environments.sim.cluster import rfc3339
from itbench.environments.sim.objects import clone

Json = dict[str, Any]
Key = tuple[str | None, str]
"""(namespace, name) of an object within its resource."""

HISTORY_LIMIT = 50_000
"""Watch events kept; a watch from an older resourceVersion gets 410 Gone."""


def _refuse_invalid_crd(crd: Json) -> None:
    # kube-apiserver refuses these; a stand-in that accepted them would be kinder than it.
    refusal = crd_refusal(crd)
    if refusal is not None:
        raise ApiError(422, "Invalid", refusal)


class ApiError(Exception):
    """An error answered as a Kubernetes Status object."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message

    def status(self) -> Json:
        """The Status body."""
        return {
            "apiVersion": "v1",
            "kind": "Status",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }


def fold_string_data(rtype: ResourceType, obj: Json) -> None:
    """Fold a Secret's `stringData` into `data`, base64-encoded, as kube-apiserver does on every
    write: `stringData` is write-only, and its keys win over `data`'s."""
    if rtype.group or rtype.plural != "secrets" or "stringData" not in obj:
        return
    strings = obj.pop("stringData")
    if not isinstance(strings, dict) or not strings:
        return
    data = obj.get("data")
    merged = dict(data) if isinstance(data, dict) else {}
    for key, value in strings.items():
        merged[key] = base64.b64encode(str(value).encode()).decode()
    obj["data"] = merged


def not_found(rtype: ResourceType, name: str) -> ApiError:
    """404 for a missing object, in kube-apiserver's words."""
    return ApiError(404, "NotFound", f'{qualified(rtype)} "{name}" not found')


def qualified(rtype: ResourceType) -> str:
    """`deployments.apps`, or the bare plural for the core group."""
    return f"{rtype.plural}.{rtype.group}" if rtype.group else rtype.plural


@dataclass(frozen=True)
class WatchEvent:
    """One change of one object."""

    rv: int
    group: str
    plural: str
    type: str
    obj: Json


class Backend(Protocol):
    """Holds some of the served objects itself (the twin): writes to them go through it."""

    def owns(self, rtype: ResourceType, namespace: str | None, name: str | None) -> bool:
        """Whether an object of this resource, namespace and name is the backend's."""
        ...

    def create(self, rtype: ResourceType, obj: Json) -> None:
        """Create an object (raise ApiError to refuse)."""
        ...

    def replace(self, rtype: ResourceType, obj: Json) -> None:
        """Replace an existing object with a full new version (raise ApiError to refuse)."""
        ...

    def delete(self, rtype: ResourceType, namespace: str | None, name: str) -> None:
        """Delete an object (and what it owns)."""
        ...

    def sync(self) -> None:
        """Publish the backend's current objects into the store (`ObjectStore.publish`)."""
        ...


class ObjectStore:
    """Objects by resource, with a global resourceVersion and a bounded event history.

    Args:
        types: The served resources (CRDs written here add to it).
        clock: The server's time in epoch seconds (creation and deletion timestamps).
        lock: The lock guarding the store (and its backend); a new one when None.
    """

    def __init__(
        self,
        types: ResourceTypes,
        clock: Callable[[], float],
        lock: threading.RLock | None = None,
    ) -> None:
        self.types = types
        self.clock = clock
        self.lock = lock or threading.RLock()
        self.backend: Backend | None = None
        self._objects: dict[tuple[str, str], dict[Key, Json]] = {}
        self._history: list[WatchEvent] = []
        self._rv = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed: asyncio.Event | None = None

    # ---- notification ---------------------------------------------------------------------
    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Notify watches running on this loop."""
        self._loop = loop
        self._changed = asyncio.Event()

    def changed(self) -> asyncio.Event | None:
        """An event set at the next change (watches wait on it)."""
        return self._changed

    @property
    def resource_version(self) -> int:
        """The latest resourceVersion."""
        return self._rv

    def _emit(self, rtype: ResourceType, kind: str, obj: Json) -> None:
        self._history.append(
            WatchEvent(
                int(obj["metadata"]["resourceVersion"]), rtype.group, rtype.plural, kind, obj
            )
        )
        if len(self._history) > HISTORY_LIMIT * 2:
            del self._history[: len(self._history) - HISTORY_LIMIT]
        loop, changed = self._loop, self._changed
        if loop is not None and changed is not None and not loop.is_closed():
            self._changed = asyncio.Event()
            loop.call_soon_threadsafe(changed.set)

    def events_after(self, rv: int) -> list[WatchEvent]:
        """Watch events newer than rv."""
        history = self._history
        lo, hi = 0, len(history)
        while lo < hi:
            mid = (lo + hi) // 2
            if history[mid].rv <= rv:
                lo = mid + 1
            else:
                hi = mid
        return history[lo:]

    def expired(self, rv: int) -> bool:
        """Whether events after rv are no longer all kept."""
        return bool(self._history) and rv < self._history[0].rv - 1

    def _bump(self) -> str:
        self._rv += 1
        return str(self._rv)

    # ---- reads ----------------------------------------------------------------------------
    def items(self, rtype: ResourceType, namespace: str | None = None) -> list[Json]:
        """The stored objects of a resource (of one namespace when given), by namespace and name.

        The objects are the stored ones: callers must not change them.
        """
        bucket = self._objects.get((rtype.group, rtype.plural), {})
        keys = sorted(bucket, key=lambda k: (k[0] or "", k[1]))
        return [bucket[k] for k in keys if namespace is None or k[0] == namespace]

    def find(self, rtype: ResourceType, namespace: str | None, name: str) -> Json | None:
        """One stored object (not a copy), or None."""
        return self._objects.get((rtype.group, rtype.plural), {}).get((namespace, name))

    def require(self, rtype: ResourceType, namespace: str | None, name: str) -> Json:
        """One stored object.

        Raises:
            ApiError: 404.
        """
        found = self.find(rtype, namespace, name)
        if found is None:
            raise not_found(rtype, name)
        return found

    def of(self, plural: str, group: str, namespace: str | None = None) -> list[Json]:
        """Stored objects of a resource named by group and plural (copies)."""
        rtype = self.types.get(group, plural)
        if rtype is None:
            return []
        with self.lock:
            return [clone(o) for o in self.items(rtype, namespace)]

    # ---- the backend's objects --------------------------------------------------------------
    def publish(self, rtype: ResourceType, obj: Json) -> Json:
        """Store a backend object's current version (a new resourceVersion and watch event).

        Args:
            rtype: Its resource.
            obj: The object as the backend holds it now (stored as given: pass a copy).
        """
        fold_string_data(rtype, obj)
        meta = obj.setdefault("metadata", {})
        if not keeps_generation(rtype):
            meta.pop("generation", None)
        namespace = meta.get("namespace") if rtype.namespaced else None
        key = (namespace, str(meta["name"]))
        bucket = self._objects.setdefault((rtype.group, rtype.plural), {})
        existed = key in bucket
        meta["resourceVersion"] = self._bump()
        bucket[key] = obj
        self._emit(rtype, "MODIFIED" if existed else "ADDED", obj)
        return obj

    def retract(self, rtype: ResourceType, namespace: str | None, name: str) -> None:
        """Drop a backend object that no longer exists (a DELETED event)."""
        bucket = self._objects.get((rtype.group, rtype.plural), {})
        obj = bucket.pop((namespace, name), None)
        if obj is None:
            return
        gone = dict(obj)
        gone["metadata"] = {**obj["metadata"], "resourceVersion": self._bump()}
        self._emit(rtype, "DELETED", gone)

    def keys(self, rtype: ResourceType) -> list[Key]:
        """Every stored key of a resource."""
        return list(self._objects.get((rtype.group, rtype.plural), {}))

    # ---- writes of stored objects -------------------------------------------------------------
    def create(
        self, rtype: ResourceType, namespace: str | None, body: Json, *, commit: bool = True
    ) -> Json:
        """Create an object (fills uid, creationTimestamp, generation and resourceVersion).

        Raises:
            ApiError: 409 when it exists, 422 without a name, 400 on a namespace mismatch.
        """
        obj = clone(body)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise ApiError(400, "BadRequest", "metadata must be an object")
        if rtype.plural == "customresourcedefinitions":
            _refuse_invalid_crd(obj)
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = f"{meta['generateName']}{uuid.uuid4().hex[:5]}"
        name = meta.get("name")
        if not name or not isinstance(name, str):
            raise ApiError(
                422,
                "Invalid",
                f'{rtype.kind} "" is invalid: metadata.name: Required value: name or generateName '
                "is required",
            )
        if rtype.namespaced:
            if meta.get("namespace") not in (None, namespace):
                raise ApiError(
                    400,
                    "BadRequest",
                    "the namespace of the provided object does not match the namespace sent on "
                    "the request",
                )
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        obj["apiVersion"] = rtype.api_version
        obj["kind"] = rtype.kind
        fold_string_data(rtype, obj)
        creation_defaults(rtype, obj)
        if self.backend is not None and self.backend.owns(rtype, namespace, name):
            if self.find(rtype, namespace, name) is not None:
                raise ApiError(409, "AlreadyExists", f'{qualified(rtype)} "{name}" already exists')
            for key in (
                "resourceVersion",
                "uid",
                "creationTimestamp",
                "generation",
                "deletionTimestamp",
            ):
                meta.pop(key, None)
            if not commit:
                return obj
            self.backend.create(rtype, obj)
            self.backend.sync()
            return self.require(rtype, namespace, name)
        bucket = self._objects.setdefault((rtype.group, rtype.plural), {})
        if (namespace, name) in bucket:
            raise ApiError(409, "AlreadyExists", f'{qualified(rtype)} "{name}" already exists')
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = rfc3339(self.clock())
        if keeps_generation(rtype):
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        meta.pop("deletionTimestamp", None)
        meta.pop("resourceVersion", None)
        if not commit:
            return obj
        if rtype.plural == "customresourcedefinitions":
            obj["status"] = crd_status(obj, rfc3339(self.clock()))
        if not rtype.group and rtype.plural == "services":
            service_defaults(obj, [o.get("spec") or {} for o in bucket.values()])
        meta["resourceVersion"] = self._bump()
        bucket[(namespace, name)] = obj
        self._emit(rtype, "ADDED", obj)
        if rtype.plural == "customresourcedefinitions":
            self.types.add(crd_type(obj))
        return obj

    def replace(
        self,
        rtype: ResourceType,
        current: Json,
        new: Json,
        *,
        subresource: str | None = None,
        commit: bool = True,
    ) -> Json:
        """Write a new version of an existing object.

        Status is a subresource where the resource has one: writing the object keeps the stored
        status, writing `status` keeps everything else. The generation grows when anything but
        metadata and status changes; an identical write keeps the resourceVersion.

        Raises:
            ApiError: 409 when the body names an older resourceVersion.
        """
        meta_now = current["metadata"]
        sent = (new.get("metadata") or {}).get("resourceVersion")
        if sent and str(sent) != str(meta_now.get("resourceVersion")):
            raise ApiError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {qualified(rtype)} "{meta_now["name"]}": the '
                "object has been modified; please apply your changes to the latest version and "
                "try again",
            )
        obj = clone(new)
        if rtype.has_status:
            if subresource == "status":
                status = obj.get("status")
                obj = {k: clone(v) for k, v in current.items() if k != "status"}
                if status is not None:
                    obj["status"] = status
            elif "status" in current:
                obj["status"] = clone(current["status"])
            else:
                obj.pop("status", None)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise ApiError(400, "BadRequest", "metadata must be an object")
        if subresource == "status":
            meta = obj["metadata"] = clone(meta_now)
        elif rtype.plural == "customresourcedefinitions":
            _refuse_invalid_crd(obj)
        for key in ("uid", "creationTimestamp", "name", "namespace", "deletionTimestamp"):
            if key in meta_now:
                meta[key] = meta_now[key]
            else:
                meta.pop(key, None)
        obj["apiVersion"] = rtype.api_version
        obj["kind"] = rtype.kind
        fold_string_data(rtype, obj)
        namespace = meta_now.get("namespace") if rtype.namespaced else None
        name = str(meta_now["name"])
        if self.backend is not None and self.backend.owns(rtype, namespace, name):
            meta.pop("resourceVersion", None)
            if not commit:
                return obj
            self.backend.replace(rtype, obj)
            self.backend.sync()
            return self.require(rtype, namespace, name)

        def content(o: Json) -> Json:
            skip = {"metadata", "apiVersion", "kind", "status"}
            return {k: v for k, v in o.items() if k not in skip}

        if keeps_generation(rtype):
            generation = int(meta_now.get("generation", 1))
            meta["generation"] = generation + 1 if content(obj) != content(current) else generation
        else:
            meta.pop("generation", None)
        meta["resourceVersion"] = meta_now["resourceVersion"]
        if obj == current or not commit:
            return obj if not commit else current
        meta["resourceVersion"] = self._bump()
        bucket = self._objects[(rtype.group, rtype.plural)]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            del bucket[(namespace, name)]
            self._emit(rtype, "DELETED", obj)
            self._collect(str(meta.get("uid")))
            return obj
        if rtype.plural == "customresourcedefinitions" and subresource != "status":
            obj["status"] = crd_status(obj, rfc3339(self.clock()), current.get("status"))
        bucket[(namespace, name)] = obj
        self._emit(rtype, "MODIFIED", obj)
        if rtype.plural == "customresourcedefinitions":
            self.types.add(crd_type(obj))
        return obj

    def delete(
        self, rtype: ResourceType, namespace: str | None, name: str, *, commit: bool = True
    ) -> Json:
        """Delete an object: at once, or (with finalizers) mark it for deletion.

        Raises:
            ApiError: 404.
        """
        current = self.require(rtype, namespace, name)
        if not commit:
            return current
        if self.backend is not None and self.backend.owns(rtype, namespace, name):
            self.backend.delete(rtype, namespace, name)
            self.backend.sync()
            return current
        meta = current["metadata"]
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp"):
                return current
            obj = clone(current)
            obj["metadata"]["deletionTimestamp"] = rfc3339(self.clock())
            obj["metadata"]["resourceVersion"] = self._bump()
            self._objects[(rtype.group, rtype.plural)][(namespace, name)] = obj
            self._emit(rtype, "MODIFIED", obj)
            return obj
        del self._objects[(rtype.group, rtype.plural)][(namespace, name)]
        obj = clone(current)
        obj["metadata"]["resourceVersion"] = self._bump()
        self._emit(rtype, "DELETED", obj)
        self._collect(str(meta.get("uid")))
        if rtype.plural == "namespaces" and namespace is None:
            self._empty_namespace(name)
        return obj

    def _collect(self, owner_uid: str) -> None:
        # Background cascading deletion: dependents go once their owner is gone.
        for (group, plural), bucket in list(self._objects.items()):
            rtype = self.types.get(group, plural)
            if rtype is None:
                continue
            for (ns, name), obj in list(bucket.items()):
                refs = obj["metadata"].get("ownerReferences") or []
                if any(ref.get("uid") == owner_uid for ref in refs):
                    if self.backend is not None and self.backend.owns(rtype, ns, name):
                        continue  # the backend collects its own
                    try:
                        self.delete(rtype, ns, name)
                    except ApiError:
                        continue

    def _empty_namespace(self, namespace: str) -> None:
        for (group, plural), bucket in list(self._objects.items()):
            rtype = self.types.get(group, plural)
            if rtype is None or not rtype.namespaced:
                continue
            for ns, name in list(bucket):
                if ns == namespace and not (
                    self.backend is not None and self.backend.owns(rtype, ns, name)
                ):
                    obj = bucket.pop((ns, name))
                    gone = {**obj, "metadata": {**obj["metadata"], "resourceVersion": self._bump()}}
                    self._emit(rtype, "DELETED", gone)
