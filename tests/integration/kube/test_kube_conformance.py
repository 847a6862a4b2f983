"""The served twin held to kube-apiserver: every operation the platform, its docs and the agents
use (kubectl, Helm, the official Python client, Kopf's reading of /version) runs against the real
control plane and against `itbench twin serve`, and both must answer alike.

Each test is parametrized over the two targets and asserts what kube-apiserver does; a test that
shows a difference the twin keeps is marked `expected_difference` and asserts the twin's actual
behaviour there (docs/stack.md, "The served twin and kube-apiserver", lists them). The twin
serves its shop in the namespace NS, which the tests use on both targets, so that workloads
created there run on the twin as KWOK runs them on the control plane.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import kopf
import kubernetes
import pytest
import yaml
from kopf._cogs.clients import auth, scanning
from kopf._cogs.structs import credentials
from kopf._core.intents import piggybacking

from itbench.environments.served.logs import parse_time
from itbench.environments.served.server import ServedCluster
from itbench.environments.sim.environment import SimEnvironment
from itbench.operator.clusters import probe
from tests.kube_collection import kubernetes_core
from tests.kube_controlplane import ControlPlane, cached_binaries

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "tests" / "fixtures" / "charts" / "conformance"
NS = "conformance"
IMAGE = "ghcr.io/open-telemetry/demo:2.2.0-cart"
"""An image the twin's kubelet knows (KWOK pulls nothing, so any image runs there)."""
TWIN, REAL = "served-twin", "kube-apiserver"
T = TypeVar("T")
Json = dict[str, Any]


@dataclass
class Target:
    """One API server under test, reached with the real kubectl and Helm."""

    name: str
    kubeconfig: Path
    env: dict[str, str]
    helm_binary: Path

    @property
    def twin(self) -> bool:
        return self.name == TWIN

    def kubectl(
        self, *args: str, stdin: str | None = None, check: bool = True, timeout: float = 90
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["kubectl", "--kubeconfig", str(self.kubeconfig), *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=self.env,
            timeout=timeout,
            check=False,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"{self.name}: kubectl {' '.join(args)}: {done.stderr}")
        return done

    def json(self, *args: str) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json").stdout)

    def helm(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(self.helm_binary), "--kubeconfig", str(self.kubeconfig), *args],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=240,
            check=False,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"{self.name}: helm {' '.join(args)}: {done.stderr}")
        return done

    def client(self) -> kubernetes.client.ApiClient:
        return kubernetes.config.new_client_from_config(config_file=str(self.kubeconfig))


@pytest.fixture(scope="module")
def twin_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    cluster = ServedCluster(SimEnvironment(seed=11, namespace=NS), speed=10.0).start()
    workdir = tmp_path_factory.mktemp("twin")
    kubeconfig = workdir / "kubeconfig"
    cluster.kubeconfig(kubeconfig)
    env = {
        **os.environ,
        "KUBECONFIG": str(kubeconfig),
        "HELM_CACHE_HOME": str(workdir / "helm" / "cache"),
        "HELM_CONFIG_HOME": str(workdir / "helm" / "config"),
        "HELM_DATA_HOME": str(workdir / "helm" / "data"),
    }
    try:
        yield Target(TWIN, kubeconfig, env, cached_binaries() / "helm")
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def real_target(control_plane: ControlPlane) -> Target:
    target = Target(REAL, control_plane.kubeconfig, control_plane.env(), control_plane.bin / "helm")
    if target.kubectl("get", "namespace", NS, check=False).returncode != 0:
        target.kubectl("create", "namespace", NS, check=False)
    return target


@pytest.fixture(scope="module", params=[REAL, TWIN])
def target(request: pytest.FixtureRequest) -> Target:
    name = "real_target" if request.param == REAL else "twin_target"
    found: Target = request.getfixturevalue(name)
    return found


EXPECTED_DIFFERENCES: dict[str, str] = {}
"""Tests that show a difference the twin keeps, by name, with what differs (docs/stack.md's
table "The served twin and kube-apiserver" names each)."""
F = TypeVar("F", bound=Callable[..., None])


def expected_difference(what: str) -> Callable[[F], F]:
    """Mark a test as showing an expected difference: it asserts kube-apiserver's behaviour on
    the real control plane and the twin's actual behaviour on the twin."""

    def mark(test: F) -> F:
        EXPECTED_DIFFERENCES[test.__name__] = what
        return test

    return mark


