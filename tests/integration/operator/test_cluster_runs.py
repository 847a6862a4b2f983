"""The operator on live clusters: BenchmarkRuns with `environment.type: cluster` run their Trials
on a served twin registered by a kubeconfig Secret, through the real fault playbooks
(ansible-runner, kubernetes.core) and a real Prometheus evaluating the generated alert rules.

The operator's own API is the loopback server; the target cluster is a separate served twin.
"""

from __future__ import annotations

import asyncio
import base64
import difflib
import json
import shutil
import threading
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import pytest_asyncio
import yaml
from operator_lab import (
    FAST,
    NS,
    SCENARIOS,
    Cluster,
    Lab,
    agent,
    benchmark_run,
    ready_agent,
    ready_scenarios,
    status_of,
    trials_of,
    until,
)

from itbench.catalog_files import load_catalog
from itbench.core.decoys import decoys_for
from itbench.environments.kube.baseline import differences, read_baseline
from itbench.environments.kube.faults import AnsiblePlaybookRunner
from itbench.environments.served.server import ServedCluster
from itbench.environments.sim.environment import SimEnvironment
from itbench.operator.clusters import LEASE, RECORDS, evidence_name
from itbench.operator.runtime import EnvironmentRegistry, OperatorConfig, operator_environments
from tests.kube_collection import kubernetes_core

pytestmark = pytest.mark.asyncio

APP = "otel-demo"
SCENARIO = "checkout-memory-limit"
"""One fault (kubernetes.memory-limit: object-patch.yaml, then restore.yaml on removal), which
the cluster fault tests run too; its ContainerOOMKilled alert fires in the real Prometheus."""
SPEED = 30.0
"""Twin seconds per wall second."""
SECRET = "lab-cluster"
USABLE_KUBECONFIG = yaml.safe_dump(
    {
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c",
    }
)
"""A kubeconfig a client can use (of a cluster nobody reaches: only the Secret is checked)."""
SEED = 5


def start_twin(workdir: Path, seed: int) -> ServedCluster:
    if shutil.which("prometheus") is None:
        pytest.skip("prometheus is not installed (apt-get install prometheus)")
    return ServedCluster(
        SimEnvironment(seed=seed, namespace=APP), speed=SPEED, prometheus="", workdir=workdir
    ).start()


@pytest.fixture
def twin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedCluster]:
    """A served twin with a real Prometheus (one per test: a failed test leaves its faults)."""
    served = start_twin(tmp_path_factory.mktemp("twin"), seed=31)
    try:
        yield served
    finally:
        served.stop()


@pytest.fixture(scope="module")
def collections() -> str:
    return kubernetes_core()


def config_for(collections: str) -> OperatorConfig:
    # Ticks a little apart: every tick of a cluster trial reads the cluster and its Prometheus.
    return replace(FAST, trial_tick_seconds=0.2, collections_path=collections)


def cluster_lab(cluster: Cluster, config: OperatorConfig) -> Lab:
    return Lab(
        cluster=cluster,
        environments=EnvironmentRegistry(operator_environments(cluster.api, config)),
    )


@pytest_asyncio.fixture
async def live(cluster: Cluster, collections: str) -> AsyncIterator[Lab]:
    lab = cluster_lab(cluster, config_for(collections))
    try:
        yield lab
    finally:
        for handle in lab.operators:
            await handle.kill()


def register(lab: Lab, served: ServedCluster, tmp: Path, name: str = SECRET) -> str:
    """Put the twin's kubeconfig into a Secret of the lab's namespace; return its server URL."""
    path = tmp / f"{name}.kubeconfig"
    config = served.kubeconfig(path)
    lab.cluster.api.core.create_namespaced_secret(
        NS,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": NS},
            "data": {"kubeconfig": base64.b64encode(path.read_bytes()).decode()},
        },
    )
    return str(config["clusters"][0]["cluster"]["server"])


