"""A served twin: the Kubernetes API, the telemetry endpoints, the clock and (optionally) a real
Prometheus, wired together; `itbench twin serve` runs one and writes its kubeconfig.

The API holds the twin's shop (its namespace, nodes and classes) and, beside it, whatever else a
cluster holds: namespaces, RBAC, Leases, Secrets, CRDs and their objects. The stack's Services
(Prometheus, Loki's gateway, Jaeger, flagd) answer through the API server's Service proxy as on a
cluster, and directly on their own ports, written into the kubeconfig's `itbench.io/twin`
extension with the clock's speed and origin.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import socket
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from aiohttp import web

from itbench import stack
from itbench.environments.kube.endpoints import (
    flagd_service,
    jaeger_service,
    loki_service,
    prometheus_service,
)
from itbench.environments.served.access import Authenticator, Authorizer
from itbench.environments.served.kubeapi import KubeApi
from itbench.environments.served.prometheus import PrometheusProcess, find_prometheus
from itbench.environments.served.resources import ResourceTypes, builtin_types
from itbench.environments.served.store import ObjectStore
from itbench.environments.served.telemetry import TelemetryEndpoints
from itbench.environments.served.tls import Certificates, issue
from itbench.environments.served.twin import TwinBackend, TwinClock
from itbench.environments.served.wire import Hooks
from itbench.environments.sim.environment import SimEnvironment
from itbench.environments.sim.objects import KIND_INFO

log = logging.getLogger(__name__)

Json = dict[str, Any]

EXTENSION = "itbench.io/twin"
"""Name of the kubeconfig cluster extension that describes a served twin."""
RELEASE_BUILD = {
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2025-04-22T15:56:13Z",
    "goVersion": "go1.23.8",
    "compiler": "gc",
    "platform": "linux/amd64",
}
"""The rest of `/version`, as kube-apiserver reports it (the pinned release's tag date and Go
toolchain; no commit of ours): the official client, and so a Kopf operator probing clusters
through it, refuses a `/version` without any of these fields."""
PLATFORM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _crd(kind: str, group: str, version: str, plural: str, schema: Json) -> Json:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {
                "plural": plural,
                "singular": kind.lower(),
                "kind": kind,
                "listKind": f"{kind}List",
            },
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": {"status": {}} if group == "chaos-mesh.org" else {},
                }
            ],
        },
    }


def stack_crds() -> list[Json]:
    """The CRDs of the stack's custom kinds the twin models (Chaos Mesh with the pinned schemas,
    the Prometheus Operator's PrometheusRule and ServiceMonitor)."""
    chaos = stack.snapshot("chaos-mesh.yaml")["kinds"]
    out = []
    for kind, (api_version, resource, _) in KIND_INFO.items():
        group, _, version = api_version.rpartition("/")
        if group == "chaos-mesh.org":
            schema = chaos[kind]["schema"]
        elif group == "monitoring.coreos.com":
            schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        else:
            continue
        out.append(_crd(kind, group, version, resource.split(".", 1)[0], schema))
    return out


def _service(ref_namespace: str, name: str, port: int) -> Json:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": ref_namespace},
        "spec": {"type": "ClusterIP", "ports": [{"name": "http", "port": port, "protocol": "TCP"}]},
    }