def _eventually(probe: Callable[[], T], what: str, limit: float = 60.0) -> T:
    """Poll probe until it answers something truthy (a wait with a limit, not a timed check)."""
    deadline = time.monotonic() + limit
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not seen within {limit:.0f} s")
        time.sleep(0.2)


def _object(name: str, kind: str = "ConfigMap", **fields: Any) -> str:
    body = {"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "namespace": NS}}
    body.update(fields)
    return yaml.safe_dump(body)


def _deployment(name: str, replicas: int = 1) -> str:
    labels = {"app.kubernetes.io/name": name}
    return yaml.safe_dump(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": NS, "labels": labels},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "web", "image": IMAGE}]},
                },
            },
        }
    )


# ---- /version ----------------------------------------------------------------------------------


def test_version_carries_every_field_kube_apiserver_reports(
    real_target: Target, twin_target: Target
) -> None:
    real = real_target.json("version")["serverVersion"]
    twin = twin_target.json("version")["serverVersion"]
    assert set(twin) == set(real)
    assert all(twin[key] for key in real), twin
    assert (twin["major"], twin["minor"]) == (real["major"], real["minor"])
    assert twin["gitVersion"].split("+")[0] == real["gitVersion"].split("+")[0]


def test_the_official_client_and_the_operators_cluster_probe_accept_version(
    target: Target,
) -> None:
    api = target.client()
    try:
        info = kubernetes.client.VersionApi(api).get_code()
    finally:
        api.close()
    assert info.build_date and info.go_version and info.platform == "linux/amd64"
    config = yaml.safe_load(target.kubeconfig.read_text())
    server = config["clusters"][0]["cluster"]["server"]
    assert probe(server, target.kubeconfig.read_text()) is None


def test_kopf_reads_version_through_its_own_client(
    target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(target.kubeconfig))
    settings = kopf.OperatorSettings()

    async def read() -> dict[str, str]:
        info = piggybacking.login_with_kubeconfig(settings=settings)
        assert info is not None
        vault = credentials.Vault()
        await vault.populate({"kubeconfig": info})
        auth.vault_var.set(vault)
        logger = logging.getLogger("kopf.conformance")
        try:
            return await scanning.read_version(settings=settings, logger=logger)
        finally:
            await vault.close()

    version = asyncio.run(read())
    assert version["buildDate"] and version["gitVersion"].startswith("v1.")
    assert kubernetes.client.VersionInfo(**{_snake(k): v for k, v in version.items()}).build_date


def _snake(key: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in key)


# ---- kubectl create (protobuf bodies) ------------------------------------------------------------


