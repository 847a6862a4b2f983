"""A small fake Environment and a Gateway that serves it through a real gateway app over HTTP."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from copy import deepcopy
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import uvicorn

from itbench.client import InProcessTransport, ITBenchClient
from itbench.core.faults import ObjectChange
from itbench.core.models.base import TelemetryToggles
from itbench.core.models.observations import (
    ActionResult,
    ActionVerb,
    AgentAction,
    Alert,
    AlertInterval,
    AlertState,
    EnvironmentSnapshot,
)
from itbench.core.models.scenario import Scenario
from itbench.environments.sim.environment import SimEnvironment
from itbench.gateway.app import create_app
from itbench.gateway.metrics import GatewayMetrics
from itbench.gateway.sessions import SessionRegistry, TrialSession

T0 = datetime(2026, 1, 1, tzinfo=UTC)
NS = "otel-demo"


def _deployment(name: str, image: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": NS,
            "creationTimestamp": T0.isoformat(),
            "labels": {"app.kubernetes.io/component": name},
        },
        "spec": {
            "replicas": 1,
            "template": {"spec": {"containers": [{"name": name, "image": image}]}},
        },
        "status": {"readyReplicas": 1, "updatedReplicas": 1, "availableReplicas": 1},
    }


def _pod(name: str, owner: str, ready: bool) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NS,
            "creationTimestamp": T0.isoformat(),
            "labels": {"app.kubernetes.io/component": owner},
            "ownerReferences": [{"kind": "ReplicaSet", "name": f"{owner}-1", "uid": owner}],
        },
        "spec": {"nodeName": "node-1", "containers": [{"name": owner}]},
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {
                    "name": owner,
                    "ready": ready,
                    "restartCount": 0 if ready else 4,
                    "state": {} if ready else {"waiting": {"reason": "ImagePullBackOff"}},
                }
            ],
        },
    }


class FakeEnvironment:
    """Two services (frontend -> cart); a bad cart image makes the cart's pod fail and alert."""

    def __init__(self, namespace: str = NS) -> None:
        self.namespace = namespace
        self.time = T0
        self.good_image = "ghcr.io/open-telemetry/demo:2.0.0-cart"
        self.objects: dict[str, list[dict[str, Any]]] = {
            "Deployment": [
                _deployment("frontend", "ghcr.io/open-telemetry/demo:2.0.0-frontend"),
                _deployment("cart", self.good_image),
            ],
            "Service": [
                {
                    "kind": "Service",
                    "metadata": {"name": n, "namespace": namespace},
                    "spec": {"selector": {"app.kubernetes.io/component": n}, "ports": []},
                }
                for n in ("frontend", "cart")
            ],
            "Node": [{"kind": "Node", "metadata": {"name": "node-1"}, "status": {}}],
            "ConfigMap": [
                {"kind": "ConfigMap", "metadata": {"name": "flagd-config", "namespace": namespace}}
            ],
        }
        self.actions: list[AgentAction] = []
        self.advanced: list[float] = []
        self.injected: list[str] = []

    # time
    def now(self) -> datetime:
        return self.time

    def advance(self, seconds: float) -> None:
        self.advanced.append(seconds)
        self.time += timedelta(seconds=seconds)

    # lifecycle
    def provision(self) -> None:
        return None

    def snapshot(self) -> EnvironmentSnapshot:
        return EnvironmentSnapshot(time=self.time, alert_rules_fingerprint="x")

    def inject(self, key: str, changes: list[ObjectChange]) -> bool:
        if key in self.injected:
            return False
        self.injected.append(key)
        self._cart()["spec"]["template"]["spec"]["containers"][0]["image"] = "bad:image"
        return True

    def remove(self, key: str) -> bool:
        self._cart()["spec"]["template"]["spec"]["containers"][0]["image"] = self.good_image
        return key in self.injected

    def injections(self) -> list[str]:
        return list(self.injected)

    def _cart(self) -> dict[str, Any]:
        return next(d for d in self.objects["Deployment"] if d["metadata"]["name"] == "cart")

    def broken(self) -> bool:
        return bool(
            self._cart()["spec"]["template"]["spec"]["containers"][0]["image"] != self.good_image
        )

    # observe
    def alerts(self) -> list[Alert]:
        if not self.broken():
            return []
        return [
            Alert(
                alertname="KubePodNotReady",
                labels={"namespace": self.namespace, "deployment": "cart", "severity": "warning"},
                state=AlertState.FIRING,
                active_at=T0,
                value=1.0,
            )
        ]

    def alert_history(self) -> list[AlertInterval]:
        return []

    def query_metrics(self, query: str, time: datetime) -> dict[str, Any]:
        if "(" in query and ")" not in query:
            raise ValueError("1:5: parse error: unclosed left parenthesis")
        return {
            "resultType": "vector",
            "result": [{"metric": {"service_name": "cart"}, "value": [time.timestamp(), "0.5"]}],
        }

    def query_metrics_range(
        self, query: str, start: datetime, end: datetime, step_seconds: float
    ) -> dict[str, Any]:
        points = int((end - start).total_seconds() // step_seconds) + 1
        return {
            "resultType": "matrix",
            "result": [
                {
                    "metric": {"service_name": "cart"},
                    "values": [
                        [start.timestamp() + i * step_seconds, "0.5"] for i in range(points)
                    ],
                }
            ],
        }

    def query_logs(self, query: str, start: datetime, end: datetime, limit: int) -> dict[str, Any]:
        return {
            "resultType": "streams",
            "result": [
                {
                    "stream": {"service_name": "cart"},
                    "values": [[str(int(end.timestamp() * 1e9)), "error: pull failed"]][:limit],
                }
            ],
        }

    def search_traces(
        self,
        service: str,
        operation: str | None,
        tags: dict[str, str],
        start: datetime,
        end: datetime,
        limit: int,
    ) -> list[dict[str, Any]]:
        if service not in ("frontend", "cart"):
            raise ValueError(f"unknown service {service!r}")
        return [{"traceID": "abc", "spans": [], "processes": {}, "tags": tags}][:limit]

    def get_objects(
        self, kind: str, name: str | None = None, *, copy: bool = True
    ) -> list[dict[str, Any]]:
        if kind == "Pod":
            pods = [
                _pod("frontend-1-aaaaa", "frontend", True),
                _pod("cart-1-bbbbb", "cart", not self.broken()),
            ]
            return [p for p in pods if name is None or p["metadata"]["name"] == name]
        items = self.objects.get(kind, [])
        return [deepcopy(o) for o in items if name is None or o["metadata"]["name"] == name]

    def service_calls(self) -> list[tuple[str, str]]:
        return [("frontend", "cart")]

    def events(
        self, kind: str | None = None, name: str | None = None, *, copy: bool = True
    ) -> list[dict[str, Any]]:
        if not self.broken():
            return []
        return [
            {
                "metadata": {"namespace": self.namespace},
                "involvedObject": {"kind": "Pod", "name": "cart-1-bbbbb"},
                "reason": "Failed",
                "type": "Warning",
                "message": "Failed to pull image bad:image",
            }
        ]

    def pod_logs(self, pod: str, tail: int) -> list[str]:
        return [f"{pod} line {i}" for i in range(tail)][-tail:]

    # act
    def act(self, action: AgentAction) -> ActionResult:
        self.actions.append(action)
        if action.verb == ActionVerb.SET_IMAGE and action.name == "cart" and action.image:
            self._cart()["spec"]["template"]["spec"]["containers"][0]["image"] = action.image
            return ActionResult(
                ok=True, message="deployment.apps/cart image updated", outcome="applied"
            )
        if action.verb == ActionVerb.ROLLOUT_UNDO and action.name == "cart":
            self._cart()["spec"]["template"]["spec"]["containers"][0]["image"] = self.good_image
            return ActionResult(
                ok=True, message="deployment.apps/cart rolled back", outcome="applied"
            )
        return ActionResult(
            ok=False, message=f'{action.kind} "{action.name}" not found', outcome="error"
        )


def scenario(domain: str = "SRE", allow: bool = False) -> Scenario:
    """A scenario whose ground truth names the cart Deployment."""
    spec: dict[str, Any] = {
        "description": "The cart runs an image that does not exist.",
        "domain": domain,
        "class": "CorruptImage",
        "faults": [{"id": "kubernetes.nonexistent-image", "args": {"workload": "cart"}}],
        "triggers": {
            "alerts": [{"alertname": "KubePodNotReady", "labels": {"deployment": "cart"}}]
        },
        "groundTruth": {
            "entities": [
                {"id": "cart", "kind": "Deployment", "name": "cart", "rootCause": True},
                {"id": "fe", "kind": "Service", "name": "frontend"},
            ],
            "propagation": [{"source": "cart", "target": "fe", "effect": "errors"}],
            "mitigations": [
                {
                    "description": "undo the rollout",
                    "steps": [{"action": "rollout-undo", "kind": "Deployment", "name": "cart"}],
                }
            ],
        },
    }
    if domain == "CISO":
        spec.pop("faults")
        spec["triggers"] = {}
    return Scenario.model_validate({"metadata": {"name": "corrupt-image-cart"}, "spec": spec})


class Gateway:
    """A registry, its app, and helpers to open trial sessions on fake environments."""

    def __init__(self, *, inline: bool = False, metrics: GatewayMetrics | None = None) -> None:
        self.registry = SessionRegistry()
        self.app = create_app(self.registry, inline=inline, metrics=metrics)
        self.http = httpx.Client(transport=InProcessTransport(self.app), base_url="http://gw")

    def open(
        self,
        trial_id: str = "t1",
        *,
        ready: bool = True,
        allow_oracle: bool = False,
        deadline_seconds: float = 600.0,
        domain: str = "SRE",
        telemetry: TelemetryToggles | None = None,
        agent: str = "agent-a",
    ) -> TrialSession:
        env = FakeEnvironment()
        env.inject("fault", [])
        session = TrialSession(
            trial_id=trial_id,
            token=f"token-{trial_id}",
            scenario=scenario(domain),
            env=env,
            telemetry=telemetry or TelemetryToggles(),
            agent_name=agent,
            allow_oracle=allow_oracle,
        )
        self.registry.open(session)
        if ready:
            self.registry.mark_ready(trial_id, env.now() + timedelta(seconds=deadline_seconds))
        return session

    def open_sim(self, trial_id: str = "sim", *, seed: int = 7) -> TrialSession:
        """A Ready session on the real simulator (provisioned, no fault), for inputs that only
        the twin's own engines and object model exercise."""
        env = SimEnvironment(seed=seed, namespace=NS)
        env.provision()
        env.advance(600)
        session = TrialSession(
            trial_id=trial_id,
            token=f"token-{trial_id}",
            scenario=scenario(),
            env=env,
            telemetry=TelemetryToggles(),
            agent_name="agent-a",
        )
        self.registry.open(session)
        self.registry.mark_ready(trial_id, env.now() + timedelta(hours=10))
        return session

    def client(self, session: TrialSession) -> ITBenchClient:
        c = ITBenchClient.in_process(self.app, session.token)
        c.use_trial(session.trial_id)
        return c

    def headers(self, session: TrialSession) -> dict[str, str]:
        return {"Authorization": f"Bearer {session.token}"}


class _ListeningServer(uvicorn.Server):
    """uvicorn that signals once it listens."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.listening = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.listening.set()


@contextmanager
def served(app: Any, *, timeout_keep_alive: int = 5) -> Iterator[str]:
    """Serve an app with uvicorn on an ephemeral loopback port; yields its base URL."""
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        log_level="warning",
        timeout_keep_alive=timeout_keep_alive,
    )
    server = _ListeningServer(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        if not server.listening.wait(timeout=60):
            raise RuntimeError("the test server did not start listening")
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
