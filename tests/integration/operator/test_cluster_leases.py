"""Cluster targets without a cluster: kubeconfig checks, the in-cluster kubeconfig, who holds a
cluster's leases, and what a Trial's injection records allow after a restart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from operator_lab import NS, SCENARIOS, Cluster, benchmark_run
from pydantic import ValidationError

from itbench.catalog_files import load_catalog
from itbench.core.models.benchmark_run import EnvironmentSpec
from itbench.core.models.trial import TrialSpec
from itbench.core.runner.context import TrialContext
from itbench.environments.port import EnvironmentFailure
from itbench.environments.sim.environment import SimEnvironment
from itbench.operator.clusters import (
    EVIDENCE_BYTES,
    LEASE,
    RECORDS,
    UNUSABLE,
    ClusterTargets,
    InjectionRecords,
    KubeconfigError,
    Lease,
    LeasedClusterEnvironment,
    connect,
    evidence_name,
    holders,
    in_cluster_kubeconfig,
    kubeconfig_server,
    lease_condition,
    trial_evidence,
    usable_condition,
)
from itbench.operator.runtime import TrialEvidence

SERVER = "https://10.1.2.3:6443"


def kubeconfig(server: str = SERVER, **changes: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "lab", "cluster": {"server": server}}],
        "users": [{"name": "me", "user": {"token": "t0k3n"}}],
        "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": "me"}}],
        "current-context": "lab",
    }
    config.update(changes)
    return config


def test_a_kubeconfig_is_known_by_its_current_servers_url() -> None:
    assert kubeconfig_server(yaml.safe_dump(kubeconfig())) == SERVER


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("clusters: [oops", "is not YAML"),
        ("- just\n- a list\n", "is not a kubeconfig"),
        (yaml.safe_dump(kubeconfig(**{"current-context": "elsewhere"})), "no current-context"),
        (
            yaml.safe_dump(kubeconfig(clusters=[{"name": "other", "cluster": {}}])),
            "names cluster 'lab', which it does not define",
        ),
        (yaml.safe_dump(kubeconfig(server="10.1.2.3")), "has no server URL"),
    ],
)
def test_an_unusable_kubeconfig_says_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(KubeconfigError, match=says):
        kubeconfig_server(text)


def test_the_operators_own_cluster_is_reached_with_its_service_account_token_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "token").write_text("sa-token")
    (tmp_path / "ca.crt").write_text("not checked here")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    config = yaml.safe_load(in_cluster_kubeconfig(tmp_path))
    assert config["clusters"][0]["cluster"] == {
        "server": "https://10.96.0.1:443",
        "certificate-authority": str(tmp_path / "ca.crt"),
    }
    # A token file, not its text: the kubelet rotates a bound token in place.
    assert config["users"][0]["user"] == {"tokenFile": str(tmp_path / "token")}
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    with pytest.raises(EnvironmentFailure, match=r"spec\.environment\.kubeconfigSecretRef"):
        in_cluster_kubeconfig(tmp_path)


def trial(
    name: str,
    *,
    cluster: str = SERVER,
    slot: int = 0,
    phase: str = "AgentRunning",
    records: dict[str, Any] | None = None,
    pending: str | None = None,
) -> dict[str, Any]:
    annotations = {
        LEASE: Lease(cluster=cluster, slot=slot, secret="ns/lab").wire(),
        RECORDS: InjectionRecords(records or {}, list(records or {}), pending).wire(),
    }
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "annotations": annotations,
        },
        "status": {"phase": phase},
    }


def test_a_lease_is_held_while_its_trial_runs_or_still_carries_faults() -> None:
    trials = [
        trial("running", slot=0),
        trial("clean", slot=1, phase="Failed"),
        trial("stuck", slot=2, phase="Errored", records={"k": [{}]}),
        trial("interrupted", slot=3, phase="Errored", pending="k"),
        trial("elsewhere", cluster="https://other:6443", slot=4),
        trial("me", slot=5),
        {"metadata": {"name": "unleased", "namespace": "ns", "uid": "u"}, "status": {}},
    ]
    held, dirty = holders(trials, SERVER, "uid-me")
    assert held == {0: "ns/running", 2: "ns/stuck", 3: "ns/interrupted"}
    assert dirty == ["ns/stuck", "ns/interrupted"]


def test_a_restarted_operator_adopts_the_records_and_refuses_an_injection_cut_short(
    cluster: Cluster,
) -> None:
    path = cluster.kubeconfig  # the loopback API answers the environment's discovery
    lease = Lease(cluster=SERVER, slot=0, secret="ns/lab", provisioned_at=1000.0)
    change = {
        "change": {
            "op": "merge-patch",
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": "cart",
            "namespace": "otel-demo",
            "body": {"spec": {"replicas": 0}},
        },
        "before": {"metadata": {"name": "cart"}},
        "previousVariant": None,
    }
    env = LeasedClusterEnvironment(kubeconfig=path, lease=lease)
    env.resume(InjectionRecords({"uid/inject/0": [change]}, ["uid/decoy/0", "uid/inject/0"]))
    assert env.injections() == ["uid/decoy/0", "uid/inject/0"], "in the order they were made"
    assert not env.inject("uid/inject/0", []), "a recorded key is not injected again"
    [kept] = env.records()["uid/inject/0"]  # what removal will put back
    assert kept["before"] == change["before"] and kept["change"]["body"] == change["change"]["body"]
    env.close()
    cut = LeasedClusterEnvironment(kubeconfig=path, lease=lease)
    with pytest.raises(
        EnvironmentFailure,
        match=r"injection uid/inject/1 on https://10\.1\.2\.3:6443 never finished cleanly",
    ):
        cut.resume(InjectionRecords({}, ["uid/inject/1"], pending="uid/inject/1"))
    cut.close()


def test_a_cluster_that_cannot_be_reached_is_the_environments_failure(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig(server="https://127.0.0.1:1")))
    with pytest.raises(EnvironmentFailure, match=r"cluster https://127.0.0.1:1 is unreachable"):
        connect(LeasedClusterEnvironment, "https://127.0.0.1:1", kubeconfig=path)


def test_a_run_names_one_cluster_or_several_never_both() -> None:
    refs = [{"name": "a"}, {"name": "b"}]
    several = EnvironmentSpec.model_validate({"type": "cluster", "kubeconfigSecretRefs": refs})
    assert several.secret_names() == ["a", "b"]
    assert several.slots(4) == 2, "one slot per cluster at the default capacity"
    assert several.model_copy(update={"capacity": 3}).slots(4) == 4, "and the run's concurrency"
    assert EnvironmentSpec.model_validate({"type": "cluster"}).slots(4) == 1
    with pytest.raises(ValidationError, match=r"kubeconfigSecretRefs and spec\.environment\.kube"):
        EnvironmentSpec.model_validate(
            {"type": "cluster", "kubeconfigSecretRefs": refs, "kubeconfigSecretRef": {"name": "a"}}
        )
    with pytest.raises(ValidationError, match=r"kubeconfigSecretRefs names Secret\(s\) a more"):
        EnvironmentSpec.model_validate(
            {"type": "cluster", "kubeconfigSecretRefs": [{"name": "a"}, {"name": "a"}]}
        )


def test_the_run_condition_names_the_secrets_of_clusters_not_given_trials() -> None:
    environment = EnvironmentSpec.model_validate(
        {"type": "cluster", "kubeconfigSecretRefs": [{"name": "a"}, {"name": "b"}]}
    )
    run = {"metadata": {"annotations": {UNUSABLE: json.dumps({"ns/b": "cluster X is down"})}}}
    assert usable_condition(environment, run) == (
        False,
        "ClusterUnusable",
        "not given new trials: Secret ns/b: cluster X is down",
    )
    assert usable_condition(environment, {"metadata": {}}) == (
        True,
        "Usable",
        "every one of the run's 2 cluster(s) took trials when tried",
    )
    assert usable_condition(EnvironmentSpec(), run) is None, "a simulator run has no clusters"


def test_a_trials_snapshots_outlive_the_operators_memory_in_a_config_map_it_owns(
    cluster: Cluster,
) -> None:
    api = cluster.api
    sim = SimEnvironment(seed=3, namespace="otel-demo")
    sim.provision()
    snapshot = sim.snapshot()
    first = trial_evidence(TrialEvidence(), api, NS, "t", "uid-t")
    assert first.put_snapshot("uid-t/baseline", snapshot)
    assert not first.put_snapshot("uid-t/baseline", snapshot), "first write wins"
    # A new process: nothing in memory, the baseline read back from the ConfigMap.
    again = trial_evidence(TrialEvidence(), api, NS, "t", "uid-t")
    assert again.snapshot("uid-t/baseline") == snapshot
    assert again.snapshot("uid-t/sample/0") is None
    stored = api.config_map(NS, evidence_name("t"))
    assert stored is not None and list(stored) == ["baseline.json.gz.b64"]
    ref = api.core.read_namespaced_config_map(evidence_name("t"), NS).metadata.owner_references
    assert [(r.kind, r.name, r.uid) for r in ref] == [("Trial", "t", "uid-t")]
    # Over the object limit a snapshot stays in memory only (a restart would not find it).
    full = trial_evidence(TrialEvidence(), api, NS, "t", "uid-t")
    full._kept = {"padding": "x" * EVIDENCE_BYTES}
    assert full.put_snapshot("uid-t/sample/0", snapshot)
    assert full.snapshot("uid-t/sample/0") == snapshot
    assert trial_evidence(TrialEvidence(), api, NS, "t", "uid-t").snapshot("uid-t/sample/0") is None


def test_a_trial_passes_over_a_cluster_that_cannot_be_reached_and_the_run_is_told(
    cluster: Cluster, tmp_path: Path
) -> None:
    api = cluster.api
    down = yaml.safe_dump(kubeconfig(server="https://127.0.0.1:1"))
    for name, text in (("down", down), ("up", cluster.kubeconfig.read_text())):
        api.core.create_namespaced_secret(
            NS,
            {"metadata": {"name": name, "namespace": NS}, "stringData": {"kubeconfig": text}},
        )
    catalog, _ = load_catalog(SCENARIOS)
    scenario = catalog.get("checkout-memory-limit")

    def context(trial: str, *secrets: str) -> TrialContext:
        environment = {"type": "cluster", "kubeconfigSecretRefs": [{"name": s} for s in secrets]}
        spec = {
            "runRef": {"name": "r"},
            "agentRef": {"name": "null"},
            "scenario": scenario.metadata.name,
            "attempt": 0,
            "seed": 1,
            "environment": environment,
        }
        cluster.apply(
            {
                "apiVersion": "itbench.io/v1alpha1",
                "kind": "Trial",
                "metadata": {"name": trial, "namespace": NS},
                "spec": spec,
            }
        )
        body = cluster.get("trials", trial)
        assert body is not None
        return TrialContext(
            uid=body["metadata"]["uid"],
            name=f"{NS}.{trial}",
            spec=TrialSpec.model_validate(spec),
            scenario=scenario,
            agent_name="null",
        )

    cluster.apply(benchmark_run("r", "null", [scenario.metadata.name]))
    targets = ClusterTargets(api, workdir=tmp_path)
    # Both clusters have a free slot; the first listed cannot be reached, so the trial takes
    # the second.
    env = targets(context("t", "down", "up"))
    try:
        assert env.lease is not None and env.lease.secret == f"{NS}/up"
    finally:
        env.close()
    trial = cluster.get("trials", "t")
    assert trial is not None and Lease.of(trial) == env.lease
    assert lease_condition(trial) == (
        True,
        "ClusterLeased",
        f"slot 0 of cluster {env.lease.cluster} (Secret {NS}/up)",
    )
    run = cluster.get("benchmarkruns", "r")
    assert run is not None
    unusable = json.loads(run["metadata"]["annotations"][UNUSABLE])
    assert list(unusable) == [f"{NS}/down"]
    assert unusable[f"{NS}/down"].startswith("cluster https://127.0.0.1:1 is unreachable")
    # With no cluster of the run usable the trial is the environment's failure.
    with pytest.raises(EnvironmentFailure, match=r"cluster https://127\.0\.0\.1:1 is unreachable"):
        targets(context("t2", "down"))
