"""The cluster environment (the Environment port on a kubeconfig) against the served twin with a
real Prometheus: objects through the kubernetes client, alerts and metrics through Prometheus'
HTTP API, faults through the playbooks, actions with kubectl's semantics."""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Iterator
from datetime import timedelta

import pytest
from served_lab import eventually

import itbench.core.fault_library  # noqa: F401 (registers the faults)
from itbench.core.faults import get_fault
from itbench.core.models.observations import ActionVerb, AgentAction, AlertState
from itbench.environments.kube.environment import ClusterEnvironment
from itbench.environments.port import Environment, EnvironmentFailure
from itbench.environments.served.server import ServedCluster
from itbench.environments.sim.environment import SimEnvironment
from tests.kube_collection import kubernetes_core

NS = "otel-demo"
SPEED = 30.0


@pytest.fixture(scope="module")
def twin(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ServedCluster, ClusterEnvironment]]:
    if shutil.which("prometheus") is None:
        pytest.skip("prometheus is not installed (apt-get install prometheus)")
    workdir = tmp_path_factory.mktemp("cluster-env")
    served = ServedCluster(
        SimEnvironment(seed=21, namespace=NS), speed=SPEED, prometheus="", workdir=workdir
    ).start()
    kubeconfig = workdir / "kubeconfig"
    served.kubeconfig(kubeconfig)
    env = ClusterEnvironment(
        kubeconfig, namespace=NS, collections_path=kubernetes_core(), rollout_timeout=120
    )
    try:
        yield served, env
    finally:
        env.close()
        served.stop()


def test_it_is_an_environment_on_the_twins_clock(
    twin: tuple[ServedCluster, ClusterEnvironment],
) -> None:
    served, env = twin
    assert isinstance(env, Environment)
    assert env.clock.speed == SPEED
    gap = abs(env.now().timestamp() - served.clock.now())
    assert gap < SPEED, "the kubeconfig's clock is the twin's, not the wall clock"
    with pytest.raises(EnvironmentFailure, match="not provisioned"):
        env.snapshot()


def test_provision_takes_the_baseline_and_the_snapshot_matches_the_twin(
    twin: tuple[ServedCluster, ClusterEnvironment],
) -> None:
    served, env = twin
    env.provision()
    assert env.dirty() == []
    snapshot = env.snapshot()
    with served.store.lock:
        expected = served.env.snapshot()
    assert sorted(w.name for w in snapshot.workloads) == sorted(w.name for w in expected.workloads)
    assert snapshot.alert_rules_fingerprint == expected.alert_rules_fingerprint
    assert snapshot.flags == expected.flags
    assert set(snapshot.objects) == set(expected.objects)
    assert snapshot.cpu_requests_cores > 0 and snapshot.memory_requests_bytes > 0


def test_objects_logs_and_events_come_from_the_api(
    twin: tuple[ServedCluster, ClusterEnvironment],
) -> None:
    served, env = twin
    env.provision()
    cart = env.get_objects("Deployment", "cart")
    assert [d["metadata"]["name"] for d in cart] == ["cart"]
    assert cart[0]["kind"] == "Deployment" and cart[0]["apiVersion"] == "apps/v1"
    with pytest.raises(ValueError, match="doesn't have a resource type"):
        env.get_objects("NetworkChaos")
    pod = env.get_objects("Pod")[0]["metadata"]["name"]
    with served.store.lock:
        expected = served.env.pod_logs(pod, 3)
    assert env.pod_logs(pod, 3) == expected
    with pytest.raises(ValueError, match="not found"):
        env.pod_logs("no-such-pod", 3)
    assert isinstance(env.events(), list)
    assert ("frontend", "cart") in env.service_calls()


