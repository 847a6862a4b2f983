"""The Kubernetes REST API over an `ObjectStore`, as aiohttp handlers.

Discovery, get/list/watch (label and field selectors, pages, bookmarks, `sendInitialEvents`,
Tables), create, update, the three patch types, delete and deletecollection (with `dryRun`), and the
subresources status, scale, log, token (TokenRequest) and a Service's proxy; bearer-token
authentication and RBAC; schema validation of built-in kinds. The `Date` of every answer is the
server's clock (a served twin's clock runs at its own speed).

Request bodies are JSON, YAML (server-side apply, without field ownership) or protobuf (the kinds
client-go's typed clients write, `protobuf`); `Impersonate-*` headers act as another user. Where
it differs from kube-apiserver (docs/stack.md): no admission webhooks or policies, background
deletion only, and unknown fields are refused only under `fieldValidation=Strict`.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from email.utils import formatdate
from typing import Any

import yaml
from aiohttp import web

from itbench.environments.served import logs, protobuf
from itbench.environments.served.access import (
    Attributes,
    Authenticator,
    Authorizer,
    User,
    access_review,
    forbidden_message,
    impersonated,
)
from itbench.environments.served.patches import APPLY_PATCH, PatchError, apply_patch
from itbench.environments.served.resources import ResourceType, discovery
from itbench.environments.served.selectors import (
    SelectorError,
    field_selector_matches,
    label_selector_matches,
)
from itbench.environments.served.store import ApiError, ObjectStore, not_found, qualified
from itbench.environments.served.tables import table
from itbench.environments.served.validation import invalid_custom_fields, invalid_fields
from itbench.environments.sim.cluster import rfc3339
from itbench.environments.sim.objects import clone

Json = dict[str, Any]

BOOKMARK_SECONDS = 5.0
MAX_BODY_BYTES = 16 * 1024 * 1024
PodLog = Callable[[str, str], "list[logs.Entry] | None"]
"""(namespace, pod) -> the pod's log entries, oldest first, or None when it has none here."""
FOLLOW_SECONDS = 0.5
"""How often a followed log (`kubectl logs -f`) looks for new lines."""
ServiceProxy = Callable[[web.Request, str, str, str, str], Awaitable[web.StreamResponse | None]]
"""(request, namespace, service, port, path) -> the proxied answer, or None: nothing there."""


@dataclass
class Target:
    """What a resource path addresses."""

    rtype: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None
    rest: str = ""


@dataclass
class Hooks:
    """What the API serves from elsewhere than the store."""

    pod_log: PodLog | None = None
    service_proxy: ServiceProxy | None = None


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(
        body=json.dumps(data, separators=(",", ":")).encode(),
        status=status,
        content_type="application/json",
    )


def _wants_table(request: web.Request) -> bool:
    return "as=Table" in request.headers.get("Accept", "")


def _page(query: Mapping[str, str], items: list[Json], rv: str) -> tuple[list[Json], Json]:
    """One page of a list (`limit` and `continue`, items in namespace and name order) and the
    list metadata it adds (`continue`, `remainingItemCount`). A later page shows the objects as
    they are when it is read, not as they were at the first page."""
    limit_text = query.get("limit") or "0"
    limit = int(limit_text) if limit_text.isdigit() else 0
    token = query.get("continue")
    start = 0
    if token:
        try:
            after = json.loads(base64.urlsafe_b64decode(token.encode()))["start"]
        except (ValueError, KeyError, TypeError):
            raise ApiError(400, "BadRequest", "continue key is not valid") from None
        keys = [f"{o['metadata'].get('namespace') or ''}/{o['metadata']['name']}" for o in items]
        start = next((i for i, key in enumerate(keys) if key > after), len(items))
    rest = items[start:]
    if limit <= 0 or len(rest) <= limit:
        return rest, {}
    page = rest[:limit]
    meta = page[-1]["metadata"]
    key = f"{meta.get('namespace') or ''}/{meta['name']}"
    encoded = base64.urlsafe_b64encode(
        json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": key}).encode()
    )
    return page, {"continue": encoded.decode(), "remainingItemCount": len(rest) - limit}


