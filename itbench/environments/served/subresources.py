"""The subresources of the served API that are not plain object writes: a pod's log (follow
included), a ServiceAccount's TokenRequest, a Service's proxy, the scale subresource and access
reviews."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from itbench.environments.served import logs
from itbench.environments.served.access import Authenticator, Authorizer, User, access_review
from itbench.environments.served.patches import apply_patch
from itbench.environments.served.store import ApiError, ObjectStore, not_found
from itbench.environments.served.wire import Entry, Hooks, Target, json_response, read_body
from itbench.environments.sim.cluster import rfc3339
from itbench.environments.sim.objects import clone

Json = dict[str, Any]

FOLLOW_SECONDS = 0.5
"""How often a followed log (`kubectl logs -f`) looks for new lines."""


@dataclass
class Subresources:
    """The handlers of the subresources, over the API's store, credentials and hooks."""

    store: ObjectStore
    authenticator: Authenticator
    authorizer: Authorizer
    hooks: Hooks

    async def log(self, request: web.Request, target: Target) -> web.StreamResponse:
        assert target.name is not None and target.namespace is not None
        opts = logs.options(request.query)
        namespace, name = target.namespace, target.name

        def read() -> tuple[Json, list[Entry]] | None:
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

    async def token(self, request: web.Request, target: Target) -> web.Response:
        assert target.name is not None and target.namespace is not None
        if request.method != "POST":
            raise ApiError(405, "MethodNotAllowed", "a TokenRequest is created (POST)")
        body = await read_body(request) or {}
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
        return json_response(
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "metadata": {"name": target.name, "namespace": target.namespace},
                "spec": {"audiences": spec.get("audiences") or [], "expirationSeconds": seconds},
                "status": {"token": token, "expirationTimestamp": rfc3339(expires)},
            },
            201,
        )

    async def proxy(self, request: web.Request, target: Target) -> web.StreamResponse:
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

    async def scale(self, request: web.Request, target: Target) -> web.Response:
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
                return json_response(
                    scale_of(self.store.require(rtype, target.namespace, target.name))
                )
        body = await read_body(request)
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
            return json_response(scale_of(obj))

    async def review(self, request: web.Request, user: User, target: Target) -> web.Response:
        if request.method != "POST" or target.rtype.plural != "selfsubjectaccessreviews":
            raise ApiError(405, "MethodNotAllowed", f"{target.rtype.plural} are only created")
        body = await read_body(request) or {}
        with self.store.lock:
            return json_response(access_review(self.authorizer, user, body), 201)