def test_create_secret_generic_from_file_as_the_install_doc_does(
    target: Target, tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "lab.yaml"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    done = target.kubectl(
        "create",
        "secret",
        "generic",
        "lab-cluster",
        "-n",
        NS,
        f"--from-file=kubeconfig={kubeconfig}",
    )
    assert done.stdout.strip() == "secret/lab-cluster created"
    secret = target.json("get", "secret", "lab-cluster", "-n", NS)
    assert secret["type"] == "Opaque"
    assert base64.b64decode(secret["data"]["kubeconfig"]) == kubeconfig.read_bytes()
    assert "generation" not in secret["metadata"]
    again = target.kubectl(
        "create", "secret", "generic", "lab-cluster", "-n", NS, "--from-literal=a=b", check=False
    )
    assert again.returncode == 1
    assert 'secrets "lab-cluster" already exists' in again.stderr


def test_create_configmap_namespace_and_serviceaccount(target: Target) -> None:
    target.kubectl("create", "configmap", "greeting", "-n", NS, "--from-literal=text=hello")
    cm = target.json("get", "configmap", "greeting", "-n", NS)
    assert cm["data"] == {"text": "hello"} and "generation" not in cm["metadata"]
    target.kubectl("create", "namespace", "conformance-extra")
    ns = target.json("get", "namespace", "conformance-extra")
    assert ns["metadata"]["labels"]["kubernetes.io/metadata.name"] == "conformance-extra"
    assert ns["status"]["phase"] == "Active" and ns["spec"]["finalizers"] == ["kubernetes"]
    target.kubectl("create", "serviceaccount", "reader", "-n", NS)
    token = target.kubectl("create", "token", "reader", "-n", NS, "--duration=10m").stdout.strip()
    assert token.count(".") == 2 or len(token) > 20


def test_kubectl_create_deployment_job_cronjob_and_service(target: Target) -> None:
    target.kubectl(
        "create", "deployment", "made", "-n", NS, f"--image={IMAGE}", "--replicas=2",
        "--port=8080",
    )  # fmt: skip
    target.kubectl("create", "job", "once", "-n", NS, f"--image={IMAGE}", "--", "echo", "hi")
    target.kubectl(
        "create", "cronjob", "every", "-n", NS, f"--image={IMAGE}", "--schedule=*/5 * * * *"
    )
    target.kubectl("create", "service", "clusterip", "made", "-n", NS, "--tcp=80:8080")
    target.kubectl("create", "deployment", "idle", "-n", NS, f"--image={IMAGE}", "--replicas=0")
    assert target.json("get", "deployment", "idle", "-n", NS)["spec"]["replicas"] == 0
    spec = target.json("get", "deployment", "made", "-n", NS)["spec"]
    assert spec["replicas"] == 2 and spec["selector"] == {"matchLabels": {"app": "made"}}
    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"},
    }
    container = spec["template"]["spec"]["containers"][0]
    assert (container["name"], container["image"]) == ("demo", IMAGE)
    assert container["ports"] == [{"containerPort": 8080, "protocol": "TCP"}]
    job = target.json("get", "job", "once", "-n", NS)["spec"]["template"]["spec"]
    assert job["containers"][0]["command"] == ["echo", "hi"] and job["restartPolicy"] == "Never"
    cron = target.json("get", "cronjob", "every", "-n", NS)["spec"]
    assert cron["schedule"] == "*/5 * * * *"
    service = target.json("get", "service", "made", "-n", NS)["spec"]
    assert service["ports"] == [
        {"name": "80-8080", "port": 80, "protocol": "TCP", "targetPort": 8080}
    ]
    assert service["selector"] == {"app": "made"} and service["clusterIP"].startswith("10.96.")


def test_auth_can_i_answers_for_the_caller_and_for_an_impersonated_account(
    target: Target,
) -> None:
    assert (
        target.kubectl("auth", "can-i", "create", "deployments", "-n", NS).stdout.strip() == "yes"
    )
    target.kubectl("create", "serviceaccount", "auditor", "-n", NS)
    who = f"--as=system:serviceaccount:{NS}:auditor"
    denied = target.kubectl("auth", "can-i", "list", "pods", "-n", NS, who, check=False)
    assert (denied.returncode, denied.stdout.strip()) == (1, "no")
    target.kubectl("create", "role", "pod-reader", "-n", NS, "--verb=get,list", "--resource=pods")
    target.kubectl(
        "create",
        "rolebinding",
        "auditor-reads",
        "-n",
        NS,
        "--role=pod-reader",
        f"--serviceaccount={NS}:auditor",
    )
    allowed = target.kubectl("auth", "can-i", "list", "pods", "-n", NS, who)
    assert allowed.stdout.strip() == "yes"
    other = target.kubectl("auth", "can-i", "delete", "pods", "-n", NS, who, check=False)
    assert other.stdout.strip() == "no"
    refused = target.kubectl("get", "secrets", "-n", NS, who, check=False)
    assert refused.returncode == 1
    assert (
        f'User "system:serviceaccount:{NS}:auditor" cannot list resource "secrets"'
        in refused.stderr
    )


# ---- get, describe, apply, patch, scale, rollout, events -----------------------------------------


def test_get_of_a_missing_object_fails_alike(target: Target) -> None:
    done = target.kubectl("get", "configmap", "no-such", "-n", NS, check=False)
    assert done.returncode == 1
    assert done.stderr.strip() == 'Error from server (NotFound): configmaps "no-such" not found'


def test_apply_then_patch_three_ways_and_describe(target: Target) -> None:
    assert (
        "created"
        in target.kubectl("apply", "-f", "-", stdin=_object("knobs", data={"a": "1"})).stdout
    )
    target.kubectl(
        "patch", "configmap", "knobs", "-n", NS, "--type=merge", "-p", '{"data":{"b":"2"}}'
    )
    target.kubectl(
        "patch", "configmap", "knobs", "-n", NS, "--type=json",
        "-p", '[{"op":"replace","path":"/data/a","value":"3"}]',
    )  # fmt: skip
    target.kubectl("patch", "configmap", "knobs", "-n", NS, "-p", '{"data":{"c":"4"}}')
    cm = target.json("get", "configmap", "knobs", "-n", NS)
    assert cm["data"] == {"a": "3", "b": "2", "c": "4"}
    described = target.kubectl("describe", "configmap", "knobs", "-n", NS).stdout
    assert described.splitlines()[0].split() == ["Name:", "knobs"]
    assert "Namespace:    conformance" in described