def cluster_run(
    name: str, agent_name: str, secret: str | list[str] = SECRET, **spec: Any
) -> dict[str, Any]:
    refs = (
        {"kubeconfigSecretRefs": [{"name": n} for n in secret]}
        if isinstance(secret, list)
        else {"kubeconfigSecretRef": {"name": secret}}
    )
    return benchmark_run(
        name,
        agent_name,
        [SCENARIO],
        environment={"type": "cluster", **refs},
        # The twin runs 30 times faster than the wall clock, playbooks do not: recovery gets
        # an hour of its time (two minutes) for the removal and its alerts to clear. Seed 5
        # draws two decoys per trial (annotation edits), the fewest: each is a playbook run.
        **{
            "trialsPerScenario": 1,
            "seed": SEED,
            "timeouts": {"recoverySeconds": 3600},
            "concurrency": 2,
            **spec,
        },
    )


def annotation(trial: Mapping[str, Any], key: str) -> dict[str, Any]:
    text = (trial["metadata"].get("annotations") or {}).get(key)
    return json.loads(text) if text else {}


def changed(before: dict[Any, bytes], after: dict[Any, bytes]) -> str:
    """What differs between two baselines, as unified diffs (for a failure's message)."""
    out = []
    for key in differences(before, after):
        old = before.get(key, b"").decode().splitlines()
        new = after.get(key, b"").decode().splitlines()
        out.append("\n".join(difflib.unified_diff(old, new, str(key), str(key), lineterm="")))
    return "\n".join(out)


def baseline_of(served: ServedCluster, tmp: Path) -> dict[Any, bytes]:
    path = tmp / "reader.kubeconfig"
    served.kubeconfig(path)
    client = kubernetes.config.new_client_from_config(config_file=str(path))
    try:
        return read_baseline(client, APP)
    finally:
        client.close()