class KubeApi:
    """The REST handlers of one served API.

    Args:
        store: The objects.
        authenticator: Bearer tokens.
        authorizer: RBAC.
        version: The `/version` document.
        hooks: Logs and Service proxies.
    """

    def __init__(
        self,
        store: ObjectStore,
        authenticator: Authenticator,
        authorizer: Authorizer,
        *,
        version: Json,
        hooks: Hooks | None = None,
    ) -> None:
        self.store = store
        self.authenticator = authenticator
        self.authorizer = authorizer
        self.version = version
        self.hooks = hooks or Hooks()
        self.requests = 0

    def application(self) -> web.Application:
        """The aiohttp application."""
        app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[self._date])
        app.router.add_route("*", "/{tail:.*}", self.dispatch)
        return app

    @web.middleware
    async def _date(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        response = await handler(request)
        if not response.prepared:
            response.headers["Date"] = formatdate(self.store.clock(), usegmt=True)
        return response

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        """Answer one request (errors as Status objects)."""
        self.requests += 1
        try:
            return await self._route(request)
        except ApiError as exc:
            return _json(exc.status(), exc.code)
        except SelectorError as exc:
            return _json(ApiError(400, "BadRequest", str(exc)).status(), 400)
        except PatchError as exc:
            reason = {415: "UnsupportedMediaType", 400: "BadRequest"}.get(exc.code, "Invalid")
            return _json(ApiError(exc.code, reason, str(exc)).status(), exc.code)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            return _json(ApiError(400, "BadRequest", f"invalid body: {exc}").status(), 400)

    # ---- routing ----------------------------------------------------------------------------
    async def _route(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        parts = [p for p in path.split("/") if p]
        if parts and parts[0] in ("healthz", "livez", "readyz"):
            return web.Response(text="ok")
        user = self.authenticator.authenticate(request.headers.get("Authorization"))
        if user is None:
            raise ApiError(401, "Unauthorized", "Unauthorized")
        acting, refusal = impersonated(
            self.authorizer,
            user,
            request.headers.get("Impersonate-User"),
            request.headers.getall("Impersonate-Group", []),
        )
        if acting is None:
            raise ApiError(403, "Forbidden", refusal)
        user = acting
        if request.method == "GET":
            found = discovery(parts, self.store.types.all(), self.version)
            if found is not None:
                return _json(found)
        target = self._target(parts)
        if target is None:
            raise ApiError(
                404, "NotFound", f"the server could not find the requested resource ({path})"
            )
        attrs = self._attributes(request, target)
        if not self.authorizer.allowed(user, attrs):
            raise ApiError(
                403, "Forbidden", forbidden_message(user, attrs, qualified(target.rtype))
            )
        if target.rtype.create_only:
            return await self._review(request, user, target)
        sub = target.subresource
        if sub == "log":
            return await self._log(request, target)
        if sub == "token":
            return await self._token(request, target)
        if sub == "proxy":
            return await self._proxy(request, target)
        if sub == "scale":
            return await self._scale(request, target)
        return await self._object(request, target)

    def _target(self, parts: list[str]) -> Target | None:
        if parts[:2] == ["api", "v1"]:
            group, rest = "", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, rest = parts[1], parts[3:]
        else:
            return None
        if not rest:
            return None
        namespace: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3 and self.store.types.get(group, rest[2]):
            namespace, rest = rest[1], rest[2:]
        rtype = self.store.types.get(group, rest[0])
        if rtype is None:
            return None
        version = parts[1] if group == "" else parts[2]
        if version != rtype.version:
            return None
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        remainder = "/".join(rest[3:])
        if sub is not None and sub not in rtype.subresources:
            return None
        if sub != "proxy" and remainder:
            return None
        if not rtype.namespaced:
            if namespace is not None:
                return None
        elif name is not None and namespace is None:
            return None
        return Target(rtype, namespace, name, sub, remainder)

    @staticmethod
    def _attributes(request: web.Request, target: Target) -> Attributes:
        method = request.method
        if method == "GET":
            if target.name is None:
                verb = "watch" if request.query.get("watch") in ("1", "true", "True") else "list"
            else:
                verb = "get"
        else:
            verb = {
                "POST": "create",
                "PUT": "update",
                "PATCH": "patch",
                "DELETE": "delete" if target.name is not None else "deletecollection",
            }.get(method, method.lower())
        if target.subresource == "proxy":
            verb = {"GET": "get", "POST": "create", "PUT": "update", "DELETE": "delete"}.get(
                method, verb
            )
        return Attributes(
            verb=verb,
            group=target.rtype.group,
            resource=target.rtype.plural,
            subresource=target.subresource or "",
            namespace=target.namespace or "",
            name=target.name or "",
        )

    # ---- objects ------------------------------------------------------------------------------
    async def _body(self, request: web.Request) -> Any:
        raw = await request.read()
        if not raw:
            return None
        if request.content_type == protobuf.CONTENT_TYPE:
            try:
                return protobuf.decode(raw)
            except (protobuf.ProtobufError, UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise ApiError(415, "UnsupportedMediaType", str(exc)) from exc
        if request.content_type == APPLY_PATCH:
            try:
                return yaml.safe_load(raw)
            except yaml.YAMLError as exc:
                raise ApiError(400, "BadRequest", f"invalid apply configuration: {exc}") from exc
        return json.loads(raw)

    async def _object(self, request: web.Request, target: Target) -> web.StreamResponse:
        method = request.method
        rtype = target.rtype
        if method == "GET":
            if target.name is None:
                if request.query.get("watch") in ("1", "true", "True"):
                    return await self._watch(request, target)
                return self._list(request, target)
            with self.store.lock:
                found = clone(self.store.require(rtype, target.namespace, target.name))
                rv = str(self.store.resource_version)
            if _wants_table(request):
                return _json(table(rtype, [found], rv, self.store.clock()))
            return _json(found)
        dry = request.query.get("dryRun") == "All"
        strict = request.query.get("fieldValidation") == "Strict"
        if method == "POST":
            if target.name is not None:
                raise ApiError(405, "MethodNotAllowed", "POST is not allowed on an object")
            body = await self._body(request)
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "the body must be an object")
            self._check_kind(rtype, body)
            with self.store.lock:
                self._require_namespace(target)
                self._validate(rtype, body, strict)
                obj = self.store.create(rtype, target.namespace, body, commit=not dry)
                return _json(clone(obj), 201)
        if method == "DELETE":
            options = await self._delete_options(request)
            dry = dry or "All" in (options.get("dryRun") or [])
            with self.store.lock:
                if target.name is None:
                    return self._delete_collection(request, target, dry)
                obj = self.store.delete(rtype, target.namespace, target.name, commit=not dry)
                return _json(clone(obj))
        if target.name is None:
            raise ApiError(405, "MethodNotAllowed", f"{method} is not allowed on a collection")
        body = await self._body(request)
        apply = method == "PATCH" and request.content_type == APPLY_PATCH
        if apply and not request.query.get("fieldManager"):
            raise ApiError(
                422,
                "Invalid",
                'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is '
                "required for apply patch",
            )
        with self.store.lock:
            if apply and target.subresource is None:
                created = self._apply_create(target, body, strict, dry)
                if created is not None:
                    return created
            current = self.store.require(rtype, target.namespace, target.name)
            if method == "PUT":
                if not isinstance(body, dict):
                    raise ApiError(400, "BadRequest", "the body must be an object")
                self._check_kind(rtype, body)
                new = body
            elif method == "PATCH":
                new = apply_patch(current, body, request.content_type, builtin=rtype.builtin)
                sent = (
                    (body.get("metadata") or {}).get("resourceVersion")
                    if isinstance(body, dict)
                    else None
                )
                if isinstance(body, dict) and not sent:
                    # A merge patch without a resourceVersion applies to the latest version.
                    new.setdefault("metadata", {})["resourceVersion"] = current["metadata"][
                        "resourceVersion"
                    ]
            else:
                raise ApiError(405, "MethodNotAllowed", f"{method} is not supported")
            if target.subresource != "status":
                self._validate(rtype, new, strict)
            obj = self.store.replace(
                rtype, current, new, subresource=target.subresource, commit=not dry
            )
            return _json(clone(obj))

    def _apply_create(
        self, target: Target, body: Any, strict: bool, dry: bool
    ) -> web.Response | None:
        """Create the object a server-side apply names when it does not exist yet (None: it
        does, and the apply patches it)."""
        rtype = target.rtype
        assert target.name is not None
        if self.store.find(rtype, target.namespace, target.name) is not None:
            return None
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "the apply configuration must be an object")
        self._check_kind(rtype, body)
        named = (body.get("metadata") or {}).get("name")
        if named != target.name:
            raise ApiError(
                400,
                "BadRequest",
                f"the name of the object ({named}) does not match the name on the URL "
                f"({target.name})",
            )
        self._require_namespace(target)
        self._validate(rtype, body, strict)
        obj = self.store.create(rtype, target.namespace, body, commit=not dry)
        return _json(clone(obj), 201)

    @staticmethod
    def _check_kind(rtype: ResourceType, body: Json) -> None:
        kind = body.get("kind")
        if kind not in (None, rtype.kind):
            raise ApiError(
                400,
                "BadRequest",
                f"the body's kind {kind!r} does not match the resource {rtype.plural!r}",
            )

    def _require_namespace(self, target: Target) -> None:
        if not target.rtype.namespaced or target.namespace is None:
            return
        namespaces = self.store.types.get("", "namespaces")
        if namespaces is not None and self.store.find(namespaces, None, target.namespace) is None:
            raise ApiError(404, "NotFound", f'namespaces "{target.namespace}" not found')

    @staticmethod
    def _validate(rtype: ResourceType, obj: Json, strict: bool) -> None:
        full = {**obj, "apiVersion": rtype.api_version, "kind": rtype.kind}
        if rtype.has_status:
            full.pop("status", None)  # the stored status is kept: a write of the object has none
        if rtype.builtin:
            problems = invalid_fields(full, strict=strict)
        elif rtype.schema is not None:
            problems = invalid_custom_fields(full, rtype.schema, strict=strict)
        else:
            return
        if problems:
            name = (obj.get("metadata") or {}).get("name", "")
            group = f".{rtype.group}" if rtype.group else ""
            raise ApiError(
                422, "Invalid", f'{rtype.kind}{group} "{name}" is invalid: [{", ".join(problems)}]'
            )

    @staticmethod
    async def _delete_options(request: web.Request) -> Json:
        if not request.can_read_body:
            return {}
        with contextlib.suppress(ValueError):
            options = await request.json()
            if isinstance(options, dict):
                return options
        return {}

    def _delete_collection(self, request: web.Request, target: Target, dry: bool) -> web.Response:
        items = self._matching(request, target)
        deleted = []
        for obj in items:
            meta = obj["metadata"]
            deleted.append(
                clone(
                    self.store.delete(
                        target.rtype, meta.get("namespace"), meta["name"], commit=not dry
                    )
                )
            )
        return _json(
            {
                "apiVersion": target.rtype.api_version,
                "kind": f"{target.rtype.kind}List",
                "metadata": {"resourceVersion": str(self.store.resource_version)},
                "items": deleted,
            }
        )

    def _matching(self, request: web.Request, target: Target) -> list[Json]:
        labels = request.query.get("labelSelector", "")
        fields = request.query.get("fieldSelector", "")
        out = []
        for obj in self.store.items(target.rtype, target.namespace):
            meta = obj["metadata"]
            if labels and not label_selector_matches(labels, meta.get("labels") or {}):
                continue
            if fields and not field_selector_matches(fields, obj):
                continue
            out.append(obj)
        return out

    def _list(self, request: web.Request, target: Target) -> web.Response:
        with self.store.lock:
            rv = str(self.store.resource_version)
            chosen, paging = _page(request.query, self._matching(request, target), rv)
            items = [clone(o) for o in chosen]
        if _wants_table(request):
            answer = table(target.rtype, items, rv, self.store.clock())
            answer.setdefault("metadata", {}).update(paging)
            return _json(answer)
        return _json(
            {
                "apiVersion": target.rtype.api_version,
                "kind": f"{target.rtype.kind}List",
                "metadata": {"resourceVersion": rv, **paging},
                "items": items,
            }
        )

    async def _watch(self, request: web.Request, target: Target) -> web.StreamResponse:
        query = request.query
        timeout = float(query.get("timeoutSeconds") or 0) or None
        bookmarks = query.get("allowWatchBookmarks") in ("1", "true")
        since = query.get("resourceVersion", "")
        initial = query.get("sendInitialEvents") in ("1", "true")
        labels = query.get("labelSelector", "")
        fields = query.get("fieldSelector", "")
        as_table = _wants_table(request)
        rtype = target.rtype
        now = self.store.clock

        def shown(obj: Json) -> Json:
            if as_table:
                return table(rtype, [obj], str(obj["metadata"]["resourceVersion"]), now())
            return obj

        response = web.StreamResponse(
            status=200, headers={"Content-Type": "application/json", "Cache-Control": "no-cache"}
        )
        response.enable_chunked_encoding()
        await response.prepare(request)
        pending: list[Json] = []
        with self.store.lock:
            if since in ("", "0") or initial:
                pending = [
                    {"type": "ADDED", "object": shown(clone(o))}
                    for o in self._matching(request, target)
                ]
                last = self.store.resource_version
            else:
                last = int(since)
                if self.store.expired(last):
                    gone = ApiError(410, "Expired", f"too old resource version: {last}")
                    pending = [{"type": "ERROR", "object": gone.status()}]
            if initial:
                pending.append(self._bookmark(rtype, self.store.resource_version, initial_end=True))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout if timeout else None
        try:
            for line in pending:
                await response.write(json.dumps(line).encode() + b"\n")
            if pending and pending[0]["type"] == "ERROR":
                return response
            while True:
                with self.store.lock:
                    changed = self.store.changed()
                    events = [
                        e
                        for e in self.store.events_after(last)
                        if e.group == rtype.group and e.plural == rtype.plural
                    ]
                    last = self.store.resource_version
                for event in events:
                    obj = event.obj
                    meta = obj["metadata"]
                    if target.namespace is not None and meta.get("namespace") != target.namespace:
                        continue
                    if labels and not label_selector_matches(labels, meta.get("labels") or {}):
                        continue
                    if fields and not field_selector_matches(fields, obj):
                        continue
                    line = {"type": event.type, "object": shown(obj)}
                    await response.write(json.dumps(line).encode() + b"\n")
                if deadline is not None and loop.time() >= deadline:
                    break
                if changed is None:
                    break
                wait = BOOKMARK_SECONDS
                if deadline is not None:
                    wait = min(wait, max(deadline - loop.time(), 0.0))
                try:
                    await asyncio.wait_for(changed.wait(), wait)
                except TimeoutError:
                    if bookmarks:
                        await response.write(
                            json.dumps(self._bookmark(rtype, last)).encode() + b"\n"
                        )
        except (ConnectionResetError, asyncio.CancelledError):
            return response
        with contextlib.suppress(ConnectionResetError):
            await response.write_eof()
        return response

    @staticmethod
    def _bookmark(rtype: ResourceType, rv: int, *, initial_end: bool = False) -> Json:
        meta: Json = {"resourceVersion": str(rv)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        return {
            "type": "BOOKMARK",
            "object": {"apiVersion": rtype.api_version, "kind": rtype.kind, "metadata": meta},
        }

    # ---- subresources -------------------------------------------------------------------------
    async def _log(self, request: web.Request, target: Target) -> web.StreamResponse:
        assert target.name is not None and target.namespace is not None
        opts = logs.options(request.query)
        namespace, name = target.namespace, target.name

        def read() -> tuple[Json, list[logs.Entry]] | None:
            with self.store.lock:
                pod = self.store.find(target.rtype, namespace, name)
                if pod is None:
                    return None
                hook = self.hooks.pod_log
                return clone(pod), (hook(namespace, name) if hook is not None else None) or []

        found = read()
        if found is None:
            raise not_found(target.rtype, name)
        pod, entries = found
        chosen = logs.select(pod, entries, opts, self.store.clock())
        body = logs.render(chosen, opts)
        if opts.limit_bytes is not None:
            body = body[: opts.limit_bytes]
        if not opts.follow or opts.previous:
            return web.Response(body=body, content_type="text/plain")
        response = web.StreamResponse(
            status=200, headers={"Content-Type": "text/plain", "Cache-Control": "no-cache"}
        )
        response.enable_chunked_encoding()
        await response.prepare(request)
        sent = len(body)
        last = chosen[-1] if chosen else (self.store.clock(), "")
        seen = sum(1 for e in entries if e[0] == last[0]) if chosen else 0
        try:
            await response.write(body)
            while opts.limit_bytes is None or sent < opts.limit_bytes:
                await asyncio.sleep(FOLLOW_SECONDS)
                found = read()
                if found is None:
                    break
                _, entries = found
                fresh = [e for e in entries if e[0] > last[0]]
                same = [e for e in entries if e[0] == last[0]]
                fresh = same[seen:] + fresh
                if not fresh:
                    continue
                last = fresh[-1]
                seen = sum(1 for e in entries if e[0] == last[0])
                chunk = logs.render(fresh, opts)
                if opts.limit_bytes is not None:
                    chunk = chunk[: opts.limit_bytes - sent]
                sent += len(chunk)
                await response.write(chunk)
            await response.write_eof()
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        return response

    async def _token(self, request: web.Request, target: Target) -> web.Response:
        assert target.name is not None and target.namespace is not None
        if request.method != "POST":
            raise ApiError(405, "MethodNotAllowed", "a TokenRequest is created (POST)")
        body = await self._body(request) or {}
        spec = body.get("spec") or {} if isinstance(body, dict) else {}
        seconds = int(spec.get("expirationSeconds") or 3600)
        if seconds < 600:
            raise ApiError(
                422,
                "Invalid",
                "TokenRequest.authentication.k8s.io is invalid: spec.expirationSeconds: Invalid "
                f"value: {seconds}: may not specify a duration less than 10 minutes",
            )
        with self.store.lock:
            account = self.store.require(target.rtype, target.namespace, target.name)
            uid = str(account["metadata"].get("uid", ""))
        token, expires = self.authenticator.issue(target.namespace, target.name, uid, seconds)
        return _json(
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "metadata": {"name": target.name, "namespace": target.namespace},
                "spec": {"audiences": spec.get("audiences") or [], "expirationSeconds": seconds},
                "status": {"token": token, "expirationTimestamp": rfc3339(expires)},
            },
            201,
        )

    async def _proxy(self, request: web.Request, target: Target) -> web.StreamResponse:
        assert target.name is not None and target.namespace is not None
        service, _, port = target.name.partition(":")
        with self.store.lock:
            self.store.require(target.rtype, target.namespace, service)
        if self.hooks.service_proxy is not None:
            answer = await self.hooks.service_proxy(
                request, target.namespace, service, port, "/" + target.rest
            )
            if answer is not None:
                return answer
        raise ApiError(
            503,
            "ServiceUnavailable",
            f'no endpoints available for service "{target.name}" (nothing serves it here)',
        )

    async def _scale(self, request: web.Request, target: Target) -> web.Response:
        assert target.name is not None
        rtype = target.rtype

        def scale_of(obj: Json) -> Json:
            meta = obj["metadata"]
            selector = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
            return {
                "apiVersion": "autoscaling/v1",
                "kind": "Scale",
                "metadata": {
                    k: meta[k]
                    for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                    if k in meta
                },
                "spec": {"replicas": int((obj.get("spec") or {}).get("replicas", 1))},
                "status": {
                    "replicas": int((obj.get("status") or {}).get("replicas", 0)),
                    "selector": ",".join(f"{k}={v}" for k, v in sorted(selector.items())),
                },
            }

        if request.method == "GET":
            with self.store.lock:
                return _json(scale_of(self.store.require(rtype, target.namespace, target.name)))
        body = await self._body(request)
        with self.store.lock:
            current = self.store.require(rtype, target.namespace, target.name)
            scale = scale_of(current)
            if request.method == "PUT":
                new_scale = body if isinstance(body, dict) else {}
            elif request.method == "PATCH":
                new_scale = apply_patch(scale, body, request.content_type, builtin=True)
            else:
                raise ApiError(405, "MethodNotAllowed", f"{request.method} is not supported")
            replicas = (new_scale.get("spec") or {}).get("replicas")
            if not isinstance(replicas, int) or replicas < 0:
                raise ApiError(
                    422,
                    "Invalid",
                    f'Scale.autoscaling "{target.name}" is invalid: spec.replicas: '
                    f"Invalid value: {replicas!r}: must be greater than or equal to 0",
                )
            updated = clone(current)
            updated.setdefault("spec", {})["replicas"] = replicas
            obj = self.store.replace(rtype, current, updated)
            return _json(scale_of(obj))

    async def _review(self, request: web.Request, user: User, target: Target) -> web.Response:
        if request.method != "POST" or target.rtype.plural != "selfsubjectaccessreviews":
            raise ApiError(405, "MethodNotAllowed", f"{target.rtype.plural} are only created")
        body = await self._body(request) or {}
        with self.store.lock:
            return _json(access_review(self.authorizer, user, body), 201)