def test_server_side_apply_creates_then_updates(target: Target) -> None:
    first = target.kubectl(
        "apply", "--server-side", "-f", "-", stdin=_object("applied", data={"mode": "a"})
    )
    assert first.stdout.strip() == "configmap/applied serverside-applied"
    target.kubectl(
        "apply", "--server-side", "-f", "-", stdin=_object("applied", data={"mode": "b"})
    )
    assert target.json("get", "configmap", "applied", "-n", NS)["data"] == {"mode": "b"}


def test_scale_rollout_and_events_of_a_deployment(target: Target) -> None:
    target.kubectl("apply", "-f", "-", stdin=_deployment("web"))
    target.kubectl("rollout", "status", "deployment/web", "-n", NS, "--timeout=90s", timeout=120)
    assert "scaled" in target.kubectl("scale", "deployment/web", "-n", NS, "--replicas=2").stdout
    target.kubectl("rollout", "status", "deployment/web", "-n", NS, "--timeout=90s", timeout=120)
    assert target.json("get", "deployment", "web", "-n", NS)["status"]["readyReplicas"] == 2
    assert "restarted" in target.kubectl("rollout", "restart", "deployment/web", "-n", NS).stdout
    target.kubectl("rollout", "status", "deployment/web", "-n", NS, "--timeout=90s", timeout=120)
    history = target.kubectl("rollout", "history", "deployment/web", "-n", NS).stdout
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["1", "2"]
    assert "rolled back" in target.kubectl("rollout", "undo", "deployment/web", "-n", NS).stdout
    events = target.json("get", "events", "-n", NS, "--field-selector", "involvedObject.name=web")[
        "items"
    ]
    assert any(e["reason"] == "ScalingReplicaSet" for e in events)
    listed = target.kubectl("events", "-n", NS, "--for", "deployment/web").stdout
    assert "ScalingReplicaSet" in listed


# ---- the official client's watch -----------------------------------------------------------------


def test_the_official_clients_watch_sees_added_modified_deleted(target: Target) -> None:
    api = target.client()
    core = kubernetes.client.CoreV1Api(api)
    seen: list[tuple[str, str]] = []
    listed = core.list_namespaced_config_map(NS, label_selector="watched=yes")
    started = threading.Event()

    def follow() -> None:
        watch = kubernetes.watch.Watch()
        started.set()
        for event in watch.stream(
            core.list_namespaced_config_map,
            NS,
            label_selector="watched=yes",
            resource_version=listed.metadata.resource_version,
            timeout_seconds=20,
        ):
            seen.append((event["type"], event["object"].data.get("v", "")))
            if event["type"] == "DELETED":
                watch.stop()

    thread = threading.Thread(target=follow)
    thread.start()
    started.wait(5)
    body = {"metadata": {"name": "watched", "labels": {"watched": "yes"}}, "data": {"v": "1"}}
    core.create_namespaced_config_map(NS, body)
    core.patch_namespaced_config_map("watched", NS, {"data": {"v": "2"}})
    core.delete_namespaced_config_map("watched", NS)
    thread.join(30)
    api.close()
    assert seen == [("ADDED", "1"), ("MODIFIED", "2"), ("DELETED", "2")]


# ---- kubernetes.core ---------------------------------------------------------------------------


def test_kubernetes_core_modules_apply_patch_read_scale_and_delete(target: Target) -> None:
    target.kubectl("apply", "-f", "-", stdin=_deployment("playbook-web"))
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            str(ROOT / "tests" / "fixtures" / "playbooks" / "conformance.yaml"),
        ],
        capture_output=True,
        text=True,
        env={
            **target.env,
            "K8S_AUTH_KUBECONFIG": str(target.kubeconfig),
            "ANSIBLE_COLLECTIONS_PATH": kubernetes_core(),
            "ANSIBLE_LOCALHOST_WARNING": "false",
            "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false",
        },
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    report = next(line for line in done.stdout.splitlines() if "CONFORMANCE" in line)
    found = json.loads(report.split("CONFORMANCE ", 1)[1].rstrip('"').replace('\\"', '"'))
    assert found == {"mode": "second", "replicas": 2}
    assert (
        target.kubectl("get", "configmap", "playbook-settings", "-n", NS, check=False).returncode
        == 1
    )


