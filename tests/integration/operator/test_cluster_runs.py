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
from itbench.operator.clusters import LEASE, RECORDS
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


def cluster_run(name: str, agent_name: str, secret: str = SECRET, **spec: Any) -> dict[str, Any]:
    return benchmark_run(
        name,
        agent_name,
        [SCENARIO],
        environment={"type": "cluster", "kubeconfigSecretRef": {"name": secret}},
        # The twin runs 30 times faster than the wall clock, playbooks do not: recovery gets
        # an hour of its time (two minutes) for the removal and its alerts to clear. Seed 5
        # draws two decoys per trial (annotation edits), the fewest: each is a playbook run.
        **{"trialsPerScenario": 1, "seed": SEED, "timeouts": {"recoverySeconds": 3600}, **spec},
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
    """Counts the fault playbooks ansible-runner runs (by playbook), then runs them for real."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.runs: Counter[str] = Counter()
        self._lock = threading.Lock()
        real = AnsiblePlaybookRunner.run
        count = self

        def run(runner: AnsiblePlaybookRunner, playbook: str, extravars: Any) -> None:
            with count._lock:
                count.runs[playbook] += 1
            real(runner, playbook, extravars)

        monkeypatch.setattr(AnsiblePlaybookRunner, "run", run)


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


@pytest.mark.slow
async def test_oracle_passes_and_null_fails_on_a_cluster_registered_by_a_secret_one_lease_at_a_time(
    live: Lab, twin: ServedCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = baseline_of(twin, tmp_path)
    playbooks = PlaybookCount(monkeypatch)
    server = register(live, twin, tmp_path)
    await live.start()
    await ready_scenarios(live, SCENARIO)
    await ready_agent(live, agent("oracle", {"builtin": {"name": "oracle"}}))
    await ready_agent(live, agent("null", {"builtin": {"name": "null"}}))
    # Both runs target the one cluster (capacity 1): their trials take its lease in turn.
    live.cluster.apply(cluster_run("oracle-live", "oracle", allowOracle=True))
    live.cluster.apply(cluster_run("null-live", "null"))
    seen: dict[str, set[str]] = {"leased-at-once": set(), "waiting": set()}

    def watch() -> bool:
        trials = trials_of(live, "oracle-live") + trials_of(live, "null-live")
        running = [
            t["metadata"]["name"]
            for t in trials
            if annotation(t, LEASE)
            and (t.get("status") or {}).get("phase") not in ("Succeeded", "Failed", "Errored")
        ]
        seen["leased-at-once"].add(str(len(running)))
        for t in trials:
            message = (t.get("status") or {}).get("message", "")
            if "waiting for a lease on cluster" in message:
                seen["waiting"].add(message)
        return False

    task = asyncio.ensure_future(until(watch, within=1200))
    try:
        await finish(live, "oracle-live", "null-live", within=900)
    finally:
        task.cancel()
    oracle = status_of(live, "benchmarkruns", "oracle-live")
    null = status_of(live, "benchmarkruns", "null-live")
    assert oracle["phase"] == "Succeeded", oracle
    assert oracle["summary"]["succeeded"] == 1 and oracle["summary"]["errored"] == 0
    assert oracle["summary"]["mitigationPassAt1"] == 1.0
    assert null["phase"] == "Failed", null
    assert null["summary"]["failed"] == 1 and null["summary"]["errored"] == 0
    [oracle_trial] = trials_of(live, "oracle-live")
    [null_trial] = trials_of(live, "null-live")
    assert oracle_trial["status"]["phase"] == "Succeeded"
    assert oracle_trial["status"]["clock"] == "wall"
    assert null_trial["status"]["phase"] == "Failed"
    injected = 0
    for trial in (oracle_trial, null_trial):
        lease = annotation(trial, LEASE)
        assert lease["cluster"] == server and lease["slot"] == 0
        assert lease["secret"] == f"{NS}/{SECRET}"
        records = annotation(trial, RECORDS)
        uid = trial["metadata"]["uid"]
        assert f"{uid}/inject/0" in records["order"], "the fault was injected (with its decoys)"
        assert records["records"] == {} and records["pending"] is None, "and everything removed"
        injected += len(records["order"])
    assert seen["leased-at-once"] <= {"0", "1"}, "never two trials on a cluster of capacity 1"
    assert seen["waiting"], "the trial without the lease said what it waited for"
    assert all(server in m for m in seen["waiting"])
    # Every key injected once and removed once, through the playbooks (each is one patch).
    assert playbooks.runs["faults/object-patch.yaml"] == injected, (playbooks.runs, injected)
    assert playbooks.runs["faults/restore.yaml"] == injected, (playbooks.runs, injected)
    assert differences(before, baseline_of(twin, tmp_path)) == [], "the cluster is at baseline"


@pytest.mark.slow
async def test_an_operator_restarted_mid_trial_takes_the_trial_over_without_injecting_again(
    cluster: Cluster,
    twin: ServedCluster,
    collections: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = config_for(collections)
    first = cluster_lab(cluster, config)
    before = baseline_of(twin, tmp_path)
    playbooks = PlaybookCount(monkeypatch)
    register(first, twin, tmp_path)
    handle = await first.start(config)
    second: Lab | None = None
    try:
        await ready_scenarios(first, SCENARIO)
        await ready_agent(first, agent("null", {"builtin": {"name": "null"}}))
        first.cluster.apply(cluster_run("restart-live", "null"))

        def injected() -> bool:
            # Every injection (the fault and its decoys) made and recorded: the first
            # operator's tick, which runs on in its thread after the kill, injects no more.
            trials = trials_of(first, "restart-live")
            if not trials:
                return False
            records = annotation(trials[0], RECORDS)
            return records.get("pending") is None and len(records.get("records") or {}) == (
                injections_of(trials[0])
            )

        await until(injected, within=300, what="the fault injected and recorded on the Trial")
        # The tick that injected may not have written its status yet: the second operator then
        # replays the trial from an earlier phase and asks for every injection again.
        await handle.kill()
        # A new operator without the first one's environments: the cluster environment is
        # rebuilt from the Trial's lease and injection records. (Gateway sessions and evidence
        # outlive an operator instance in the lab, as in every restart test of the operator.)
        second = Lab(
            cluster=cluster,
            environments=EnvironmentRegistry(operator_environments(cluster.api, config)),
            sessions=first.sessions,
            evidence=first.evidence,
        )
        await second.start(config)
        done = await until(
            lambda: finished(second, "restart-live"), within=600, what="the run finished"
        )
    finally:
        await handle.kill()
        if second is not None:
            for h in second.operators:
                await h.kill()
    [trial] = trials_of(second, "restart-live")
    assert trial["status"]["phase"] == "Failed", trial_states(second, "restart-live")
    assert done["summary"]["failed"] == 1
    assert second.environments.created == 1, "rebuilt from the lease on the Trial"
    records = annotation(trial, RECORDS)
    assert f"{trial['metadata']['uid']}/inject/0" in records["order"]
    # The fault and its decoys (one patch each) were made once, by the first operator, and
    # removed by the second one, which had adopted their records.
    made = len(records["order"])
    assert playbooks.runs["faults/object-patch.yaml"] == made, (playbooks.runs, made)
    assert playbooks.runs["faults/restore.yaml"] == made, (playbooks.runs, made)
    assert records["records"] == {} and records["pending"] is None
    after = baseline_of(twin, tmp_path)
    assert differences(before, after) == [], changed(before, after)


@pytest.mark.slow
async def test_a_cluster_that_becomes_unreachable_errors_its_trials_and_the_run_ends(
    live: Lab, tmp_path: Path
) -> None:
    served = start_twin(tmp_path / "doomed", seed=32)
    try:
        register(live, served, tmp_path, name="doomed")
        await live.start()
        await ready_scenarios(live, SCENARIO)
        await ready_agent(live, agent("null", {"builtin": {"name": "null"}}))
        live.cluster.apply(cluster_run("doomed-live", "null", secret="doomed", trialsPerScenario=2))

        def injected() -> bool:
            return any(
                annotation(t, RECORDS).get("records") for t in trials_of(live, "doomed-live")
            )

        await until(injected, within=300, what="a fault injected on the cluster")
    finally:
        served.stop()
    status = await until(lambda: finished(live, "doomed-live"), within=300, what="the run finished")
    assert status["phase"] == "Errored"
    assert status["summary"]["errored"] == 2 and status["summary"]["failed"] == 0
    trials = trials_of(live, "doomed-live")
    assert [t["status"]["phase"] for t in trials] == ["Errored", "Errored"]
    assert {t["status"]["reason"] for t in trials} == {"EnvironmentFailure"}
    messages = sorted(t["status"]["message"] for t in trials)
    assert all(m.startswith("environment: ") for m in messages), messages
    assert any("may still carry faults" in m for m in messages), messages
    # A new operator process is asked to delete the Trial whose faults are still recorded on
    # it: it tries to rebuild the environment to remove them, and waits for the cluster until
    # the user lets go.
    for handle in live.operators:
        await handle.kill()
    fresh = cluster_lab(live.cluster, config_for(kubernetes_core()))
    await fresh.start(config_for(kubernetes_core()))
    try:
        [stuck] = [t for t in trials if annotation(t, RECORDS).get("records")]
        name = stuck["metadata"]["name"]
        live.cluster.kubectl("delete", "trial", name, "--wait=false")
        blocked = await until(
            lambda: [e for e in live.cluster.events(name) if e["reason"] == "ReleaseBlocked"],
            what="the deletion blocked on the unreachable cluster",
        )
        assert "cannot rebuild the environment" in blocked[0]["message"]
        assert live.cluster.get("trials", name) is not None, "not deleted while faults remain"
        live.cluster.kubectl("annotate", "trial", name, "itbench.io/force-release=true")
        await until(lambda: live.cluster.get("trials", name) is None, what="the Trial released")
    finally:
        for handle in fresh.operators:
            await handle.kill()


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
    assert trials_of(live, "nowhere") == trials_of(live, "garbled") == trials_of(live, "unused")
    assert trials_of(live, "nowhere") == []