@dataclass
class ServedCluster:
    """One served twin.

    Attributes:
        env: The twin (provisioned by `start` if it is not).
        speed: Its clock's virtual seconds per wall second.
        host: Address to listen on.
        api_port: Port of the Kubernetes API (0: any free port).
        telemetry_port: Port of /metrics, Loki and OFREP (0: any free port).
        jaeger_port: Port of Jaeger's query API (0: any free port).
        prometheus: Run a real Prometheus beside it: a path to the binary, "" to find it on
            PATH, None for none.
        prometheus_port: Its port (0: any free port).
        workdir: Where Prometheus keeps its files (None: a temporary directory).
    """

    env: SimEnvironment
    speed: float = 1.0
    host: str = "127.0.0.1"
    api_port: int = 0
    telemetry_port: int = 0
    jaeger_port: int = 0
    prometheus: str | None = None
    prometheus_port: int = 0
    workdir: Path | None = None
    store: ObjectStore = field(init=False)
    clock: TwinClock = field(init=False)
    admin_token: str = field(init=False, default="")
    certificates: Certificates | None = field(init=False, default=None)
    _loop: asyncio.AbstractEventLoop | None = field(init=False, default=None)
    _thread: threading.Thread | None = field(init=False, default=None)
    _runners: list[web.AppRunner] = field(init=False, default_factory=list)
    _started: threading.Event = field(init=False, default_factory=threading.Event)
    _prometheus: PrometheusProcess | None = field(init=False, default=None)
    _tmp: Any = field(init=False, default=None)
    _session: aiohttp.ClientSession | None = field(init=False, default=None)

    # ---- lifecycle ----------------------------------------------------------------------------
    def start(self) -> ServedCluster:
        """Provision the twin, serve it and start its clock (and Prometheus)."""
        self.env.provision()
        self.clock = TwinClock(self.env, speed=self.speed)
        self.store = ObjectStore(ResourceTypes(builtin_types()), self.clock.now, self.clock.lock)
        backend = TwinBackend(self.env, self.store)
        self.store.backend = backend
        with self.store.lock:
            self._seed()
            backend.sync()
        self.clock.after_step += [backend.sync, self._stepped]
        authenticator = Authenticator(self._account_uid, self.clock.now)
        self.admin_token = authenticator.admin_token()
        authorizer = Authorizer(
            lambda plural, ns: self.store.of(plural, "rbac.authorization.k8s.io", ns)
        )
        pins = stack.pins()
        version = str(pins["kubernetes"]["version"])
        major, minor = version.lstrip("v").split(".")[:2]
        self.kube = KubeApi(
            self.store,
            authenticator,
            authorizer,
            version={
                "major": major,
                "minor": minor,
                "gitVersion": f"{version}+itbench-twin",
                **RELEASE_BUILD,
            },
            hooks=Hooks(pod_log=self._pod_log, service_proxy=self._proxy),
        )
        self.telemetry = TelemetryEndpoints(self.env, self.store.lock, self.clock.now)
        self.api_port = self.api_port or free_port()
        self.telemetry_port = self.telemetry_port or free_port()
        self.jaeger_port = self.jaeger_port or free_port()
        self.certificates = issue(self.host)
        self._thread = threading.Thread(target=self._serve, name="served-twin", daemon=True)
        self._thread.start()
        if not self._started.wait(15):
            raise RuntimeError("the served twin did not start")
        if self.prometheus is not None:
            self._start_prometheus()
        self.clock.start()
        return self

    def _seed(self) -> None:
        types = self.store.types
        namespaces = types.get("", "namespaces")
        assert namespaces is not None
        wanted = {*PLATFORM_NAMESPACES}
        for ref in (prometheus_service(), loki_service(), jaeger_service()):
            wanted.add(ref.namespace)
        wanted.add(str(stack.chart_pin("chaos-mesh")["namespace"]))
        for name in sorted(wanted - {self.env.namespace}):
            self.store.create(
                namespaces,
                None,
                {"metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}}},
            )
        crds = types.get("apiextensions.k8s.io", "customresourcedefinitions")
        assert crds is not None
        for crd in stack_crds():
            self.store.create(crds, None, crd)
        services = types.get("", "services")
        assert services is not None
        for ref in (prometheus_service(), loki_service(), jaeger_service()):
            self.store.create(services, ref.namespace, _service(ref.namespace, ref.name, ref.port))

    def _account_uid(self, namespace: str, name: str) -> str | None:
        rtype = self.store.types.get("", "serviceaccounts")
        if rtype is None:
            return None
        with self.store.lock:
            found = self.store.find(rtype, namespace, name)
        return str(found["metadata"].get("uid", "")) if found is not None else None

    def _serve(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        self.store.bind(loop)

        async def setup() -> None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60))
            assert self.certificates is not None
            tls = self.certificates.server_context()
            for app, port, context in (
                (self.kube.application(), self.api_port, tls),
                (self.telemetry.application(), self.telemetry_port, None),
                (self.telemetry.jaeger_application(), self.jaeger_port, None),
            ):
                runner = web.AppRunner(
                    app, handle_signals=False, access_log=None, shutdown_timeout=0.5
                )
                await runner.setup()
                await web.TCPSite(runner, self.host, port, ssl_context=context).start()
                self._runners.append(runner)

        loop.run_until_complete(setup())
        self._started.set()
        try:
            loop.run_forever()
        finally:
            loop.close()

    def _start_prometheus(self) -> None:
        binary = self.prometheus or find_prometheus()
        if not binary:
            raise RuntimeError(
                "no prometheus binary found (apt-get install prometheus, or pass its path)"
            )
        if self.workdir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="itbench-twin-")
            self.workdir = Path(self._tmp.name)
        self._prometheus = PrometheusProcess(
            binary=binary,
            workdir=self.workdir / "prometheus",
            target=f"{self.host}:{self.telemetry_port}",
            port=self.prometheus_port or free_port(),
            speed=self.speed,
        )
        self.prometheus_port = self._prometheus.port
        self._prometheus.start(self._rules())

    def _rules(self) -> list[Json]:
        rtype = self.store.types.get("monitoring.coreos.com", "prometheusrules")
        if rtype is None:
            return []
        with self.store.lock:
            return [dict(r) for r in self.store.items(rtype)]

    def _stepped(self) -> None:
        if self._prometheus is not None and self._prometheus.write_rules(self._rules()):
            threading.Thread(target=self._prometheus.reload, daemon=True).start()

    def stop(self) -> None:
        """Stop the clock, Prometheus and the servers."""
        if hasattr(self, "clock"):
            self.clock.stop()
        if self._prometheus is not None:
            self._prometheus.stop()
        loop = self._loop
        if loop is not None and self._thread is not None:

            async def shutdown() -> None:
                for runner in self._runners:
                    await runner.cleanup()
                if self._session is not None:
                    await self._session.close()

            future = asyncio.run_coroutine_threadsafe(shutdown(), loop)
            with contextlib.suppress(Exception):
                future.result(10)
            loop.call_soon_threadsafe(loop.stop)
            self._thread.join(10)
            self._loop = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> ServedCluster:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    # ---- addresses ----------------------------------------------------------------------------
    @property
    def api_url(self) -> str:
        """The Kubernetes API's URL (https, with the CA of `certificates`)."""
        return f"https://{self.host}:{self.api_port}"

    @property
    def telemetry_url(self) -> str:
        """Base URL of /metrics, Loki and OFREP."""
        return f"http://{self.host}:{self.telemetry_port}"

    @property
    def jaeger_url(self) -> str:
        """Base URL of Jaeger's query API."""
        return f"http://{self.host}:{self.jaeger_port}"

    @property
    def prometheus_url(self) -> str | None:
        """The real Prometheus' URL (None when none runs)."""
        return self._prometheus.url if self._prometheus is not None else None

    def extension(self) -> Json:
        """What the kubeconfig's `itbench.io/twin` extension says about this twin."""
        out: Json = {
            "speed": self.speed,
            "clusterOrigin": self.clock.virtual_origin,
            "wallOrigin": self.clock.wall_origin,
            "namespace": self.env.namespace,
            "loki": self.telemetry_url,
            "jaeger": self.jaeger_url,
            "flagd": self.telemetry_url,
        }
        if self.prometheus_url is not None:
            out["prometheus"] = self.prometheus_url
        return out

    def kubeconfig(self, path: Path | None = None, *, name: str = "itbench-twin") -> Json:
        """The kubeconfig of this twin (admin credentials), written to path when given."""
        config: Json = {
            "apiVersion": "v1",
            "kind": "Config",
            "preferences": {},
            "clusters": [
                {
                    "name": name,
                    "cluster": {
                        "server": self.api_url,
                        "certificate-authority-data": base64.b64encode(
                            self.certificates.ca_pem if self.certificates is not None else b""
                        ).decode(),
                        "extensions": [{"name": EXTENSION, "extension": self.extension()}],
                    },
                }
            ],
            "users": [{"name": f"{name}-admin", "user": {"token": self.admin_token}}],
            "contexts": [
                {
                    "name": name,
                    "context": {
                        "cluster": name,
                        "user": f"{name}-admin",
                        "namespace": self.env.namespace,
                    },
                }
            ],
            "current-context": name,
        }
        if path is not None:
            path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
            path.chmod(0o600)
        return config

    # ---- hooks ----------------------------------------------------------------------------------
    def _pod_log(self, namespace: str, pod: str) -> list[tuple[float, str]] | None:
        if namespace != self.env.namespace or not self.env.telemetry.logs:
            return None
        return [(entry.t, entry.line) for entry in self.env.log_book.entries(pod)]

    def _upstream(self, namespace: str, service: str) -> str | None:
        refs = {
            (r.namespace, r.name): url
            for r, url in (
                (prometheus_service(), self.prometheus_url),
                (loki_service(), self.telemetry_url),
                (jaeger_service(), self.jaeger_url),
                (flagd_service(self.env.namespace), self.telemetry_url),
            )
        }
        return refs.get((namespace, service))

    async def _proxy(
        self, request: web.Request, namespace: str, service: str, port: str, path: str
    ) -> web.StreamResponse | None:
        base = self._upstream(namespace, service)
        if base is None or self._session is None:
            return None
        body = await request.read()
        headers = {
            k: v for k, v in request.headers.items() if k.lower() in ("content-type", "accept")
        }
        try:
            async with self._session.request(
                request.method,
                base + path,
                params=request.query,
                data=body or None,
                headers=headers,
            ) as upstream:
                payload = await upstream.read()
                return web.Response(
                    body=payload,
                    status=upstream.status,
                    content_type=upstream.content_type,
                )
        except aiohttp.ClientError as exc:
            return web.json_response(
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "status": "Failure",
                    "reason": "ServiceUnavailable",
                    "message": f"error trying to reach service: {exc}",
                    "code": 503,
                },
                status=503,
            )