# ---- Helm ----------------------------------------------------------------------------------------


def test_helm_installs_upgrades_and_uninstalls_a_chart(target: Target) -> None:
    target.helm(
        "install",
        "demo",
        str(CHART),
        "-n",
        NS,
        "--set",
        f"image={IMAGE}",
        "--wait",
        "--timeout",
        "120s",
    )
    releases = target.json("get", "secrets", "-n", NS, "-l", "owner=helm,name=demo")["items"]
    assert [r["type"] for r in releases] == ["helm.sh/release.v1"]
    assert releases[0]["metadata"]["labels"]["status"] == "deployed"
    assert target.json("get", "configmap", "demo-settings", "-n", NS)["data"] == {
        "greeting": "hello"
    }
    target.helm(
        "upgrade", "demo", str(CHART), "-n", NS, "--set", f"image={IMAGE}",
        "--set", "greeting=bye", "--set", "replicas=2", "--wait", "--timeout", "120s",
    )  # fmt: skip
    assert target.json("get", "configmap", "demo-settings", "-n", NS)["data"] == {"greeting": "bye"}
    target.kubectl("rollout", "status", "deployment/demo-web", "-n", NS, "--timeout=90s")
    assert target.json("get", "deployment", "demo-web", "-n", NS)["status"]["readyReplicas"] == 2
    history = json.loads(target.helm("history", "demo", "-n", NS, "-o", "json").stdout)
    assert [(h["revision"], h["status"]) for h in history] == [(1, "superseded"), (2, "deployed")]
    target.helm("uninstall", "demo", "-n", NS, "--wait")
    assert (
        target.kubectl("get", "configmap", "demo-settings", "-n", NS, check=False).returncode == 1
    )
    assert target.json("get", "secrets", "-n", NS, "-l", "owner=helm,name=demo")["items"] == []


def test_helm_installs_upgrades_and_uninstalls_the_itbench_chart(target: Target) -> None:
    chart, release, namespace = str(ROOT / "charts" / "itbench"), "conformance", "conformance-chart"
    # The chart's agent and environment RBAC go into the shop's namespace and the telemetry's.
    target.helm(
        "install", release, chart, "-n", namespace, "--create-namespace",
        "--set", f"ownCluster.namespaces={{{NS}}}",
        "--set", f"ownCluster.telemetryNamespaces={{{NS}}}",
    )  # fmt: skip
    policy = f"{release}-itbench-ciso-evaluator-writes"
    assert (
        target.json("get", "validatingadmissionpolicy", policy)["spec"]["failurePolicy"] == "Fail"
    )
    deployment = target.json(
        "get", "deployment", "-n", namespace, "-l", "app.kubernetes.io/instance=" + release
    )
    assert [d["metadata"]["name"] for d in deployment["items"]] == [f"{release}-itbench"]
    service = target.json("get", "service", f"{release}-itbench", "-n", namespace)
    assert service["spec"]["clusterIP"].startswith("10.96.")
    target.helm("upgrade", release, chart, "-n", namespace, "--reuse-values")
    status = json.loads(target.helm("status", release, "-n", namespace, "-o", "json").stdout)
    assert (status["version"], status["info"]["status"]) == (2, "deployed")
    target.helm("uninstall", release, "-n", namespace)
    assert target.kubectl("get", "validatingadmissionpolicy", policy, check=False).returncode == 1
    assert target.json("get", "secrets", "-n", namespace, "-l", "owner=helm")["items"] == []


# ---- lists, Services, CRDs ---------------------------------------------------------------


def test_a_list_comes_in_pages_with_limit_and_continue(target: Target) -> None:
    for index in range(3):
        target.kubectl("apply", "-f", "-", stdin=_object(f"paged-{index}", data={"i": str(index)}))
    api = target.client()
    try:
        core = kubernetes.client.CoreV1Api(api)
        first = core.list_namespaced_config_map(NS, label_selector="", limit=2)
        names = [c.metadata.name for c in first.items]
        assert len(names) == 2 and first.metadata._continue
        rest = core.list_namespaced_config_map(NS, limit=500, _continue=first.metadata._continue)
        names += [c.metadata.name for c in rest.items]
        assert rest.metadata._continue is None
        everything = [c.metadata.name for c in core.list_namespaced_config_map(NS).items]
    finally:
        api.close()
    assert names == everything
    assert {"paged-0", "paged-1", "paged-2"} <= set(names)


