"""End to end on kind: BenchmarkRuns of `environment.type: cluster` on the operator's own cluster
(the pinned stack installed by `make stack-up`, the chart by `make kind-install`), with the oracle
and the null agent over scenarios that together use every fault mechanism. Results land in
status; deleting the runs removes every fault and the shop is back at its baseline, object for
object. Statuses, Trials and reports are written to ITBENCH_E2E_ARTEFACTS for the workflow.

Everything goes through the official kubernetes client against the current kubeconfig context.
The scenario choice is checked here too (`test_the_chosen_scenarios_cover_every_mechanism`,
not marked e2e: it runs in `make test`).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from itbench.catalog_files import load_catalog
from itbench.core.faults import get_fault
from itbench.core.models.scenario import Scenario
from itbench.stack import release

ROOT = Path(__file__).resolve().parents[2]
APP = release()["namespace"]
GROUP, VERSION = "itbench.io", "v1alpha1"
RUN_MINUTES = 130
"""How long both runs may take together (the trials share the cluster's one lease)."""
CLEAN_MINUTES = 15
"""How long the deletion of both runs may take (each Trial's finalizer removes its faults)."""
FINAL = ("Succeeded", "Failed", "Errored")
CHAOS_KINDS = ("podchaos", "networkchaos", "stresschaos", "httpchaos", "jvmchaos", "schedules")

T = TypeVar("T")


# ---- which scenarios: every fault mechanism, the fewest trials --------------------------------
def mechanisms(scenario: Scenario) -> set[str]:
    """The injection mechanisms a scenario's faults use: `<mechanism>:<op>` for each change they
    make (object patch, create, delete, flagd flag, rollout, Chaos Mesh experiment), plus
    `<mechanism>:<op>:<kind>` for the changes that work apart: a cordoned Node, a ResourceQuota,
    and each kind of Chaos Mesh experiment (each has its own injection path: tc and ipset for
    network faults, cgroups for stress, the JVM agent, the HTTP proxy, container kills, the
    scheduler)."""
    found: set[str] = set()
    spec = scenario.spec
    for fault in spec.faults:
        definition = get_fault(fault.id)
        for change in definition.changes(fault.args, spec.environment.namespace):
            found.add(f"{definition.mechanism.value}:{change.op}")
            if change.kind in ("Node", "ResourceQuota") or definition.mechanism.value == (
                "chaos-mesh"
            ):
                found.add(f"{definition.mechanism.value}:{change.op}:{change.kind}")
    return found


def covering_scenarios() -> list[str]:
    """SRE scenarios whose faults together use every mechanism the SRE catalog uses: a greedy
    cover, simplest scenarios (fewest faults, then name) first."""
    catalog, problems = load_catalog(ROOT / "scenarios")
    assert not problems, problems
    candidates = sorted(
        (s for s in catalog if s.spec.domain.value == "SRE" and s.spec.faults),
        key=lambda s: (len(s.spec.faults), s.metadata.name),
    )
    wanted = set().union(*(mechanisms(s) for s in candidates))
    chosen: list[str] = []
    while wanted:
        best = max(candidates, key=lambda s: len(mechanisms(s) & wanted))
        chosen.append(best.metadata.name)
        wanted -= mechanisms(best)
    return sorted(chosen)


def test_the_chosen_scenarios_cover_every_mechanism() -> None:
    chosen = covering_scenarios()
    catalog, _ = load_catalog(ROOT / "scenarios")
    covered = set().union(*(mechanisms(catalog.get(n)) for n in chosen))
    assert covered >= {
        "kubernetes:merge-patch",  # object patch
        "kubernetes:create",  # object create
        "kubernetes:delete",
        "flagd:set-flag",  # flagd flag
        "flagd:rollout",  # the rollout that makes the flag take effect
        "chaos-mesh:create",  # a Chaos Mesh experiment
        "kubernetes:merge-patch:Node",  # node cordon
        "kubernetes:create:ResourceQuota",  # quota
    }
    every = set().union(*(mechanisms(s) for s in catalog if s.spec.domain.value == "SRE"))
    assert covered == every
    for kind in ("NetworkChaos", "StressChaos", "PodChaos", "HTTPChaos", "JVMChaos", "Schedule"):
        assert f"chaos-mesh:create:{kind}" in covered
    assert len(chosen) <= 8, "each is a trial per agent on a shared cluster"


# ---- the kind flow ------------------------------------------------------------------------------
def until(what: str, minutes: float, probe: Callable[[], T | None]) -> T:
    deadline = time.monotonic() + minutes * 60
    while True:
        got = probe()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {minutes} minutes")
        time.sleep(10)


@pytest.fixture(scope="module")
def kube() -> Iterator[Any]:
    kubernetes = pytest.importorskip("kubernetes")
    kubernetes.config.load_kube_config()
    client = kubernetes.client.ApiClient()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture(scope="module")
def artefacts() -> Path:
    path = Path(os.environ.get("ITBENCH_E2E_ARTEFACTS", ROOT / "build" / "e2e")) / "cluster-runs"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def namespace(kube: Any) -> Iterator[str]:
    from kubernetes import client

    name = f"itbench-e2e-cluster-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api(kube)
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)


def _objects(kube: Any) -> Any:
    from kubernetes import client

    return client.CustomObjectsApi(kube)


def _apply_scenarios(kube: Any, names: list[str]) -> None:
    from kubernetes.client.exceptions import ApiException

    api = _objects(kube)
    for name in names:
        [path] = list((ROOT / "scenarios").glob(f"*/{name}/scenario.yaml"))
        body = yaml.safe_load(path.read_text(encoding="utf-8"))
        try:
            api.create_cluster_custom_object(GROUP, VERSION, "scenarios", body)
        except ApiException as exc:
            if exc.status != 409:  # already there (the chart's scenarios.install, or a rerun)
                raise


