"""The operator test lab: the loopback API with CRDs, kubectl, operator instances, fakes, waits."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kopf
import kubernetes
import yaml
from loopback import LoopbackApi

from itbench.core.runner.context import RunnerConfig
from itbench.environments.port import EnvironmentFailure
from itbench.gateway.sessions import SessionRegistry
from itbench.operator.app import run_operator
from itbench.operator.kubeapi import KubeApi, owner_reference
from itbench.operator.runtime import (
    EnvironmentFactory,
    EnvironmentRegistry,
    OperatorConfig,
    OperatorRuntime,
    TrialEvidence,
    simulator_environment,
)

ROOT = Path(__file__).resolve().parents[3]
CRDS = sorted((ROOT / "crds").glob("*.yaml"))
SCENARIOS = ROOT / "scenarios"
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
NS = "default"

FAST = OperatorConfig(
    trial_tick_seconds=0.02,
    run_tick_seconds=0.05,
    agent_tick_seconds=0.1,
    retry_seconds=0.1,
    steps_per_tick=8,
    agent_wall_seconds=60.0,
    gateway_url="http://gateway.test:8080",
    runner=RunnerConfig(),
)
"""Timer intervals short enough that a trial of virtual minutes takes well under a second."""


@dataclass
class Cluster:
    """The loopback API with a kubeconfig, the official client and kubectl."""

    server: LoopbackApi
    kubeconfig: Path
    api: KubeApi

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> str:
        """Run the real kubectl against the loopback API and return its stdout."""
        env = {
            "KUBECONFIG": str(self.kubeconfig),
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(self.kubeconfig.parent),
        }
        done = subprocess.run(
            [KUBECTL, *args], env=env, input=input, capture_output=True, text=True, timeout=60
        )
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {done.stderr}")
        return done.stdout if check else done.stdout + done.stderr

    def get(self, plural: str, name: str, namespace: str | None = NS) -> dict[str, Any] | None:
        """An ITBench object as stored."""
        return self.server.get(
            "itbench.io", plural, None if plural == "scenarios" else namespace, name
        )

    def objects(self, plural: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """ITBench objects as stored."""
        return self.server.objects("itbench.io", plural, namespace)

    def events(self, name: str, namespace: str = NS) -> list[dict[str, Any]]:
        """Events about an object, as posted."""
        events = [
            e
            for e in self.server.objects("", "events", namespace)
            if e["involvedObject"]["name"] == name
        ]
        return sorted(events, key=lambda e: int(e["metadata"]["resourceVersion"]))

    def apply_scenarios(self, *names: str) -> None:
        """`kubectl apply -f` the named scenario files from the catalog."""
        paths = [next(SCENARIOS.glob(f"*/{n}/scenario.yaml")) for n in names]
        args: list[str] = ["apply"]
        for path in paths:
            args += ["-f", str(path)]
        self.kubectl(*args)

    def apply(self, manifest: dict[str, Any] | str) -> str:
        """`kubectl apply -f -` a manifest."""
        text = manifest if isinstance(manifest, str) else yaml.safe_dump(manifest)
        return self.kubectl("apply", "-f", "-", input=text)


@dataclass
class OperatorHandle:
    """A running operator instance (a Kopf task in the test's event loop)."""

    task: asyncio.Task[None]
    runtime: OperatorRuntime

    async def kill(self) -> None:
        """Cancel the operator task, as a crash would end it."""
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


@dataclass
class Lab:
    """What outlives any one operator instance: the environments, sessions and evidence."""

    cluster: Cluster
    environments: EnvironmentRegistry
    sessions: SessionRegistry = field(default_factory=SessionRegistry)
    evidence: TrialEvidence = field(default_factory=TrialEvidence)
    operators: list[OperatorHandle] = field(default_factory=list)
    proxies: dict[str, ProxyEnvironment] = field(default_factory=dict)
    refuse_injection: list[bool] = field(default_factory=lambda: [False])

    async def start(
        self, config: OperatorConfig = FAST, liveness_endpoint: str | None = None
    ) -> OperatorHandle:
        """Start an operator instance against the loopback API."""
        runtime = OperatorRuntime(
            api=self.cluster.api,
            config=config,
            environments=self.environments,
            sessions=self.sessions,
            evidence=self.evidence,
        )
        connection = kopf.ConnectionInfo(server=self.cluster.server.url, insecure=True)
        ready = asyncio.Event()
        task = asyncio.create_task(
            run_operator(
                runtime,
                connection=connection,
                ready_flag=ready,
                liveness_endpoint=liveness_endpoint,
            )
        )
        await asyncio.wait_for(ready.wait(), 10)
        handle = OperatorHandle(task=task, runtime=runtime)
        self.operators.append(handle)
        return handle


class ProxyEnvironment:
    """A real simulator behind a switch: `reachable = False` makes every call fail, and
    `refuse_injection = True` makes injections silently not apply. It counts applied injections.
    """

    def __init__(self, inner: Any, *, refuse_injection: bool = False) -> None:
        self.inner = inner
        self.reachable = True
        self.refuse_injection = refuse_injection
        self.applied: dict[str, int] = {}

    def inject(self, key: str, changes: list[Any]) -> bool:
        self._check()
        if self.refuse_injection:
            return False
        applied = bool(self.inner.inject(key, changes))
        if applied:
            self.applied[key] = self.applied.get(key, 0) + 1
        return applied

    def _check(self) -> None:
        if not self.reachable:
            raise EnvironmentFailure("connection refused: the environment is unreachable")

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self._check()
            return attr(*args, **kwargs)

        return call


def proxied(proxies: dict[str, ProxyEnvironment], refuse: list[bool]) -> EnvironmentFactory:
    """A simulator factory that wraps every environment in a ProxyEnvironment (kept by UID)."""

    def factory(ctx: Any) -> Any:
        proxy = ProxyEnvironment(simulator_environment(ctx), refuse_injection=refuse[0])
        proxies[ctx.uid] = proxy
        return proxy

    return factory


async def until(
    predicate: Callable[[], Any], *, within: float = 30.0, what: str = "condition"
) -> Any:
    """Let the operator work until `predicate()` is truthy; return its value.

    Raises:
        AssertionError: When it is still falsy after `timeout` seconds.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        value = predicate()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def agent(name: str, runtime: dict[str, Any], domain: str = "SRE") -> dict[str, Any]:
    """An AgentSubmission manifest."""
    return {
        "apiVersion": "itbench.io/v1alpha1",
        "kind": "AgentSubmission",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"agentName": name, "type": domain, "runtime": runtime},
    }


def benchmark_run(name: str, agent_name: str, scenarios: list[str], **spec: Any) -> dict[str, Any]:
    """A BenchmarkRun manifest."""
    return {
        "apiVersion": "itbench.io/v1alpha1",
        "kind": "BenchmarkRun",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"agentRef": {"name": agent_name}, "scenarios": {"names": scenarios}, **spec},
    }


def run_owner(cluster: Cluster, run: str, namespace: str = NS) -> list[dict[str, Any]]:
    """The ownerReferences a Trial of `run` carries (the run must exist)."""
    body = cluster.get("benchmarkruns", run, namespace)
    assert body is not None, f"BenchmarkRun {namespace}/{run} does not exist"
    return [owner_reference(body)]


def status_of(lab: Lab, plural: str, name: str) -> dict[str, Any]:
    """An object's status ({} when absent)."""
    return (lab.cluster.get(plural, name) or {}).get("status") or {}


def trials_of(lab: Lab, run: str) -> list[dict[str, Any]]:
    """The Trials of a run, as stored."""
    return [
        t
        for t in lab.cluster.objects("trials")
        if t["metadata"].get("labels", {}).get("itbench.io/run") == run
    ]


async def ready_agent(lab: Lab, manifest: dict[str, Any]) -> None:
    """Apply an AgentSubmission and wait until it is Ready."""
    lab.cluster.apply(manifest)
    name = manifest["metadata"]["name"]
    await until(lambda: status_of(lab, "agentsubmissions", name).get("ready"), what=f"{name} Ready")


async def ready_scenarios(lab: Lab, *names: str) -> None:
    """kubectl-apply catalog scenarios and wait until they are Ready."""
    lab.cluster.apply_scenarios(*names)
    await until(
        lambda: all(status_of(lab, "scenarios", n).get("phase") == "Ready" for n in names),
        what="scenarios Ready",
    )


def start_cluster(workdir: Path) -> Cluster:
    """Start a loopback API with the CRDs from crds/ installed."""
    server = LoopbackApi()
    server.start()
    for path in CRDS:
        server.install_crd(yaml.safe_load(path.read_text(encoding="utf-8")))
    kubeconfig = server.kubeconfig(workdir / "kubeconfig")
    client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
    return Cluster(server=server, kubeconfig=kubeconfig, api=KubeApi(client))


def new_lab(cluster: Cluster) -> Lab:
    """A lab whose environments are simulators behind ProxyEnvironment switches."""
    proxies: dict[str, ProxyEnvironment] = {}
    refuse = [False]
    return Lab(
        cluster=cluster,
        environments=EnvironmentRegistry(proxied(proxies, refuse)),
        proxies=proxies,
        refuse_injection=refuse,
    )