def test_a_new_service_gets_kube_apiservers_defaults(target: Target) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "plain", "namespace": NS},
        "spec": {"selector": {"app": "plain"}, "ports": [{"port": 80}]},
    }
    target.kubectl("apply", "-f", "-", stdin=json.dumps(body))
    spec = target.json("get", "service", "plain", "-n", NS)["spec"]
    assert spec["type"] == "ClusterIP" and spec["clusterIPs"] == [spec["clusterIP"]]
    assert spec["ports"] == [{"port": 80, "protocol": "TCP", "targetPort": 80}]
    assert (spec["sessionAffinity"], spec["ipFamilyPolicy"]) == ("None", "SingleStack")


def test_a_crd_is_established_and_kubectl_waits_for_it(target: Target) -> None:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.conformance.example.com"},
        "spec": {
            "group": "conformance.example.com",
            "scope": "Namespaced",
            "names": {
                "plural": "widgets",
                "singular": "widget",
                "kind": "Widget",
                "listKind": "WidgetList",
            },
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "properties": {"size": {"type": "integer"}},
                                }
                            },
                        }
                    },
                }
            ],
        },
    }
    target.kubectl("apply", "--server-side", "-f", "-", stdin=json.dumps(crd))
    target.kubectl(
        "wait",
        "--for=condition=Established",
        "--timeout=30s",
        "crd/widgets.conformance.example.com",
    )
    status = target.json("get", "crd", "widgets.conformance.example.com")["status"]
    assert status["storedVersions"] == ["v1"] and status["acceptedNames"]["kind"] == "Widget"
    widget = {
        "apiVersion": "conformance.example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": NS},
        "spec": {"size": 3},
    }
    # Discovery of a new group is eventually consistent on kube-apiserver.
    _eventually(
        lambda: (
            target.kubectl("apply", "-f", "-", stdin=json.dumps(widget), check=False).returncode
            == 0
        ),
        "the new kind served",
    )
    assert target.json("get", "widget", "w", "-n", NS)["spec"] == {"size": 3}


# ---- pod logs ---------------------------------------------------------------------------


def _two_container_pod(target: Target) -> str:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "two", "namespace": NS},
        "spec": {"containers": [{"name": "a", "image": IMAGE}, {"name": "b", "image": IMAGE}]},
    }
    if target.kubectl("get", "pod", "two", "-n", NS, check=False).returncode != 0:
        target.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
    # A pod created directly is scheduled and run (the twin's steps went on with it in).
    _eventually(
        lambda: target.json("get", "pod", "two", "-n", NS)["status"].get("phase") == "Running",
        "the pod two running",
    )
    return "two"


def test_a_pod_log_names_its_container_as_kube_apiserver_requires(target: Target) -> None:
    pod = _two_container_pod(target)
    api = target.client()
    core = kubernetes.client.CoreV1Api(api)
    try:
        with pytest.raises(kubernetes.client.ApiException) as unnamed:
            core.read_namespaced_pod_log(pod, NS)
        with pytest.raises(kubernetes.client.ApiException) as unknown:
            core.read_namespaced_pod_log(pod, NS, container="nope")
    finally:
        api.close()
    assert unnamed.value.status == 400
    assert json.loads(unnamed.value.body)["message"] == (
        "a container name must be specified for pod two, choose one of: [a b]"
    )
    assert unknown.value.status == 400
    assert json.loads(unknown.value.body)["message"] == "container nope is not valid for pod two"


# ---- pod logs on the twin --------------------------------------------------------------------
# The control plane's Nodes are KWOK's, with no kubelet to read logs from, so these hold the twin
# to the kubelet's behaviour (pkg/kubelet/kubelet_pods.go, validateContainerLogStatus) alone.


def _twin_pod(target: Target, app: str) -> Json:
    pods = target.json("get", "pods", "-n", NS, "-l", f"app.kubernetes.io/name={app}")["items"]
    assert pods, app
    found: Json = pods[0]
    return found


def _stamps(text: str) -> list[float]:
    return [parse_time(line.split(" ", 1)[0]) for line in text.splitlines() if line]