class PlaybookCount:
    """Counts the fault playbooks ansible-runner runs (by cluster and playbook), then runs
    them for real."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.runs: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()
        real = AnsiblePlaybookRunner.run
        count = self

        def run(runner: AnsiblePlaybookRunner, playbook: str, extravars: Any) -> None:
            assert runner.kubeconfig is not None
            config = yaml.safe_load(Path(runner.kubeconfig).read_text(encoding="utf-8"))
            server = str(config["clusters"][0]["cluster"]["server"])
            with count._lock:
                count.runs[server, playbook] += 1
            real(runner, playbook, extravars)

        monkeypatch.setattr(AnsiblePlaybookRunner, "run", run)

    def on(self, server: str) -> Counter[str]:
        """The playbooks run against one cluster."""
        with self._lock:
            return Counter({p: n for (s, p), n in self.runs.items() if s == server})


def injections_of(trial: Mapping[str, Any]) -> int:
    """How many injections a Trial makes: its scenario's faults and its seed's decoys."""
    catalog, _ = load_catalog(SCENARIOS)
    scenario = catalog.get(trial["spec"]["scenario"])
    return len(scenario.spec.faults) + len(decoys_for(scenario, trial["spec"]["seed"]))


def trial_states(lab: Lab, *runs: str) -> str:
    """Where each Trial of the runs stands (for a failure's message)."""
    lines = []
    for run in runs:
        for t in trials_of(lab, run):
            status = t.get("status") or {}
            steps = [
                f"{e.get('phase')}@{str(e.get('time'))[11:19]}"
                for e in status.get("timeline") or []
            ]
            lines.append(
                f"{t['metadata']['name']}: {status.get('phase')} {status.get('reason')} "
                f"{status.get('message')} via {steps}"
            )
    return "\n".join(lines)


async def finish(lab: Lab, *runs: str, within: float) -> None:
    """Wait until every run is final; a timeout says where each Trial stands."""
    try:
        await until(lambda: all(finished(lab, r) for r in runs), within=within, what="runs")
    except AssertionError:
        raise AssertionError(f"runs not finished:\n{trial_states(lab, *runs)}") from None


def finished(lab: Lab, run: str) -> dict[str, Any] | None:
    status = status_of(lab, "benchmarkruns", run)
    return status if status.get("phase") in ("Succeeded", "Failed", "Errored") else None


def leased_on(trial: Mapping[str, Any]) -> str:
    """The Secret of the cluster a Trial's lease is on ("" without one)."""
    return str(annotation(trial, LEASE).get("secret", ""))


def final(trial: Mapping[str, Any]) -> bool:
    return (trial.get("status") or {}).get("phase") in ("Succeeded", "Failed", "Errored")


@pytest.mark.slow
async def test_two_clusters_run_trials_in_parallel_survive_a_restart_and_a_lost_cluster(
    cluster: Cluster,
    twin: ServedCluster,
    collections: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two served twins registered by two Secrets. The null run's two trials take one cluster
    each; the oracle run waits for a lease. Twin b is stopped mid-trial: only its trial ends
    Errored and the run is told b takes no more trials. The operator is then killed (its
    sessions and evidence die with it) and a new one takes the trial on a over: no playbook
    runs again, the trial is scored against the baseline kept on the API, the oracle trial
    runs on a after it, and a is byte for byte at its baseline at the end."""
    config = config_for(collections)
    doomed = start_twin(tmp_path / "b", seed=32)
    first = cluster_lab(cluster, config)
    second: Lab | None = None
    before = baseline_of(twin, tmp_path)
    playbooks = PlaybookCount(monkeypatch)
    server = register(first, twin, tmp_path, name="lab-a")
    register(first, doomed, tmp_path, name="lab-b")
    both = ["lab-a", "lab-b"]
    a, b = f"{NS}/lab-a", f"{NS}/lab-b"
    handle = await first.start(config)
    seen: dict[str, set[str]] = {"together": set(), "on-a-at-once": set(), "waiting": set()}

    def watch() -> bool:
        trials = trials_of(first, "null-live") + trials_of(first, "oracle-live")
        running = [leased_on(t) for t in trials if leased_on(t) and not final(t)]
        seen["together"].add(",".join(sorted(running)))
        seen["on-a-at-once"].add(str(running.count(a)))
        for t in trials:
            message = (t.get("status") or {}).get("message", "")
            if "waiting for a lease on cluster" in message:
                seen["waiting"].add(message)
        return False

    task = asyncio.ensure_future(until(watch, within=1800))
    try:
        await ready_scenarios(first, SCENARIO)
        await ready_agent(first, agent("oracle", {"builtin": {"name": "oracle"}}))
        await ready_agent(first, agent("null", {"builtin": {"name": "null"}}))
        first.cluster.apply(cluster_run("null-live", "null", both, trialsPerScenario=2))

        def on(secret: str) -> dict[str, Any] | None:
            found = [t for t in trials_of(first, "null-live") if leased_on(t) == secret]
            return found[0] if found else None

        await until(lambda: on(a) and on(b), within=120, what="a lease on each cluster")
        # Both clusters are leased: the oracle's trial waits for a free slot on either.
        first.cluster.apply(cluster_run("oracle-live", "oracle", both, allowOracle=True))
        await until(
            lambda: annotation(on(b) or {}, RECORDS).get("records"),
            within=300,
            what="a fault injected on cluster b",
        )
        # b goes away; its trial ends Errored by whichever operator process sees it first (the
        # kill below does not wait for it, so a's trial is still mid-way when it comes).
        doomed.stop()

        def injected() -> bool:
            # Every injection on a made and recorded: the first operator's tick, which runs on
            # in its thread after the kill, injects no more.
            trial = on(a) or {}
            records = annotation(trial, RECORDS)
            return (
                bool(trial)
                and records.get("pending") is None
                and (len(records.get("records") or {}) == injections_of(trial))
            )

        await until(injected, within=300, what="the fault injected and recorded on a's Trial")
        await handle.kill()
        assert not final(on(a) or {}), "killed mid-trial"
        # A new operator process: no environments, gateway sessions or evidence of the first.
        second = cluster_lab(cluster, config)
        await second.start(config)
        await finish(second, "null-live", "oracle-live", within=900)
        assert final(on(b) or {}), "b's trial ended"
        # The trial b errored still records its faults: deleting it waits for the cluster
        # (the new operator tries to rebuild its environment) until the user lets go.
        stuck = on(b)
        assert stuck is not None
        name = stuck["metadata"]["name"]
        cluster.kubectl("delete", "trial", name, "--wait=false")
        blocked = await until(
            lambda: [e for e in cluster.events(name) if e["reason"] == "ReleaseBlocked"],
            what="the deletion blocked on the unreachable cluster",
        )
        assert "cannot rebuild the environment" in blocked[0]["message"]
        assert cluster.get("trials", name) is not None, "not deleted while faults remain"
        cluster.kubectl("annotate", "trial", name, "itbench.io/force-release=true")
        await until(lambda: cluster.get("trials", name) is None, what="the Trial released")
    finally:
        task.cancel()
        await handle.kill()
        for h in second.operators if second is not None else []:
            await h.kill()
        doomed.stop()
    assert second is not None
    # Parallel: both clusters held a running trial's lease at once; a, of capacity 1, one.
    assert f"{a},{b}" in seen["together"], seen["together"]
    assert seen["on-a-at-once"] <= {"0", "1"}, "never two trials on a cluster of capacity 1"
    assert seen["waiting"], "the trial without a lease said what it waited for"
    assert all(server in m for m in seen["waiting"]), seen["waiting"]
    oracle = status_of(second, "benchmarkruns", "oracle-live")
    null = status_of(second, "benchmarkruns", "null-live")
    assert oracle["phase"] == "Succeeded", oracle
    assert oracle["summary"]["succeeded"] == 1 and oracle["summary"]["errored"] == 0
    assert oracle["summary"]["mitigationPassAt1"] == 1.0
    # Only b's trial errored (the environment's failure, never the agent's); a's was scored.
    assert null["phase"] == "Failed", null
    assert null["summary"]["failed"] == 1 and null["summary"]["errored"] == 1, null["summary"]
    [oracle_trial] = trials_of(second, "oracle-live")
    [null_trial] = trials_of(second, "null-live")  # b's was deleted
    assert oracle_trial["status"]["phase"] == "Succeeded"
    assert oracle_trial["status"]["clock"] == "wall"
    assert null_trial["status"]["phase"] == "Failed", trial_states(second, "null-live")
    assert null_trial["status"]["scores"]["mitigation"]["passed"] is False
    assert stuck["status"]["phase"] == "Errored"
    assert stuck["status"]["reason"] == "EnvironmentFailure"
    assert stuck["status"]["message"].startswith("environment: "), stuck["status"]["message"]
    # The oracle's run was told why b took no trial: unreachable, and carrying faults.
    [usable] = [c for c in oracle["conditions"] if c["type"] == "ClustersUsable"]
    assert usable["status"] == "False" and usable["reason"] == "ClusterUnusable"
    assert f"Secret {b}: cluster" in usable["message"] and "is unreachable" in usable["message"]
    assert "may still carry faults" in usable["message"], usable["message"]
    # Each Trial says where it ran.
    for trial in (oracle_trial, null_trial):
        [leased] = [c for c in trial["status"]["conditions"] if c["type"] == "Leased"]
        assert leased["message"] == f"slot 0 of cluster {server} (Secret {a})"
    # So does the run's report: each trial's record names its cluster, and the errored trial's
    # entry the cluster that was lost.
    stored = cluster.api.config_map(NS, null["reportRef"].removeprefix("configmap/"))
    assert stored is not None
    records = {
        r["trial"]: r["cluster"]
        for r in map(json.loads, stored["trials.jsonl"].splitlines())
        if r.get("trial")
    }
    lost = f"{b} ({doomed.api_url})"
    assert records == {
        null_trial["metadata"]["name"]: f"{a} ({server})",
        stuck["metadata"]["name"]: lost,
    }
    [errored] = [
        e for r in json.loads(stored["report.json"])["agents"] for e in r["errored"]["trials"]
    ]
    assert (errored["trial"], errored["cluster"]) == (stuck["metadata"]["name"], lost)
    # The restarted operator rebuilt a's trial from its lease, then built the oracle's.
    assert second.environments.created == 2
    baseline = cluster.api.config_map(NS, evidence_name(null_trial["metadata"]["name"]))
    assert baseline is not None and "baseline.json.gz.b64" in baseline
    made = 0
    for trial in (oracle_trial, null_trial):
        lease = annotation(trial, LEASE)
        assert lease["cluster"] == server and lease["slot"] == 0 and lease["secret"] == a
        records = annotation(trial, RECORDS)
        uid = trial["metadata"]["uid"]
        assert f"{uid}/inject/0" in records["order"], "the fault was injected (with its decoys)"
        assert records["records"] == {} and records["pending"] is None, "and everything removed"
        made += len(records["order"])
    # On a, every key injected once (the killed operator's included: none made again) and
    # removed once, through the playbooks (each is one patch).
    runs = playbooks.on(server)
    assert runs["faults/object-patch.yaml"] == made, (runs, made)
    assert runs["faults/restore.yaml"] == made, (runs, made)
    after = baseline_of(twin, tmp_path)
    assert differences(before, after) == [], changed(before, after)


async def test_a_missing_or_unusable_kubeconfig_secret_is_named_in_the_runs_condition(
    live: Lab,
) -> None:
    await live.start()
    await ready_scenarios(live, SCENARIO)
    await ready_agent(live, agent("null", {"builtin": {"name": "null"}}))
    live.cluster.apply(cluster_run("nowhere", "null", secret="absent"))
    live.cluster.api.core.create_namespaced_secret(
        NS,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "garbled", "namespace": NS},
            "stringData": {"kubeconfig": "clusters: [oops"},
        },
    )
    live.cluster.apply(cluster_run("garbled", "null", secret="garbled"))
    unused = cluster_run("unused", "null", secret="garbled")
    unused["spec"]["environment"]["type"] = "simulator"
    live.cluster.apply(unused)
    both = cluster_run("both", "null", secret=["garbled"])
    both["spec"]["environment"]["kubeconfigSecretRef"] = {"name": "garbled"}
    live.cluster.apply(both)
    live.cluster.apply(cluster_run("half", "null", secret=["usable", "absent"]))
    live.cluster.api.core.create_namespaced_secret(
        NS,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "usable", "namespace": NS},
            "stringData": {"kubeconfig": USABLE_KUBECONFIG},
        },
    )

    def valid(run: str) -> dict[str, Any] | None:
        conditions = status_of(live, "benchmarkruns", run).get("conditions") or []
        found = [c for c in conditions if c["type"] == "Valid" and c["status"] == "False"]
        return found[0] if found else None

    missing = await until(lambda: valid("nowhere"), what="nowhere's Valid condition")
    garbled = await until(lambda: valid("garbled"), what="garbled's Valid condition")
    assert status_of(live, "benchmarkruns", "nowhere")["phase"] == "Pending"
    assert missing["reason"] == "KubeconfigSecretNotFound"
    assert "spec.environment.kubeconfigSecretRef" in missing["message"]
    assert f"Secret {NS}/absent" in missing["message"]
    assert status_of(live, "benchmarkruns", "garbled")["phase"] == "Invalid"
    assert garbled["reason"] == "KubeconfigSecretInvalid"
    assert "spec.environment.kubeconfigSecretRef" in garbled["message"]
    assert "is not YAML" in garbled["message"]
    ignored = await until(lambda: valid("unused"), what="unused's Valid condition")
    assert ignored["reason"] == "KubeconfigSecretUnused"
    assert "spec.environment.kubeconfigSecretRef is set" in ignored["message"]
    # One cluster or several, never both; with several, every Secret is checked.
    twice = await until(lambda: valid("both"), what="both's Valid condition")
    assert twice["reason"] == "InvalidSpec"
    assert (
        "spec.environment.kubeconfigSecretRefs and spec.environment.kubeconfigSecretRef"
        in (twice["message"])
    )
    half = await until(lambda: valid("half"), what="half's Valid condition")
    assert half["reason"] == "KubeconfigSecretNotFound"
    assert f"Secret {NS}/absent (spec.environment.kubeconfigSecretRefs)" in half["message"]
    assert trials_of(live, "both") == trials_of(live, "half") == []
    assert trials_of(live, "nowhere") == trials_of(live, "garbled") == trials_of(live, "unused")
    assert trials_of(live, "nowhere") == []