def test_metrics_come_from_prometheus_on_the_clusters_clock(
    twin: tuple[ServedCluster, ClusterEnvironment],
) -> None:
    _, env = twin
    env.provision()
    query = f'count(kube_deployment_spec_replicas{{namespace="{NS}"}})'

    def counted() -> float | None:
        result = env.query_metrics(query, env.now())["result"]
        return float(result[0]["value"][1]) if result else None

    deployments = len(env.get_objects("Deployment"))
    assert eventually(counted, "the deployments counted by Prometheus") == deployments
    at = env.query_metrics(query, env.now())["result"][0]["value"][0]
    assert abs(at - env.now().timestamp()) < 2 * SPEED, "answers carry the cluster's time"

    def sampled() -> list[float] | None:
        end = env.now()
        ranged = env.query_metrics_range(query, end - timedelta(minutes=2), end, 30)
        found = [t for t, _ in ranged["result"][0]["values"]] if ranged["result"] else []
        return found if len(found) >= 2 else None

    # Every sample is on the 30-second grid of the cluster's clock (a slow machine may miss
    # scrapes, leaving gaps of whole steps).
    times = eventually(sampled, "two samples of the range")
    assert len(times) >= 2
    assert all(
        (b - a) / 30 == pytest.approx(round((b - a) / 30), abs=0.01)
        for a, b in itertools.pairwise(times)
    )
    assert all(b > a for a, b in itertools.pairwise(times))
    with pytest.raises(ValueError):
        env.query_metrics("sum(", env.now())


def test_an_action_is_written_with_kubectls_semantics_and_alerts_follow(
    twin: tuple[ServedCluster, ClusterEnvironment],
) -> None:
    served, env = twin
    env.provision()
    done = env.act(AgentAction(verb=ActionVerb.SCALE, kind="Deployment", name="cart", replicas=0))
    assert done.ok and done.outcome == "applied" and done.message == "deployment.apps/cart scaled"
    with served.store.lock:
        assert served.env.cluster.get("Deployment", "cart")["spec"]["replicas"] == 0
    again = env.act(AgentAction(verb=ActionVerb.SCALE, kind="Deployment", name="cart", replicas=0))
    assert again.outcome == "unchanged"
    missing = env.act(
        AgentAction(verb=ActionVerb.SCALE, kind="Deployment", name="nope", replicas=1)
    )
    assert not missing.ok and "not found" in missing.message

    def firing() -> bool:
        return any(
            a.alertname == "NoRequests"
            and a.labels.get("service_name") == "cart"
            and a.state == AlertState.FIRING
            for a in env.alerts()
        )

    eventually(firing, "NoRequests on cart from Prometheus", limit=120)
    alert = next(a for a in env.alerts() if a.alertname == "NoRequests")
    assert abs(alert.active_at.timestamp() - env.now().timestamp()) < 3600
    history = eventually(
        lambda: [i for i in env.alert_history() if i.alertname == "NoRequests" and i.end is None],
        "NoRequests firing in the alert history",
    )
    assert history[0].labels["service_name"] == "cart"
    restored = env.act(
        AgentAction(verb=ActionVerb.SCALE, kind="Deployment", name="cart", replicas=1)
    )
    assert restored.ok
    assert env.dirty() == []


@pytest.mark.slow
def test_a_fault_is_injected_and_removed_by_the_playbooks_and_the_cluster_is_clean(
    twin: tuple[ServedCluster, ClusterEnvironment],
) -> None:
    _, env = twin
    env.provision()
    changes = get_fault("kubernetes.memory-limit").changes({"workload": "ad", "memory": "20Mi"}, NS)
    assert env.inject("fault-1", changes)
    assert not env.inject("fault-1", changes), "once per key"
    assert [k[3] for k in env.dirty()] == ["ad"]
    records = env.records()
    assert (
        list(records) == ["fault-1"] and records["fault-1"][0]["before"]["metadata"]["name"] == "ad"
    )
    assert env.remove("fault-1")
    assert not env.remove("fault-1")
    assert env.injections() == ["fault-1"]
    assert env.dirty() == []