def test_twin_logs_previous_reads_the_terminated_run_alone(twin_target: Target) -> None:
    pod = _twin_pod(twin_target, "product-catalog")
    status = pod["status"]["containerStatuses"][0]
    assert status["restartCount"] >= 1
    finished = parse_time(status["lastState"]["terminated"]["finishedAt"])
    started = parse_time(status["state"]["running"]["startedAt"])
    name = pod["metadata"]["name"]
    previous = twin_target.kubectl("logs", name, "-n", NS, "--previous", "--timestamps").stdout
    assert previous and all(t <= finished for t in _stamps(previous))
    current = twin_target.kubectl("logs", name, "-n", NS, "--timestamps").stdout
    assert current and all(t >= started for t in _stamps(current))
    cart = _twin_pod(twin_target, "cart")["metadata"]["name"]
    refused = twin_target.kubectl("logs", cart, "-n", NS, "-c", "cart", "--previous", check=False)
    assert refused.returncode == 1
    assert f'previous terminated container "cart" in pod "{cart}" not found' in refused.stderr


def test_twin_logs_since_keeps_the_recent_lines_with_their_times(twin_target: Target) -> None:
    cart = _twin_pod(twin_target, "cart")["metadata"]["name"]

    def history() -> str | None:
        text = twin_target.kubectl("logs", cart, "-n", NS, "-c", "cart", "--timestamps").stdout
        stamps = _stamps(text)
        return text if stamps and stamps[-1] - stamps[0] > 120 else None

    everything = _eventually(history, "two minutes of the cart's log")
    recent = twin_target.kubectl(
        "logs", cart, "-n", NS, "-c", "cart", "--timestamps", "--since=60s"
    ).stdout
    stamps = _stamps(recent)
    assert 0 < len(stamps) < len(_stamps(everything))
    assert max(stamps) - min(stamps) <= 60
    plain = twin_target.kubectl("logs", cart, "-n", NS, "-c", "cart", "--tail=2").stdout
    full = twin_target.kubectl("logs", cart, "-n", NS, "-c", "cart").stdout.splitlines()
    assert len(plain.splitlines()) == 2
    assert set(plain.splitlines()) <= set(full)


def test_twin_logs_follow_streams_the_lines_written_after(twin_target: Target) -> None:
    cart = _twin_pod(twin_target, "cart")["metadata"]["name"]
    follower = subprocess.Popen(
        [
            "kubectl", "--kubeconfig", str(twin_target.kubeconfig), "logs", cart, "-n", NS,
            "-c", "cart", "-f", "--tail=1", "--timestamps",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=twin_target.env,
    )  # fmt: skip
    lines: list[str] = []
    reader = threading.Thread(
        target=lambda: lines.extend(iter(follower.stdout.readline, "")) if follower.stdout else None
    )
    reader.start()
    try:
        _eventually(lambda: len(lines) >= 3, "three followed log lines", limit=30)
    finally:
        follower.terminate()
        follower.wait(10)
        reader.join(10)
    stamps = _stamps("".join(lines))
    assert stamps == sorted(stamps) and stamps[-1] > stamps[0]


# ---- differences the twin keeps --------------------------------------------------------------


@expected_difference(
    "Workloads outside the shop's namespace are stored, not run: no controller or kubelet acts "
    "on them (Helm's --wait on such a release times out)"
)
def test_a_deployment_outside_the_shop_namespace_rolls_out(target: Target) -> None:
    outside = "conformance-outside"
    if target.kubectl("get", "namespace", outside, check=False).returncode != 0:
        target.kubectl("create", "namespace", outside)
    target.kubectl("apply", "-f", "-", stdin=_deployment("elsewhere").replace(NS, outside))
    done = target.kubectl(
        "rollout", "status", "deployment/elsewhere", "-n", outside, "--timeout=20s",
        check=False, timeout=60,
    )  # fmt: skip
    if target.twin:
        assert done.returncode == 1 and "timed out" in done.stderr
        assert target.json("get", "pods", "-n", outside)["items"] == []
    else:
        assert done.returncode == 0, done.stderr


@expected_difference(
    "Admission policies and webhook configurations are stored, not enforced "
    "(ValidatingAdmissionPolicy, its bindings, validating and mutating webhooks)"
)
def test_a_validating_admission_policy_refuses_a_write(target: Target) -> None:
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "conformance-no-forbidden"},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["configmaps"],
                    }
                ]
            },
            "validations": [{"expression": "!has(object.data) || !('forbidden' in object.data)"}],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "conformance-no-forbidden"},
        "spec": {"policyName": "conformance-no-forbidden", "validationActions": ["Deny"]},
    }
    target.kubectl("apply", "-f", "-", stdin=json.dumps(policy))
    target.kubectl("apply", "-f", "-", stdin=json.dumps(binding))

    def attempt() -> subprocess.CompletedProcess[str] | None:
        body = _object("forbidden-cm", data={"forbidden": "yes"})
        done = target.kubectl("create", "-f", "-", stdin=body, check=False)
        if done.returncode == 0:
            target.kubectl("delete", "configmap", "forbidden-cm", "-n", NS)
            return None if not target.twin else done
        return done

    done = _eventually(attempt, "the policy's answer", limit=60)
    if target.twin:
        assert done.returncode == 0
    else:
        assert "ValidatingAdmissionPolicy 'conformance-no-forbidden'" in done.stderr
        assert "denied request" in done.stderr


