"""A real Prometheus beside the served twin: it scrapes the twin's exposition, evaluates the
PrometheusRules the API holds (durations scaled to the twin's speed) and fires the alerts the
twin's own evaluator fires."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from served_lab import Kubectl, eventually

from itbench.environments.kube.endpoints import prometheus_service
from itbench.environments.served.server import ServedCluster
from itbench.environments.sim.environment import SimEnvironment

NS = "otel-demo"
SPEED = 30.0
"""A 15-second step every half second; `for: 2m` lasts 4 wall seconds."""


@pytest.fixture(scope="module")
def with_prometheus(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ServedCluster, Kubectl]]:
    if shutil.which("prometheus") is None:
        pytest.skip("prometheus is not installed (apt-get install prometheus)")
    workdir = tmp_path_factory.mktemp("prometheus")
    cluster = ServedCluster(
        SimEnvironment(seed=11, namespace=NS), speed=SPEED, prometheus="", workdir=workdir
    ).start()
    try:
        cluster.kubeconfig(workdir / "kubeconfig")
        yield cluster, Kubectl(workdir / "kubeconfig")
    finally:
        cluster.stop()


def _firing(prometheus: str) -> set[tuple[str, str]]:
    alerts = httpx.get(f"{prometheus}/api/v1/alerts", timeout=5).json()["data"]["alerts"]
    return {
        (a["labels"]["alertname"], a["labels"].get("service_name", ""))
        for a in alerts
        if a["state"] == "firing"
    }


def _twin_firing(cluster: ServedCluster) -> set[tuple[str, str]]:
    with cluster.store.lock:
        alerts = cluster.env.alerts()
    return {
        (a.alertname, a.labels.get("service_name", "")) for a in alerts if a.state.value == "firing"
    }


def test_prometheus_loads_the_clusters_rules_scaled_to_the_twins_speed(
    with_prometheus: tuple[ServedCluster, Kubectl],
) -> None:
    cluster, _ = with_prometheus
    assert cluster.prometheus_url is not None
    groups = httpx.get(f"{cluster.prometheus_url}/api/v1/rules", timeout=5).json()["data"]["groups"]
    rules = {r["name"]: r for g in groups for r in g["rules"]}
    assert {"RequestErrorRate", "NoRequests"} <= set(rules)
    assert rules["RequestErrorRate"]["duration"] == 60 / SPEED
    assert "[4s]" in rules["RequestErrorRate"]["query"], "rate(...[2m]) at 30x"
    # A rule's health is "unknown" until its group's first evaluation; wait for it.
    for _ in range(100):
        if all(r["health"] != "unknown" for r in rules.values()):
            break
        time.sleep(0.2)
        groups = httpx.get(f"{cluster.prometheus_url}/api/v1/rules", timeout=5).json()["data"][
            "groups"
        ]
        rules = {r["name"]: r for g in groups for r in g["rules"]}
    assert all(r["health"] == "ok" for r in rules.values()), {
        n: (r["health"], r.get("lastError")) for n, r in rules.items() if r["health"] != "ok"
    }
    rule_files = sorted(cluster._prometheus.rule_dir.glob("*.yaml")) if cluster._prometheus else []
    promtool = shutil.which("promtool")
    if promtool is not None and rule_files:
        checked = subprocess.run(
            [promtool, "check", "rules", *map(str, rule_files)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr


def test_a_fault_made_with_kubectl_fires_in_prometheus_what_the_twin_fires(
    with_prometheus: tuple[ServedCluster, Kubectl],
) -> None:
    cluster, kubectl = with_prometheus
    assert cluster.prometheus_url is not None
    kubectl("patch", "deployment", "cart", "-n", NS, "-p", '{"spec":{"replicas":0}}')

    def agreed() -> set[tuple[str, str]] | None:
        ours, theirs = _twin_firing(cluster), _firing(str(cluster.prometheus_url))
        return theirs if ("NoRequests", "cart") in theirs and theirs == ours else None

    firing = eventually(agreed, "Prometheus firing the twin's alerts", limit=120)
    assert ("NoRequests", "cart") in firing
    # The same answer reaches a client through the API server's Service proxy, as on a cluster.
    ref = prometheus_service()

    def proxied() -> set[tuple[str, str]]:
        raw = kubectl("get", "--raw", f"{ref.proxy_path()}/api/v1/alerts").stdout
        return {
            (a["labels"]["alertname"], a["labels"].get("service_name", ""))
            for a in json.loads(raw)["data"]["alerts"]
            if a["state"] == "firing"
        }

    eventually(lambda: ("NoRequests", "cart") in proxied(), "the alert through the proxy")
    kubectl("patch", "deployment", "cart", "-n", NS, "-p", '{"spec":{"replicas":1}}')
    eventually(
        lambda: ("NoRequests", "cart") not in _firing(str(cluster.prometheus_url)) or None,
        "NoRequests resolved",
        limit=120,
    )


def test_deleting_the_prometheusrule_unloads_its_rules(
    with_prometheus: tuple[ServedCluster, Kubectl],
) -> None:
    cluster, kubectl = with_prometheus
    rule: Any = json.loads(kubectl("get", "prometheusrules", "-n", NS, "-o", "json").stdout)[
        "items"
    ][0]
    kubectl("delete", "prometheusrule", rule["metadata"]["name"], "-n", NS)

    def unloaded() -> bool:
        groups = httpx.get(f"{cluster.prometheus_url}/api/v1/rules", timeout=5).json()["data"][
            "groups"
        ]
        return not groups

    eventually(unloaded, "the rules unloaded after the PrometheusRule was deleted")
    body = {k: v for k, v in rule.items() if k != "status"}
    body["metadata"] = {
        k: rule["metadata"][k] for k in ("name", "namespace", "labels") if k in rule["metadata"]
    }
    kubectl("apply", "-f", "-", stdin=json.dumps(body))
    eventually(lambda: not unloaded(), "the rules loaded again")
