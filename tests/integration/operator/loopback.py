"""A loopback Kubernetes API server for operator tests: in-memory objects served on 127.0.0.1.

kmock 0.8 (the emulator LAB.md names) leaves almost every verb short of what Kopf, the official
client and kubectl need (resourceVersion/uid/generation, 201 on create, 422 on a failed JSON-patch
test, PUT, list kinds, JSON watch streams with timeouts and bookmarks, selectors, the status
subresource, Tables for printer columns, owner-reference garbage collection). Filling those gaps
means replacing all of its handlers, so this module is a small self-contained server instead: one
aiohttp app with the Kubernetes REST conventions, CRDs registered from `apiextensions.k8s.io/v1`
objects.

Run it standalone with `python tests/integration/operator/kubeapi.py --port 0` (prints the URL).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import copy
import json
import re
import threading
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp import web

from itbench.core.crds import crd_refusal
from itbench.environments.sim.objects import MergePatchError
from itbench.environments.sim.objects import merge_patch as strategic_merge_patch

Json = dict[str, Any]

HISTORY_LIMIT = 20_000
BOOKMARK_SECONDS = 5.0


@dataclass(frozen=True)
class ResourceType:
    """One served resource (a built-in kind or one declared by a CRD)."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    status_subresource: bool = False
    printer_columns: tuple[Mapping[str, Any], ...] = ()
    categories: tuple[str, ...] = ()
    schema: Mapping[str, Any] | None = None

    @property
    def api_version(self) -> str:
        """`group/version`, or `v1` for the core group."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def discovery(self) -> list[Json]:
        """Entries of this resource in an APIResourceList."""
        verbs = ["create", "delete", "get", "list", "patch", "update", "watch"]
        entries = [
            {
                "name": self.plural,
                "singularName": self.singular or self.kind.lower(),
                "namespaced": self.namespaced,
                "kind": self.kind,
                "verbs": verbs,
                "shortNames": list(self.short_names),
                **({"categories": list(self.categories)} if self.categories else {}),
            }
        ]
        if self.status_subresource:
            entries.append(
                {
                    "name": f"{self.plural}/status",
                    "singularName": "",
                    "namespaced": self.namespaced,
                    "kind": self.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
        return entries


BUILTINS = (
    ResourceType("", "v1", "namespaces", "Namespace", False, "namespace", ("ns",), True),
    ResourceType("", "v1", "configmaps", "ConfigMap", True, "configmap", ("cm",)),
    ResourceType("", "v1", "secrets", "Secret", True, "secret"),
    ResourceType("", "v1", "events", "Event", True, "event", ("ev",)),
    ResourceType("", "v1", "serviceaccounts", "ServiceAccount", True, "serviceaccount", ("sa",)),
    ResourceType("", "v1", "pods", "Pod", True, "pod", ("po",), True),
    ResourceType("batch", "v1", "jobs", "Job", True, "job", (), True),
    # The application's kinds, for the live-cluster fault playbooks (no controllers run here).
    ResourceType("", "v1", "services", "Service", True, "service", ("svc",), True),
    ResourceType("apps", "v1", "deployments", "Deployment", True, "deployment", ("deploy",), True),
    ResourceType("apps", "v1", "daemonsets", "DaemonSet", True, "daemonset", ("ds",), True),
    ResourceType("", "v1", "nodes", "Node", False, "node", ("no",), True),
    ResourceType("", "v1", "resourcequotas", "ResourceQuota", True, "resourcequota", ("quota",)),
    ResourceType(
        "", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, "persistentvolumeclaim"
    ),
    ResourceType(
        "scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, "priorityclass"
    ),
    ResourceType(
        "autoscaling",
        "v2",
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
        True,
        "horizontalpodautoscaler",
        ("hpa",),
        True,
    ),
    ResourceType(
        "networking.k8s.io",
        "v1",
        "networkpolicies",
        "NetworkPolicy",
        True,
        "networkpolicy",
        ("netpol",),
    ),
    ResourceType("rbac.authorization.k8s.io", "v1", "roles", "Role", True, "role"),
    ResourceType(
        "rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False, "clusterrole"
    ),
    ResourceType(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "ClusterRoleBinding",
        False,
        "clusterrolebinding",
    ),
    ResourceType(
        "rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True, "rolebinding"
    ),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True, "lease"),
    ResourceType(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        False,
        "customresourcedefinition",
        ("crd", "crds"),
        True,
    ),
)


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
            "code": self.code,
            "reason": self.reason,
            "message": self.message,
        }


@dataclass
class _Event:
    rv: int
    key: tuple[str, str]
    type: str
    obj: Json


@dataclass
class _Target:
    rtype: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None


# ---- selectors and patches -------------------------------------------------------------------

_SET_RE = re.compile(r"^\s*([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def _split_selector(text: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    current = ""
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current)
    return [p.strip() for p in parts if p.strip()]


def label_selector_matches(selector: str, labels: Mapping[str, str]) -> bool:
    """Whether labels match a label selector (=, ==, !=, in, notin, exists, !exists)."""
    for term in _split_selector(selector):
        set_match = _SET_RE.match(term)
        if set_match:
            key, op, values = set_match.groups()
            options = {v.strip() for v in values.split(",") if v.strip()}
            inside = key in labels and labels[key] in options
            if (op == "in") != inside:
                return False
        elif "!=" in term:
            key, value = (s.strip() for s in term.split("!=", 1))
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = (s.strip() for s in term.replace("==", "=").split("=", 1))
            if labels.get(key) != value:
                return False
        elif term.startswith("!"):
            if term[1:].strip() in labels:
                return False
        elif term not in labels:
            return False
    return True


def field_selector_matches(selector: str, obj: Json) -> bool:
    """Whether an object matches a field selector of `path=value` / `path!=value` terms."""
    for term in _split_selector(selector):
        negate = "!=" in term
        path, value = (s.strip() for s in term.replace("==", "=").split("!=" if negate else "=", 1))
        node: Any = obj
        for part in path.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        actual = "" if node is None else str(node)
        if (actual == value) == negate:
            return False
    return True


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (strategic-merge directives are dropped: lists are replaced)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    return [p.replace("~1", "/").replace("~0", "~") for p in path.lstrip("/").split("/")]


def _resolve(doc: Any, parts: list[str]) -> Any:
    node = doc
    for part in parts:
        if isinstance(node, list):
            node = node[int(part)]
        elif isinstance(node, dict):
            node = node[part]
        else:
            raise KeyError(part)
    return node


def json_patch(doc: Json, ops: list[Json]) -> Json:
    """RFC 6902 JSON patch; a failed `test` or a missing path raises ApiError 422."""
    result: Any = copy.deepcopy(doc)
    for op in ops:
        kind = op.get("op")
        parts = _pointer(str(op.get("path", "")))
        try:
            if kind == "test":
                if _resolve(result, parts) != op.get("value"):
                    raise ApiError(
                        422,
                        "Invalid",
                        f"the server rejected our request: test failed at {op['path']}",
                    )
                continue
            value = copy.deepcopy(op.get("value"))
            if kind in ("move", "copy"):
                source = _pointer(str(op["from"]))
                value = copy.deepcopy(_resolve(result, source))
                if kind == "move":
                    parent = _resolve(result, source[:-1])
                    if isinstance(parent, list):
                        parent.pop(int(source[-1]))
                    else:
                        del parent[source[-1]]
                kind = "add"
            if not parts:
                result = value
                continue
            parent = _resolve(result, parts[:-1])
            last = parts[-1]
            if kind == "add":
                if isinstance(parent, list):
                    parent.insert(len(parent) if last == "-" else int(last), value)
                else:
                    parent[last] = value
            elif kind == "replace":
                if isinstance(parent, list):
                    parent[int(last)] = value
                else:
                    if last not in parent:
                        raise KeyError(last)
                    parent[last] = value
            elif kind == "remove":
                if isinstance(parent, list):
                    parent.pop(int(last))
                else:
                    del parent[last]
            else:
                raise ApiError(422, "Invalid", f"unsupported JSON-patch op {kind!r}")
        except (KeyError, IndexError, ValueError, TypeError) as exc:
            raise ApiError(
                422,
                "Invalid",
                f"the server rejected our request: {kind} at {op.get('path')}: {exc}",
            ) from None
    if not isinstance(result, dict):
        raise ApiError(422, "Invalid", "a JSON patch must leave an object")
    return result


CONFIG_MAP_BYTES = 1 << 20
"""kube-apiserver's limit on a ConfigMap's data and binaryData together (keys included)."""


def _check_size(rtype: ResourceType, body: Json) -> None:
    """Refuse a ConfigMap over 1 MiB as kube-apiserver's validation does (422 Invalid)."""
    if rtype.group or rtype.plural != "configmaps":
        return
    size = sum(len(k) + len(str(v).encode()) for k, v in (body.get("data") or {}).items())
    for key, value in (body.get("binaryData") or {}).items():
        size += len(key) + len(base64.b64decode(value))
    if size > CONFIG_MAP_BYTES:
        name = (body.get("metadata") or {}).get("name", "")
        raise ApiError(
            422,
            "Invalid",
            f'ConfigMap "{name}" is invalid: []: Too long: must have at most '
            f"{CONFIG_MAP_BYTES} bytes",
        )


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _jsonpath(obj: Json, path: str) -> Any:
    node: Any = obj
    for part in path.lstrip(".").split("."):
        if not part:
            continue
        node = node.get(part) if isinstance(node, dict) else None
    return node