def _status(kube: Any, namespace: str, plural: str, name: str) -> dict[str, Any]:
    obj = _objects(kube).get_namespaced_custom_object(GROUP, VERSION, namespace, plural, name)
    status: dict[str, Any] = obj.get("status") or {}
    return status


def _trials(kube: Any, namespace: str, run: str) -> list[dict[str, Any]]:
    items = _objects(kube).list_namespaced_custom_object(GROUP, VERSION, namespace, "trials")
    return [
        t
        for t in items["items"]
        if any(o.get("name") == run for o in t["metadata"].get("ownerReferences") or [])
    ]


def _keep(artefacts: Path, name: str, data: Any) -> None:
    (artefacts / name).write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")


def _leftover_chaos(kube: Any) -> list[str]:
    from kubernetes.client.exceptions import ApiException

    left = []
    for plural in CHAOS_KINDS:
        try:
            items = _objects(kube).list_namespaced_custom_object(
                "chaos-mesh.org", "v1alpha1", APP, plural
            )
        except ApiException as exc:
            if exc.status == 404:
                continue
            raise
        left += [f"{plural}/{i['metadata']['name']}" for i in items["items"]]
    return left


@pytest.mark.e2e
def test_oracle_and_null_on_the_operators_own_cluster_and_the_shop_back_at_baseline(
    kube: Any, namespace: str, artefacts: Path
) -> None:
    from kubernetes import client

    from itbench.environments.kube.baseline import differences, read_baseline

    scenarios = covering_scenarios()
    _apply_scenarios(kube, scenarios)
    before = read_baseline(kube, APP)
    assert before, f"no objects in {APP}: is the stack installed (make stack-up)?"
    api = _objects(kube)
    for agent in ("oracle", "null"):
        api.create_namespaced_custom_object(
            GROUP,
            VERSION,
            namespace,
            "agentsubmissions",
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "AgentSubmission",
                "metadata": {"name": agent, "namespace": namespace},
                "spec": {
                    "agentName": agent,
                    "type": "SRE",
                    "runtime": {"builtin": {"name": agent}},
                },
            },
        )
        api.create_namespaced_custom_object(
            GROUP,
            VERSION,
            namespace,
            "benchmarkruns",
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "BenchmarkRun",
                "metadata": {"name": f"{agent}-cluster", "namespace": namespace},
                "spec": {
                    "agentRef": {"name": agent},
                    "allowOracle": agent == "oracle",
                    "scenarios": {"names": scenarios},
                    "trialsPerScenario": 1,
                    "environment": {"type": "cluster"},
                },
            },
        )
    runs = ("oracle-cluster", "null-cluster")
    try:
        until(
            "both runs final",
            RUN_MINUTES,
            lambda: all(
                _status(kube, namespace, "benchmarkruns", r).get("phase") in FINAL for r in runs
            ),
        )
    finally:
        for run in runs:
            _keep(artefacts, f"{run}.status.json", _status(kube, namespace, "benchmarkruns", run))
            _keep(artefacts, f"{run}.trials.json", _trials(kube, namespace, run))

    count = len(scenarios)
    oracle = _status(kube, namespace, "benchmarkruns", "oracle-cluster")
    null = _status(kube, namespace, "benchmarkruns", "null-cluster")
    assert sorted(oracle["scenarios"]) == scenarios
    assert oracle["phase"] == "Succeeded", oracle
    assert (oracle["summary"]["succeeded"], oracle["summary"]["errored"]) == (count, 0)
    assert oracle["summary"]["diagnosisPassAt1"] == 1.0
    assert null["phase"] == "Failed", null
    assert (null["summary"]["failed"], null["summary"]["errored"]) == (count, 0)
    for run, phase in (("oracle-cluster", "Succeeded"), ("null-cluster", "Failed")):
        trials = _trials(kube, namespace, run)
        assert len(trials) == count
        for trial in trials:
            status = trial["status"]
            assert status["phase"] == phase, (trial["metadata"]["name"], status)
            assert status["clock"] == "wall", "a live cluster runs on the wall clock"
            records = json.loads(trial["metadata"]["annotations"]["itbench.io/injection-records"])
            assert records["order"], "its faults were injected"
            assert records["records"] == {} and records["pending"] is None, "and removed"
    core = client.CoreV1Api(kube)
    for run, status in (("oracle-cluster", oracle), ("null-cluster", null)):
        ref = status.get("reportRef")
        assert ref, f"{run} names its report"
        report = core.read_namespaced_config_map(ref.split("/")[-1], namespace)
        for key, text in (report.data or {}).items():
            (artefacts / f"{run}.{key}").write_text(text, encoding="utf-8")

    for run in runs:
        api.delete_namespaced_custom_object(GROUP, VERSION, namespace, "benchmarkruns", run)
    until(
        "every Trial deleted (its faults removed)",
        CLEAN_MINUTES,
        lambda: not api.list_namespaced_custom_object(GROUP, VERSION, namespace, "trials")["items"],
    )
    assert _leftover_chaos(kube) == [], "no Chaos Mesh experiment is left"
    assert core.list_namespaced_resource_quota(APP).items == [], "the quota is gone"
    assert not [n.metadata.name for n in core.list_node().items if n.spec.unschedulable]
    after = read_baseline(kube, APP)
    changed = differences(before, after)
    _keep(artefacts, "baseline-differences.json", [list(k) for k in changed])
    assert changed == [], "every object of the shop is at its baseline"

    def ready() -> bool:
        pods = core.list_namespaced_pod(APP).items
        return bool(pods) and all(
            p.status.phase == "Succeeded"
            or any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
            for p in pods
        )

    until(f"every pod of {APP} Ready again", 10, ready)
