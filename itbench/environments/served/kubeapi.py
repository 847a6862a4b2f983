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
from email.utils import formatdate
from typing import Any

from aiohttp import web

from itbench.environments.served.access import (
    Attributes,
    Authenticator,
    Authorizer,
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
from itbench.environments.served.store import ApiError, ObjectStore, qualified
from itbench.environments.served.subresources import Subresources
from itbench.environments.served.tables import table
from itbench.environments.served.validation import invalid_custom_fields, invalid_fields
from itbench.environments.served.wire import (
    Hooks,
    Target,
    json_response,
    read_body,
    wants_table,
)
from itbench.environments.sim.objects import clone

Json = dict[str, Any]

BOOKMARK_SECONDS = 5.0
MAX_BODY_BYTES = 16 * 1024 * 1024


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
        self.subresources = Subresources(store, authenticator, authorizer, self.hooks)
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
            return json_response(exc.status(), exc.code)
        except SelectorError as exc:
            return json_response(ApiError(400, "BadRequest", str(exc)).status(), 400)
        except PatchError as exc:
            reason = {415: "UnsupportedMediaType", 400: "BadRequest"}.get(exc.code, "Invalid")
            return json_response(ApiError(exc.code, reason, str(exc)).status(), exc.code)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            return json_response(ApiError(400, "BadRequest", f"invalid body: {exc}").status(), 400)

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
                return json_response(found)
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
            return await self.subresources.review(request, user, target)
        handler = {
            "log": self.subresources.log,
            "token": self.subresources.token,
            "proxy": self.subresources.proxy,
            "scale": self.subresources.scale,
        }.get(target.subresource or "")
        if handler is not None:
            return await handler(request, target)
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
            if wants_table(request):
                return json_response(table(rtype, [found], rv, self.store.clock()))
            return json_response(found)
        dry = request.query.get("dryRun") == "All"
        strict = request.query.get("fieldValidation") == "Strict"
        if method == "POST":
            if target.name is not None:
                raise ApiError(405, "MethodNotAllowed", "POST is not allowed on an object")
            body = await read_body(request)
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "the body must be an object")
            self._check_kind(rtype, body)
            with self.store.lock:
                self._require_namespace(target)
                self._validate(rtype, body, strict)
                obj = self.store.create(rtype, target.namespace, body, commit=not dry)
                return json_response(clone(obj), 201)
        if method == "DELETE":
            options = await self._delete_options(request)
            dry = dry or "All" in (options.get("dryRun") or [])
            with self.store.lock:
                if target.name is None:
                    return self._delete_collection(request, target, dry)
                obj = self.store.delete(rtype, target.namespace, target.name, commit=not dry)
                return json_response(clone(obj))
        if target.name is None:
            raise ApiError(405, "MethodNotAllowed", f"{method} is not allowed on a collection")
        body = await read_body(request)
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
            return json_response(clone(obj))

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
        return json_response(clone(obj), 201)

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
        return json_response(
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
        if wants_table(request):
            answer = table(target.rtype, items, rv, self.store.clock())
            answer.setdefault("metadata", {}).update(paging)
            return json_response(answer)
        return json_response(
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
        as_table = wants_table(request)
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