@expected_difference(
    "Server-side apply has no field ownership: no managedFields, no conflicts, and a field a "
    "manager stops applying stays"
)
def test_server_side_apply_removes_a_field_its_manager_stopped_applying(target: Target) -> None:
    target.kubectl(
        "apply", "--server-side", "-f", "-", stdin=_object("owned", data={"a": "1", "b": "2"})
    )
    target.kubectl("apply", "--server-side", "-f", "-", stdin=_object("owned", data={"a": "1"}))
    cm = target.json("get", "configmap", "owned", "-n", NS, "--show-managed-fields")
    if target.twin:
        assert cm["data"] == {"a": "1", "b": "2"} and "managedFields" not in cm["metadata"]
    else:
        assert cm["data"] == {"a": "1"}
        assert [m["manager"] for m in cm["metadata"]["managedFields"]] == ["kubectl"]


@expected_difference(
    "Protobuf bodies are decoded for Secret, ConfigMap, Namespace, ServiceAccount, RBAC, "
    "TokenRequest, SelfSubjectAccessReview, and Deployment, Job, CronJob and Service as far as "
    "`kubectl create` fills them: other kinds (`kubectl create pdb|quota|priorityclass|ingress`) "
    "and other fields are refused with 415 (apply works)"
)
def test_kubectl_create_poddisruptionbudget_sends_protobuf(target: Target) -> None:
    done = target.kubectl(
        "create", "poddisruptionbudget", "guard", "-n", NS, "--selector=app=guard",
        "--min-available=1", check=False,
    )  # fmt: skip
    if target.twin:
        assert done.returncode == 1
        assert "protobuf bodies of policy/v1 PodDisruptionBudget are not decoded" in done.stderr
    else:
        assert done.stdout.strip() == "poddisruptionbudget.policy/guard created"


@expected_difference(
    "Deletion propagates in the background only: `--cascade=orphan` (and foreground) delete "
    "the dependents too"
)
def test_an_orphaning_delete_keeps_the_replicasets(target: Target) -> None:
    target.kubectl("apply", "-f", "-", stdin=_deployment("orphaner"))
    target.kubectl(
        "rollout", "status", "deployment/orphaner", "-n", NS, "--timeout=90s", timeout=120
    )
    selector = "app.kubernetes.io/name=orphaner"
    assert target.json("get", "rs", "-n", NS, "-l", selector)["items"]
    target.kubectl("delete", "deployment", "orphaner", "-n", NS, "--cascade=orphan", "--wait")
    if target.twin:
        _eventually(
            lambda: not target.json("get", "rs", "-n", NS, "-l", selector)["items"],
            "the ReplicaSet deleted with its Deployment",
        )
        assert target.json("get", "rs", "-n", NS, "-l", selector)["items"] == []
    else:
        kept = target.json("get", "rs", "-n", NS, "-l", selector)["items"]
        assert kept and not kept[0]["metadata"].get("ownerReferences")


def test_every_expected_difference_is_listed_in_docs_stack() -> None:
    text = (ROOT / "docs" / "stack.md").read_text()
    section = text.split("## The served twin and kube-apiserver", 1)
    assert len(section) == 2, "docs/stack.md has no section 'The served twin and kube-apiserver'"
    table = section[1].split("\n## ", 1)[0]
    missing = [name for name in EXPECTED_DIFFERENCES if f"`{name}`" not in table]
    assert EXPECTED_DIFFERENCES and not missing, missing