def _age(stamp: str) -> str:
    try:
        then = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return stamp
    seconds = max(int((datetime.now(UTC) - then).total_seconds()), 0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _cell(value: Any, column: Mapping[str, Any]) -> Any:
    if value is None:
        return None
    if column.get("type") == "date" and isinstance(value, str):
        return _age(value)
    return value  # numbers as stored, as kube-apiserver sends them


# ---- the server ------------------------------------------------------------------------------


class LoopbackApi:
    """An in-memory Kubernetes API on loopback, served from its own thread and event loop."""

    def __init__(self) -> None:
        """Create a server with the built-in kinds and the namespaces default and kube-system."""
        self._types: dict[tuple[str, str], ResourceType] = {}
        for rtype in BUILTINS:
            self._types[(rtype.group, rtype.plural)] = rtype
        self._objects: dict[tuple[str, str], dict[tuple[str | None, str], Json]] = {}
        self._history: list[_Event] = []
        self._rv = 0
        self._lock = threading.RLock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._started = threading.Event()
        self._streams: set[asyncio.Task[Any]] = set()
        self.url = ""
        self.requests = 0
        for ns in ("default", "kube-system"):
            self._store(
                self._types[("", "namespaces")],
                None,
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
            )

    # -- lifecycle ------------------------------------------------------------------------
    def start(self, port: int = 0) -> str:
        """Serve on 127.0.0.1 (port 0: any free port) from a background thread; return the URL."""
        self._thread = threading.Thread(
            target=self._serve, args=(port,), name="loopback-kube-api", daemon=True
        )
        self._thread.start()
        if not self._started.wait(10):
            raise RuntimeError("the loopback API did not start")
        return self.url

    def stop(self) -> None:
        """Stop serving and end every open watch."""
        loop = self._loop
        if loop is None or self._thread is None:
            return
        future = asyncio.run_coroutine_threadsafe(self._shutdown(), loop)
        with contextlib.suppress(Exception):
            future.result(10)
        loop.call_soon_threadsafe(loop.stop)
        self._thread.join(10)
        self._loop = None

    def _serve(self, port: int) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        self._changed = asyncio.Event()
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=0.5)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", port)
        loop.run_until_complete(site.start())
        self._runner = runner
        sockets = site._server.sockets if site._server is not None else []  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{sockets[0].getsockname()[1]}"
        self._started.set()
        try:
            loop.run_forever()
        finally:
            loop.close()

    async def _shutdown(self) -> None:
        streams = list(self._streams)
        for task in streams:
            task.cancel()
        await asyncio.gather(*streams, return_exceptions=True)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def kubeconfig(self, path: Path) -> Path:
        """Write a kubeconfig for this server (no authentication) and return its path."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "loopback", "cluster": {"server": self.url}}],
            "users": [{"name": "loopback", "user": {"token": "loopback"}}],
            "contexts": [
                {
                    "name": "loopback",
                    "context": {"cluster": "loopback", "user": "loopback", "namespace": "default"},
                }
            ],
            "current-context": "loopback",
        }
        path.write_text(json.dumps(config), encoding="utf-8")
        return path

    # -- direct access for tests ----------------------------------------------------------
    def register_crd(self, crd: Json) -> ResourceType:
        """Serve the resource a CustomResourceDefinition declares (first served version)."""
        _refuse_invalid_crd(crd)
        spec = crd["spec"]
        names = spec["names"]
        version = next(v for v in spec["versions"] if v.get("served", True))
        rtype = ResourceType(
            group=spec["group"],
            version=version["name"],
            plural=names["plural"],
            kind=names["kind"],
            namespaced=spec.get("scope", "Namespaced") == "Namespaced",
            singular=names.get("singular", names["kind"].lower()),
            short_names=tuple(names.get("shortNames", [])),
            status_subresource="status" in (version.get("subresources") or {}),
            printer_columns=tuple(version.get("additionalPrinterColumns", [])),
            categories=tuple(names.get("categories", [])),
            schema=(version.get("schema") or {}).get("openAPIV3Schema"),
        )
        with self._lock:
            self._types[(rtype.group, rtype.plural)] = rtype
        return rtype

    def install_crd(self, crd: Json) -> ResourceType:
        """Create a CustomResourceDefinition object (as `kubectl apply` would) and serve it."""
        with self._lock:
            self._store(
                self._types[("apiextensions.k8s.io", "customresourcedefinitions")], None, crd
            )
            return self.register_crd(crd)

    def objects(self, group: str, plural: str, namespace: str | None = None) -> list[Json]:
        """Copies of the stored objects of a resource (optionally of one namespace)."""
        with self._lock:
            stored = self._objects.get((group, plural), {})
            return [
                copy.deepcopy(obj)
                for (ns, _), obj in sorted(stored.items(), key=lambda kv: str(kv[0]))
                if namespace is None or ns == namespace
            ]

    def get(self, group: str, plural: str, namespace: str | None, name: str) -> Json | None:
        """A copy of one stored object, if present."""
        with self._lock:
            obj = self._objects.get((group, plural), {}).get((namespace, name))
            return copy.deepcopy(obj) if obj is not None else None

    # -- storage --------------------------------------------------------------------------
    def _bump(self) -> str:
        self._rv += 1
        return str(self._rv)

    def _emit(self, rtype: ResourceType, kind: str, obj: Json) -> None:
        self._history.append(
            _Event(int(obj["metadata"]["resourceVersion"]), (rtype.group, rtype.plural), kind, obj)
        )
        if len(self._history) > HISTORY_LIMIT * 2:
            del self._history[: len(self._history) - HISTORY_LIMIT]
        if self._changed is not None and self._loop is not None:
            changed = self._changed
            self._changed = asyncio.Event()
            if threading.current_thread() is self._thread:
                changed.set()
            else:
                self._loop.call_soon_threadsafe(changed.set)

    def _store(self, rtype: ResourceType, namespace: str | None, body: Json) -> Json:
        _check_size(rtype, body)
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = f"{meta['generateName']}{uuid.uuid4().hex[:5]}"
        name = meta.get("name")
        if not name:
            raise ApiError(422, "Invalid", "metadata.name: Required value: name or generateName")
        if rtype.namespaced:
            namespace = namespace or meta.get("namespace") or "default"
            if meta.get("namespace") not in (None, namespace):
                raise ApiError(
                    400,
                    "BadRequest",
                    "the namespace of the provided object does not match the namespace "
                    "sent on the request",
                )
            meta["namespace"] = namespace
        else:
            namespace = None
            meta.pop("namespace", None)
        if rtype.plural == "customresourcedefinitions":
            _refuse_invalid_crd(obj)
        bucket = self._objects.setdefault((rtype.group, rtype.plural), {})
        if (namespace, name) in bucket:
            raise ApiError(
                409, "AlreadyExists", f'{rtype.plural}.{rtype.group} "{name}" already exists'
            )
        obj["apiVersion"] = rtype.api_version
        obj["kind"] = rtype.kind
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = _now()
        meta["generation"] = 1
        meta["resourceVersion"] = self._bump()
        meta.pop("deletionTimestamp", None)
        bucket[(namespace, name)] = obj
        self._emit(rtype, "ADDED", obj)
        if rtype.plural == "customresourcedefinitions":
            self.register_crd(obj)
        return obj

    def _find(self, target: _Target) -> Json:
        assert target.name is not None
        obj = self._objects.get((target.rtype.group, target.rtype.plural), {}).get(
            (target.namespace, target.name)
        )
        if obj is None:
            raise ApiError(
                404,
                "NotFound",
                f'{target.rtype.plural}.{target.rtype.group or "core"} "{target.name}" not found',
            )
        return obj

    def _replace(self, target: _Target, current: Json, new: Json) -> Json:
        rtype = target.rtype
        sent_rv = (new.get("metadata") or {}).get("resourceVersion")
        if sent_rv and sent_rv != current["metadata"]["resourceVersion"]:
            raise ApiError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {rtype.plural}.{rtype.group} "{target.name}": '
                "the object has been modified; please apply your changes to the latest version",
            )
        _check_size(rtype, new)
        obj = copy.deepcopy(new)
        if rtype.status_subresource:
            if target.subresource == "status":
                body_only = {k: v for k, v in current.items() if k not in ("status", "metadata")}
                obj = {**body_only, "metadata": copy.deepcopy(current["metadata"])}
                if "status" in new:
                    obj["status"] = copy.deepcopy(new["status"])
            elif "status" in current:
                obj["status"] = copy.deepcopy(current["status"])
            else:
                obj.pop("status", None)
        meta = obj.setdefault("metadata", {})
        old_meta = current["metadata"]
        for key in ("uid", "creationTimestamp", "name", "namespace", "deletionTimestamp"):
            if key in old_meta:
                meta[key] = old_meta[key]
            else:
                meta.pop(key, None)
        obj["apiVersion"] = rtype.api_version
        obj["kind"] = rtype.kind
        if rtype.plural == "customresourcedefinitions":
            _refuse_invalid_crd(obj)

        def content(o: Json) -> Json:
            skip = {"metadata", "apiVersion", "kind"}
            if rtype.status_subresource:
                skip.add("status")
            return {k: v for k, v in o.items() if k not in skip}

        generation = int(old_meta.get("generation", 1))
        meta["generation"] = generation + 1 if content(obj) != content(current) else generation
        if {**obj, "metadata": {**meta, "resourceVersion": old_meta["resourceVersion"]}} == current:
            return current  # a no-op write does not change the resourceVersion
        meta["resourceVersion"] = self._bump()
        bucket = self._objects[(rtype.group, rtype.plural)]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            del bucket[(target.namespace, target.name)]
            self._emit(rtype, "DELETED", obj)
            self._collect_dependents(meta["uid"])
            return obj
        bucket[(target.namespace, target.name)] = obj
        self._emit(rtype, "MODIFIED", obj)
        if rtype.plural == "customresourcedefinitions":
            self.register_crd(obj)
        return obj

    def _delete(self, target: _Target) -> Json:
        current = self._find(target)
        meta = current["metadata"]
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp"):
                return current
            obj = copy.deepcopy(current)
            obj["metadata"]["deletionTimestamp"] = _now()
            obj["metadata"]["resourceVersion"] = self._bump()
            self._objects[(target.rtype.group, target.rtype.plural)][
                (target.namespace, target.name)
            ] = obj
            self._emit(target.rtype, "MODIFIED", obj)
            return obj
        del self._objects[(target.rtype.group, target.rtype.plural)][
            (target.namespace, target.name)
        ]
        obj = copy.deepcopy(current)
        obj["metadata"]["resourceVersion"] = self._bump()
        self._emit(target.rtype, "DELETED", obj)
        self._collect_dependents(meta["uid"])
        return obj

    def _collect_dependents(self, owner_uid: str) -> None:
        # Background cascading deletion: dependents go once their owner is gone.
        for (group, plural), bucket in list(self._objects.items()):
            rtype = self._types[(group, plural)]
            for (ns, name), obj in list(bucket.items()):
                refs = obj["metadata"].get("ownerReferences") or []
                if any(ref.get("uid") == owner_uid for ref in refs):
                    with contextlib.suppress(ApiError):
                        self._delete(_Target(rtype, ns, name, None))

    # -- HTTP -----------------------------------------------------------------------------
    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        try:
            return await self._route(request)
        except ApiError as exc:
            return web.json_response(exc.status(), status=exc.code)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            err = ApiError(400, "BadRequest", f"invalid body: {exc}")
            return web.json_response(err.status(), status=400)

    async def _route(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        parts = [p for p in path.split("/") if p]
        if request.method == "GET":
            discovery = self._discovery(parts)
            if discovery is not None:
                return web.json_response(discovery)
        target = self._target(parts)
        if target is None:
            raise ApiError(
                404, "NotFound", f"the server could not find the requested resource ({path})"
            )
        method = request.method
        if method == "GET":
            if target.name is None:
                if request.query.get("watch") in ("1", "true", "True"):
                    return await self._watch(request, target)
                return self._list(request, target)
            with self._lock:
                found = self._find(target)
                rv = str(self._rv)
            if "as=Table" in request.headers.get("Accept", ""):
                return web.json_response(self._table(target.rtype, [found], rv))
            return web.json_response(found)
        if request.query.get("dryRun") == "All" or (
            request.method == "DELETE" and await self._delete_options_dry_run(request)
        ):
            return await self._dry_run(request, target)
        if method == "POST":
            if target.name is not None:
                raise ApiError(405, "MethodNotAllowed", "POST to an object path")
            body = await request.json()
            with self._lock:
                obj = self._store(target.rtype, target.namespace, body)
            return web.json_response(obj, status=201)
        if method == "PUT":
            body = await request.json()
            with self._lock:
                current = self._find(target)
                return web.json_response(self._replace(target, current, body))
        if method == "PATCH":
            ctype = request.content_type
            if ctype == "application/apply-patch+yaml":
                raise ApiError(415, "UnsupportedMediaType", "server-side apply is not supported")
            body = await request.json()
            with self._lock:
                current = self._find(target)
                if ctype == "application/json-patch+json" or isinstance(body, list):
                    patched = json_patch(current, body)
                elif ctype == "application/strategic-merge-patch+json":
                    if target.rtype not in BUILTINS:
                        # As the real API server answers for custom resources.
                        raise ApiError(
                            415,
                            "UnsupportedMediaType",
                            "the body of the request was in an unknown format - accepted media "
                            "types include: application/json-patch+json, "
                            "application/merge-patch+json, application/apply-patch+yaml",
                        )
                    # Lists with a patch merge key merge item by item, by the key kube-apiserver
                    # uses for that kind and path (containers by name, Service ports by port);
                    # an element without its key is refused as kube-apiserver refuses it.
                    try:
                        patched = strategic_merge_patch(
                            current, body, strategic=True, kind=target.rtype.kind
                        )
                    except MergePatchError as exc:
                        raise ApiError(500, "", str(exc)) from None
                    patched.setdefault("metadata", {})["resourceVersion"] = current["metadata"][
                        "resourceVersion"
                    ]
                else:
                    patched = merge_patch(current, body)
                    sent_rv = ((body.get("metadata") or {}) if isinstance(body, dict) else {}).get(
                        "resourceVersion"
                    )
                    if not sent_rv:
                        patched.setdefault("metadata", {})["resourceVersion"] = current["metadata"][
                            "resourceVersion"
                        ]
                return web.json_response(self._replace(target, current, patched))
        if method == "DELETE":
            with self._lock:
                if target.name is None:
                    raise ApiError(405, "MethodNotAllowed", "deletecollection is not supported")
                return web.json_response(self._delete(target))
        raise ApiError(405, "MethodNotAllowed", f"{method} is not supported")

    @staticmethod
    async def _delete_options_dry_run(request: web.Request) -> bool:
        # kubectl delete --dry-run=server sends DeleteOptions in the body, not a query parameter.
        if not request.can_read_body:
            return False
        with contextlib.suppress(ValueError):
            options = await request.json()
            return isinstance(options, dict) and "All" in (options.get("dryRun") or [])
        return False

    async def _dry_run(self, request: web.Request, target: _Target) -> web.StreamResponse:
        # As kube-apiserver: the request is checked and answered; nothing is stored or watched.
        body = await request.json() if request.method not in ("DELETE", "GET") else None
        with self._lock:
            saved = (copy.deepcopy(self._objects), len(self._history), self._rv, self._changed)
            self._changed = None
            try:
                obj, code = self._write(request.method, request.content_type, target, body)
            finally:
                self._objects, length, self._rv, self._changed = saved
                del self._history[length:]
        return web.json_response(obj, status=code)

    def _write(self, method: str, ctype: str, target: _Target, body: Any) -> tuple[Json, int]:
        if method == "POST":
            return self._store(target.rtype, target.namespace, body), 201
        current = self._find(target)
        if method == "PUT":
            return self._replace(target, current, body), 200
        if method == "PATCH":
            if ctype == "application/json-patch+json" or isinstance(body, list):
                patched = json_patch(current, body)
            else:
                patched = merge_patch(current, body)
                patched.setdefault("metadata", {})["resourceVersion"] = current["metadata"][
                    "resourceVersion"
                ]
            return self._replace(target, current, patched), 200
        if method == "DELETE":
            return current, 200
        raise ApiError(405, "MethodNotAllowed", f"{method} is not supported")

    def _discovery(self, parts: list[str]) -> Json | None:
        with self._lock:
            types = list(self._types.values())
        if parts in (["version"],):
            return {
                "major": "1",
                "minor": "32",
                "gitVersion": "v1.32.0-loopback",
                "platform": "linux/amd64",
            }
        if parts[:2] == ["openapi", "v3"]:
            return self._openapi(parts[2:], types)
        if parts == []:
            return {"paths": ["/api", "/api/v1", "/apis", "/version"]}
        if parts == ["api"]:
            return {
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [
                    {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}
                ],
            }
        if parts == ["api", "v1"]:
            return self._resource_list("v1", [t for t in types if t.group == ""])
        groups: dict[str, set[str]] = {}
        for rtype in types:
            if rtype.group:
                groups.setdefault(rtype.group, set()).add(rtype.version)
        if parts == ["apis"]:
            return {
                "kind": "APIGroupList",
                "apiVersion": "v1",
                "groups": [self._group(g, sorted(v)) for g, v in sorted(groups.items())],
            }
        if len(parts) == 2 and parts[0] == "apis" and parts[1] in groups:
            return {
                "kind": "APIGroup",
                "apiVersion": "v1",
                **self._group(parts[1], sorted(groups[parts[1]])),
            }
        if len(parts) == 3 and parts[0] == "apis" and parts[2] in groups.get(parts[1], set()):
            return self._resource_list(
                f"{parts[1]}/{parts[2]}",
                [t for t in types if t.group == parts[1] and t.version == parts[2]],
            )
        return None

    @staticmethod
    def _openapi(parts: list[str], types: list[ResourceType]) -> Json | None:
        # OpenAPI v3: the operations kubectl looks for (the server validates fields itself) and
        # the schemas of the served CRDs.
        versions = sorted(
            {("api/v1" if not t.group else f"apis/{t.group}/{t.version}") for t in types}
        )
        if not parts:
            return {"paths": {v: {"serverRelativeURL": f"/openapi/v3/{v}"} for v in versions}}
        wanted = "/".join(parts)
        if wanted not in versions:
            return None
        paths: Json = {}
        schemas: Json = {}
        for t in types:
            prefix = "api/v1" if not t.group else f"apis/{t.group}/{t.version}"
            if prefix != wanted:
                continue
            scope = "/namespaces/{namespace}" if t.namespaced else ""
            gvk = {"group": t.group, "version": t.version, "kind": t.kind}
            operation = {
                "x-kubernetes-group-version-kind": gvk,
                "parameters": [
                    {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}
                ],
                "responses": {},
            }
            paths[f"/{prefix}{scope}/{t.plural}/{{name}}"] = {
                "patch": operation,
                "put": operation,
            }
            paths[f"/{prefix}{scope}/{t.plural}"] = {"post": operation}
            if t.schema is not None:
                # As kube-apiserver publishes a CRD's schema (so `kubectl explain` reads it).
                schema = copy.deepcopy(dict(t.schema))
                schema["x-kubernetes-group-version-kind"] = [gvk]
                reverse = ".".join(reversed(t.group.split(".")))
                schemas[f"{reverse}.{t.version}.{t.kind}"] = schema
        return {
            "openapi": "3.0.0",
            "info": {"title": "loopback", "version": "v1"},
            "paths": paths,
            "components": {"schemas": schemas},
        }

    @staticmethod
    def _group(name: str, versions: list[str]) -> Json:
        entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
        return {"name": name, "versions": entries, "preferredVersion": entries[0]}

    @staticmethod
    def _resource_list(group_version: str, types: Iterable[ResourceType]) -> Json:
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": group_version,
            "resources": [entry for t in types for entry in t.discovery()],
        }

    def _target(self, parts: list[str]) -> _Target | None:
        if parts[:2] == ["api", "v1"]:
            group, rest = "", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, rest = parts[1], parts[3:]
        else:
            return None
        namespace: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces" and (group, rest[2]) in self._types:
            namespace, rest = rest[1], rest[2:]
        if not rest or (group, rest[0]) not in self._types:
            return None
        rtype = self._types[(group, rest[0])]
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if sub not in (None, "status"):
            return None
        if not rtype.namespaced:
            namespace = None
        elif name is not None and namespace is None:
            return None
        return _Target(rtype, namespace, name, sub)

    def _matching(self, request: web.Request, target: _Target) -> list[Json]:
        labels = request.query.get("labelSelector", "")
        fields = request.query.get("fieldSelector", "")
        bucket = self._objects.get((target.rtype.group, target.rtype.plural), {})
        items = []
        for (ns, _name), obj in sorted(bucket.items(), key=lambda kv: (kv[0][0] or "", kv[0][1])):
            if target.namespace is not None and ns != target.namespace:
                continue
            if labels and not label_selector_matches(labels, obj["metadata"].get("labels") or {}):
                continue
            if fields and not field_selector_matches(fields, obj):
                continue
            items.append(obj)
        return items

    def _list(self, request: web.Request, target: _Target) -> web.Response:
        rtype = target.rtype
        with self._lock:
            items = self._matching(request, target)
            rv = str(self._rv)
        if "as=Table" in request.headers.get("Accept", ""):
            return web.json_response(self._table(rtype, items, rv))
        return web.json_response(
            {
                "apiVersion": rtype.api_version,
                "kind": f"{rtype.kind}List",
                "metadata": {"resourceVersion": rv},
                "items": items,
            }
        )

    @staticmethod
    def _table(rtype: ResourceType, items: list[Json], rv: str) -> Json:
        columns: list[Mapping[str, Any]] = [
            {"name": "Name", "type": "string", "format": "name", "jsonPath": ".metadata.name"}
        ]
        columns += list(rtype.printer_columns) or [
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
        ]
        return {
            "apiVersion": "meta.k8s.io/v1",
            "kind": "Table",
            "metadata": {"resourceVersion": rv},
            "columnDefinitions": [
                {
                    "name": c["name"],
                    "type": c.get("type", "string"),
                    "format": c.get("format", ""),
                    "description": c.get("description", ""),
                    "priority": c.get("priority", 0),
                }
                for c in columns
            ],
            "rows": [
                {
                    "cells": [_cell(_jsonpath(obj, c["jsonPath"]), c) for c in columns],
                    "object": {
                        "apiVersion": "meta.k8s.io/v1",
                        "kind": "PartialObjectMetadata",
                        "metadata": obj["metadata"],
                    },
                }
                for obj in items
            ],
        }

    async def _watch(self, request: web.Request, target: _Target) -> web.StreamResponse:
        query = request.query
        timeout = float(query.get("timeoutSeconds") or 0) or None
        bookmarks = query.get("allowWatchBookmarks") in ("1", "true")
        since = query.get("resourceVersion", "")
        initial = query.get("sendInitialEvents") in ("1", "true")
        key = (target.rtype.group, target.rtype.plural)
        as_table = "as=Table" in request.headers.get("Accept", "")

        def shown(obj: Json) -> Json:
            # kube-apiserver sends each watched object as a one-row Table when asked for one.
            return (
                self._table(target.rtype, [obj], obj["metadata"]["resourceVersion"])
                if as_table
                else obj
            )

        response = web.StreamResponse(
            status=200, headers={"Content-Type": "application/json", "Cache-Control": "no-cache"}
        )
        response.enable_chunked_encoding()
        await response.prepare(request)
        task = asyncio.current_task()
        if task is not None:
            self._streams.add(task)
            task.add_done_callback(self._streams.discard)
        pending: list[Json] = []
        with self._lock:
            if since in ("", "0") or initial:
                pending = [
                    {"type": "ADDED", "object": shown(obj)}
                    for obj in self._matching(request, target)
                ]
                last = self._rv
            else:
                last = int(since)
                if self._history and last < self._history[0].rv - 1 and self._history[0].rv > 1:
                    pending = [
                        {
                            "type": "ERROR",
                            "object": ApiError(
                                410, "Expired", f"too old resource version: {last}"
                            ).status(),
                        }
                    ]
            if initial:
                pending.append(self._bookmark(target.rtype, self._rv, initial_end=True))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout if timeout else None
        try:
            for event in pending:
                await response.write(json.dumps(event).encode() + b"\n")
            if pending and pending[0]["type"] == "ERROR":
                return response
            while True:
                with self._lock:
                    changed = self._changed
                    events = [e for e in self._events_after(last) if e.key == key]
                    last = self._rv
                for event in events:
                    obj = event.obj
                    meta = obj["metadata"]
                    if target.namespace is not None and meta.get("namespace") != target.namespace:
                        continue
                    labels = query.get("labelSelector", "")
                    if labels and not label_selector_matches(labels, meta.get("labels") or {}):
                        continue
                    fields = query.get("fieldSelector", "")
                    if fields and not field_selector_matches(fields, obj):
                        continue
                    await response.write(
                        json.dumps({"type": event.type, "object": shown(obj)}).encode() + b"\n"
                    )
                if not events and changed is not None:
                    wait = BOOKMARK_SECONDS
                    if deadline is not None:
                        wait = min(wait, deadline - loop.time())
                    if wait <= 0:
                        break
                    try:
                        await asyncio.wait_for(changed.wait(), wait)
                    except TimeoutError:
                        if bookmarks:
                            await response.write(
                                json.dumps(self._bookmark(target.rtype, last)).encode() + b"\n"
                            )
                if deadline is not None and loop.time() >= deadline:
                    break
                if self._runner is None or self._loop is None:
                    break
        except (ConnectionResetError, asyncio.CancelledError):
            return response
        with contextlib.suppress(ConnectionResetError):
            await response.write_eof()
        return response

    def _events_after(self, rv: int) -> list[_Event]:
        history = self._history
        if not history or history[-1].rv <= rv:
            return []
        lo, hi = 0, len(history)
        while lo < hi:
            mid = (lo + hi) // 2
            if history[mid].rv <= rv:
                lo = mid + 1
            else:
                hi = mid
        return history[lo:]

    @staticmethod
    def _bookmark(rtype: ResourceType, rv: int, *, initial_end: bool = False) -> Json:
        meta: Json = {"resourceVersion": str(rv)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        return {
            "type": "BOOKMARK",
            "object": {"apiVersion": rtype.api_version, "kind": rtype.kind, "metadata": meta},
        }


def main() -> None:
    """Serve until interrupted; print the URL on the first line of stdout."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--crd", action="append", default=[], help="CRD YAML files to register")
    args = parser.parse_args()
    import yaml

    api = LoopbackApi()
    for path in args.crd:
        for doc in yaml.safe_load_all(Path(path).read_text(encoding="utf-8")):
            if doc:
                api.register_crd(doc)
    url = api.start(args.port)
    print(url, flush=True)
    stop = threading.Event()
    with contextlib.suppress(KeyboardInterrupt):
        stop.wait()
    api.stop()


if __name__ == "__main__":
    main()
