"""Live-cluster fault injection: the fault library's Ansible playbooks (kubernetes.core) run by
ansible-runner against a Kubernetes API, injecting and then removing real faults.

The kubernetes.core collection comes from the pinned `ansible` wheel on PyPI (only its
kubernetes/core directory is kept), cached in ~/.cache/itbench/tools.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml
from click.testing import CliRunner
from loopback import LoopbackApi

import itbench.core.fault_library  # noqa: F401 (registers the faults)
from itbench.catalog_files import load_catalog
from itbench.cli.main import cli
from itbench.core.faults import ObjectChange, all_faults, get_fault
from itbench.core.models.base import Domain
from itbench.core.shop import FLAGD_CONFIG_KEY, FLAGD_CONFIGMAP
from itbench.environments.kube.faults import (
    PLAYBOOK_DIR,
    PLAYBOOK_FOR_OP,
    AnsiblePlaybookRunner,
    AppliedChange,
    ClusterFaults,
    KubeObjectReader,
    PlaybookError,
    restorable,
)
from itbench.environments.port import EnvironmentFailure
from itbench.environments.sim.objects import baseline_objects, merge_patch
from tests.chaos_mesh import chaos_crds
from tests.kube_collection import kubernetes_core

NS = "otel-demo"
ROOT = Path(__file__).resolve().parents[3]
MISSING = ObjectChange(
    op="merge-patch",
    api_version="apps/v1",
    kind="Deployment",
    name="no-such-service",
    namespace=NS,
    body={"spec": {"replicas": 0}},
)
"""A patch of a Deployment that does not exist."""


@pytest.fixture(scope="module")
def collections_path() -> str:
    return kubernetes_core()


LOADED = ("Namespace", "Node", "Deployment", "Service", "ConfigMap", "HorizontalPodAutoscaler")


class Controllers:
    """Stand-ins for the controllers the loopback API does not run: each Deployment rollout
    completes, and (when on) Chaos Mesh reports each experiment AllInjected."""

    def __init__(self, server: LoopbackApi, kubeconfig: Path) -> None:
        client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
        self.apps = kubernetes.client.AppsV1Api(client)
        self.custom = kubernetes.client.CustomObjectsApi(client)
        self.server = server
        self.chaos = True
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Controllers:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _loop(self) -> None:
        crds = chaos_crds()
        while not self._stop.wait(0.5):
            for d in self.server.objects("apps", "deployments", NS):
                generation = d["metadata"].get("generation", 1)
                if (d.get("status") or {}).get("observedGeneration") == generation:
                    continue
                replicas = d["spec"].get("replicas", 1)
                status = {
                    "observedGeneration": generation,
                    "replicas": replicas,
                    "updatedReplicas": replicas,
                    "readyReplicas": replicas,
                    "availableReplicas": replicas,
                }
                self.apps.patch_namespaced_deployment_status(
                    d["metadata"]["name"], NS, {"status": status}
                )
            if not self.chaos:
                continue
            for crd in crds:
                group, plural = crd["spec"]["group"], crd["spec"]["names"]["plural"]
                for obj in self.server.objects(group, plural, NS):
                    if (obj.get("status") or {}).get("conditions"):
                        continue
                    conditions = [{"type": "AllInjected", "status": "True"}]
                    self.custom.patch_namespaced_custom_object_status(
                        group,
                        "v1alpha1",
                        NS,
                        plural,
                        obj["metadata"]["name"],
                        {"status": {"conditions": conditions}},
                    )


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[LoopbackApi, Path]]:
    """A Kubernetes API holding the pinned chart's objects (and the Chaos Mesh CRDs)."""
    server = LoopbackApi()
    server.start()
    kubeconfig = server.kubeconfig(tmp_path / "kubeconfig")
    client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
    dynamic = kubernetes.dynamic.DynamicClient(client)
    for crd in chaos_crds():
        server.install_crd(crd)
    for obj in baseline_objects(NS):
        if obj["kind"] in LOADED:
            body = {k: v for k, v in obj.items() if k != "status"}
            resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
            resource.create(body=body, namespace=obj["metadata"].get("namespace"))
    try:
        yield server, kubeconfig
    finally:
        server.stop()


@pytest.fixture
def controllers(api: tuple[LoopbackApi, Path]) -> Iterator[Controllers]:
    with Controllers(*api) as running:
        yield running


@pytest.fixture
def faults(
    api: tuple[LoopbackApi, Path], collections_path: str, controllers: Controllers
) -> ClusterFaults:
    _server, kubeconfig = api
    client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
    runner = AnsiblePlaybookRunner(kubeconfig=str(kubeconfig), collections_path=collections_path)
    return ClusterFaults(
        reader=KubeObjectReader(client), runner=runner, rollout_timeout=60, chaos_timeout=30
    )


def stored(api: tuple[LoopbackApi, Path], group: str, plural: str, name: str) -> Any:
    return api[0].get(group, plural, NS, name)


def spec_of(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in restorable(obj).items() if k != "metadata"} | {
        "labels": obj["metadata"].get("labels")
    }


def unrestorable() -> AppliedChange:
    """A patch whose earlier object cannot be put back (its kind is not served)."""
    return AppliedChange(
        change=ObjectChange(
            op="merge-patch", api_version="example.com/v1", kind="Nothing", name="bogus"
        ),
        before={
            "apiVersion": "example.com/v1",
            "kind": "Nothing",
            "metadata": {"name": "bogus", "namespace": NS},
        },
    )


def test_every_fault_names_a_playbook_that_exists_and_makes_its_changes() -> None:
    for fault in all_faults():
        assert (PLAYBOOK_DIR / fault.playbook).is_file(), fault.id
    catalog, problems = load_catalog(ROOT / "scenarios")
    assert not problems
    used: set[str] = set()
    # CISO scenarios run in the compliance twin only (their host is modelled): no live playbook.
    for scenario in (s for s in catalog if s.spec.domain != Domain.CISO):
        for spec in scenario.spec.faults:
            fault = get_fault(spec.id)
            changes = fault.changes(spec.args, scenario.spec.environment.namespace)
            playbooks = {PLAYBOOK_FOR_OP[c.op] for c in changes}
            assert fault.playbook in playbooks, fault.id
            used |= playbooks
    assert used == set(PLAYBOOK_FOR_OP.values()), "the catalog exercises every playbook"
    for playbook in sorted(PLAYBOOK_DIR.glob("faults/*.yaml")):
        plays = yaml.safe_load(playbook.read_text(encoding="utf-8"))
        assert plays and all(p["hosts"] == "localhost" for p in plays), playbook.name


def test_patch_faults_merge_strategically_and_removal_restores_every_object(
    api: tuple[LoopbackApi, Path], faults: ClusterFaults
) -> None:
    # Three faults' patches in one injection (one playbook run, one module call).
    before = {
        "cart": stored(api, "apps", "deployments", "cart"),
        "flagd": stored(api, "apps", "deployments", "flagd"),
        "flagd-service": stored(api, "", "services", "flagd"),
    }
    changes = [
        *get_fault("kubernetes.memory-limit").changes({"workload": "cart", "memory": "20Mi"}, NS),
        *get_fault("kubernetes.memory-limit").changes({"workload": "flagd", "memory": "30Mi"}, NS),
        *get_fault("kubernetes.service-target-port").changes(
            {"service": "flagd", "port": 9999, "servicePort": 8013}, NS
        ),
    ]
    applied = faults.inject(changes)
    cart = stored(api, "apps", "deployments", "cart")
    container = cart["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["memory"] == "20Mi"
    original = before["cart"]["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == original["image"], "a strategic merge keeps the rest"
    assert container["env"] == original["env"]
    # A container patch merges by name in a pod with a sidecar.
    flagd_after = stored(api, "apps", "deployments", "flagd")
    flagd, ui = flagd_after["spec"]["template"]["spec"]["containers"]
    assert flagd["name"] == "flagd" and flagd["resources"]["limits"]["memory"] == "30Mi"
    assert ui == before["flagd"]["spec"]["template"]["spec"]["containers"][1]
    assert (
        flagd_after["spec"]["template"]["spec"]["initContainers"]
        == before["flagd"]["spec"]["template"]["spec"]["initContainers"]
    )
    # A target-port fault names the port by its merge key.
    ports = {p["port"]: p for p in stored(api, "", "services", "flagd")["spec"]["ports"]}
    assert ports[8013]["targetPort"] == 9999 and ports[8013]["name"] == "rpc"
    assert [ports[p] for p in (8016, 4000)] == [
        p for p in before["flagd-service"]["spec"]["ports"] if p["port"] != 8013
    ], "the other ports are untouched"
    # Removal puts every object back, and goes on past one it cannot put back, naming it.
    with pytest.raises(EnvironmentFailure, match="Nothing/bogus"):
        faults.remove([*applied[:2], unrestorable(), *applied[2:]])
    assert spec_of(stored(api, "apps", "deployments", "cart")) == spec_of(before["cart"])
    assert spec_of(stored(api, "apps", "deployments", "flagd")) == spec_of(before["flagd"])
    assert spec_of(stored(api, "", "services", "flagd")) == spec_of(before["flagd-service"])


def test_created_objects_are_deleted_on_removal_and_pods_by_label_on_injection(
    api: tuple[LoopbackApi, Path], faults: ClusterFaults
) -> None:
    client = kubernetes.config.new_client_from_config(config_file=str(api[1]))
    core = kubernetes.client.CoreV1Api(client)
    for name, app in (("ad-1", "ad"), ("ad-2", "ad"), ("cart-1", "cart")):
        core.create_namespaced_pod(
            NS,
            {
                "metadata": {"name": name, "labels": {"opentelemetry.io/name": app}},
                "spec": {"containers": [{"name": app, "image": "x"}]},
            },
        )
    block = get_fault("kubernetes.block-ingress").changes({"workload": "payment", "port": 8080}, NS)
    quota = get_fault("kubernetes.resource-quota").changes({"workload": "ad"}, NS)
    applied = faults.inject([*block, *quota])
    name = block[0].name
    policy = stored(api, "networking.k8s.io", "networkpolicies", name)
    assert policy["spec"]["podSelector"] == block[0].body["spec"]["podSelector"]
    assert stored(api, "", "resourcequotas", "memory")["spec"]["hard"] == {"memory": "1Gi"}
    assert [p["metadata"]["name"] for p in api[0].objects("", "pods", NS)] == ["cart-1"]
    assert [a.before for a in applied] == [None, None, None]
    # Removal is one run of several steps (restore, then the deletes); a failed step does not
    # stop the later ones, and the run names it.
    with pytest.raises(EnvironmentFailure, match="restore Nothing/bogus"):
        faults.remove([*applied, unrestorable()])
    assert stored(api, "networking.k8s.io", "networkpolicies", name) is None
    assert stored(api, "", "resourcequotas", "memory") is None


def _restarted_at(api: tuple[LoopbackApi, Path]) -> str | None:
    flagd = stored(api, "apps", "deployments", "flagd")
    annotations = flagd["spec"]["template"].get("metadata", {}).get("annotations") or {}
    return annotations.get("kubectl.kubernetes.io/restartedAt")


def test_a_flag_fault_selects_the_variant_rolls_flagd_and_removal_rolls_it_again(
    api: tuple[LoopbackApi, Path], faults: ClusterFaults
) -> None:
    def variant(flag: str) -> str:
        cm = stored(api, "", "configmaps", FLAGD_CONFIGMAP)
        return str(json.loads(cm["data"][FLAGD_CONFIG_KEY])["flags"][flag]["defaultVariant"])

    untouched = {
        flag: variant(flag)
        for flag in json.loads(
            stored(api, "", "configmaps", FLAGD_CONFIGMAP)["data"][FLAGD_CONFIG_KEY]
        )["flags"]
    }
    assert untouched["cartFailure"] == "off"
    assert _restarted_at(api) is None
    generation = stored(api, "apps", "deployments", "flagd")["metadata"]["generation"]
    injected = faults.inject(get_fault("flagd.cart-failure").changes({}, NS))
    assert variant("cartFailure") == "on"
    assert injected[0].previous_variant == "off"
    # flagd reads a copy of the ConfigMap made at pod start: the fault rolls it out.
    first = _restarted_at(api)
    assert first is not None
    assert stored(api, "apps", "deployments", "flagd")["metadata"]["generation"] == generation + 1
    # What removal needs is kept with the trial as JSON (a restarted operator removes from it).
    kept = json.loads(json.dumps([a.wire() for a in injected]))
    applied = [AppliedChange.from_wire(a) for a in kept]
    assert applied == injected
    assert {f: variant(f) for f in untouched if f != "cartFailure"} == {
        f: v for f, v in untouched.items() if f != "cartFailure"
    }
    flagd_generation = stored(api, "apps", "deployments", "flagd")["metadata"]["generation"]
    faults.remove(applied)
    assert {f: variant(f) for f in untouched} == untouched
    # ... and rolls flagd again after the flag is back (its pod template's stamp put back as it
    # was), so it serves the restored variant and equals its baseline.
    assert _restarted_at(api) is None
    assert stored(api, "apps", "deployments", "flagd")["metadata"]["generation"] > flagd_generation


def test_a_rollout_that_does_not_finish_fails_the_injection(
    api: tuple[LoopbackApi, Path], collections_path: str
) -> None:
    client = kubernetes.config.new_client_from_config(config_file=str(api[1]))
    runner = AnsiblePlaybookRunner(kubeconfig=str(api[1]), collections_path=collections_path)
    slow = ClusterFaults(reader=KubeObjectReader(client), runner=runner, rollout_timeout=5)
    with pytest.raises(EnvironmentFailure, match="rollout Deployment/flagd"):
        slow.inject(get_fault("flagd.cart-failure").changes({}, NS))
    cm = stored(api, "", "configmaps", FLAGD_CONFIGMAP)
    flags = json.loads(cm["data"][FLAGD_CONFIG_KEY])["flags"]
    assert flags["cartFailure"]["defaultVariant"] == "off", "the flag change was undone"


def test_a_failed_patch_undoes_the_others_and_a_missing_target_is_refused(
    api: tuple[LoopbackApi, Path], faults: ClusterFaults, collections_path: str
) -> None:
    before = stored(api, "apps", "deployments", "cart")
    good = get_fault("kubernetes.memory-limit").changes({"workload": "cart", "memory": "20Mi"}, NS)
    # A missing target is found before anything runs.
    with pytest.raises(EnvironmentFailure, match="Deployment/no-such-service"):
        faults.inject([*good, MISSING])
    assert spec_of(stored(api, "apps", "deployments", "cart")) == spec_of(before)
    # The patch the library used to send: kube-apiserver refuses it (ErrNoMergeKey), and there
    # is no fallback to a JSON merge patch. The cart patch made before it in the same module
    # call is undone.
    old = ObjectChange(
        op="merge-patch",
        kind="Service",
        name="cart",
        namespace=NS,
        body={"spec": {"ports": [{"name": "tcp-service", "targetPort": 9999}]}},
    )
    with pytest.raises(EnvironmentFailure, match="does not contain declared merge key: port"):
        faults.inject([*good, old])
    assert stored(api, "", "services", "cart")["spec"]["ports"][0]["targetPort"] == 8080
    assert spec_of(stored(api, "apps", "deployments", "cart")) == spec_of(before)
    # The patch playbook alone refuses a missing target: one (the module's answer says so) or
    # one of several (read first: nothing is patched).
    runner = AnsiblePlaybookRunner(kubeconfig=str(api[1]), collections_path=collections_path)
    with pytest.raises(PlaybookError, match="Deployment otel-demo/no-such-service not found"):
        runner.run(PLAYBOOK_FOR_OP["merge-patch"], {"changes": [MISSING.wire()]})
    with pytest.raises(PlaybookError, match="Deployment otel-demo/no-such-service not found"):
        runner.run(PLAYBOOK_FOR_OP["merge-patch"], {"changes": [good[0].wire(), MISSING.wire()]})
    assert spec_of(stored(api, "apps", "deployments", "cart")) == spec_of(before)


def test_a_rollout_of_several_deployments_waits_for_each_and_refuses_a_missing_one(
    api: tuple[LoopbackApi, Path], collections_path: str, controllers: Controllers
) -> None:
    runner = AnsiblePlaybookRunner(kubeconfig=str(api[1]), collections_path=collections_path)

    def rollout(name: str) -> dict[str, Any]:
        return ObjectChange(
            op="rollout", api_version="apps/v1", kind="Deployment", name=name, namespace=NS
        ).wire()

    generations = {
        n: stored(api, "apps", "deployments", n)["metadata"]["generation"] for n in ("cart", "ad")
    }
    with pytest.raises(PlaybookError, match="Deployment otel-demo/no-such-service not found"):
        runner.run(
            PLAYBOOK_FOR_OP["rollout"],
            {"changes": [rollout("cart"), rollout("no-such-service")], "rollout_timeout": 30},
        )
    assert (
        stored(api, "apps", "deployments", "cart")["metadata"]["generation"] == generations["cart"]
    )
    runner.run(
        PLAYBOOK_FOR_OP["rollout"],
        {
            "changes": [rollout("cart"), rollout("ad")],
            "restarted_at": {"ad": "2026-01-01T00:00:00Z"},
            "rollout_timeout": 30,
        },
    )
    for name in ("cart", "ad"):
        deployment = stored(api, "apps", "deployments", name)
        assert deployment["metadata"]["generation"] == generations[name] + 1
        assert deployment["status"]["observedGeneration"] == generations[name] + 1, "waited"
    ad = stored(api, "apps", "deployments", "ad")["spec"]["template"]["metadata"]["annotations"]
    assert ad["kubectl.kubernetes.io/restartedAt"] == "2026-01-01T00:00:00Z"


def test_cli_injects_into_a_cluster_and_removes_from_the_record(
    api: tuple[LoopbackApi, Path], collections_path: str, tmp_path: Path
) -> None:
    before = stored(api, "", "services", "cart")
    record = tmp_path / "fault.json"
    common = ["--kubeconfig", str(api[1]), "--collections-path", collections_path]
    runner = CliRunner()
    inject = ["faults", "inject", "kubernetes.service-target-port", "--arg", "service=cart"]
    bad = runner.invoke(
        cli, [*inject, "--arg", "port=not-a-port", "--record", str(record), *common]
    )
    assert bad.exit_code == 2 and "port" in bad.output, bad.output
    assert not record.exists() and stored(api, "", "services", "cart") == before
    done = runner.invoke(cli, [*inject, "--arg", "port=9999", "--record", str(record), *common])
    assert done.exit_code == 0, done.output
    assert stored(api, "", "services", "cart")["spec"]["ports"][0]["targetPort"] == 9999
    assert json.loads(record.read_text())["fault"] == "kubernetes.service-target-port"
    again = runner.invoke(
        cli,
        ["faults", "inject", "flagd.cart-failure", "--record", str(record), *common],
    )
    assert again.exit_code == 2 and "exists" in again.output, "a record is never overwritten"
    removed = runner.invoke(cli, ["faults", "remove", "--record", str(record), *common])
    assert removed.exit_code == 0, removed.output
    assert spec_of(stored(api, "", "services", "cart")) == spec_of(before)
    assert not record.exists()


def test_a_chaos_fault_counts_as_injected_once_chaos_mesh_reports_all_injected(
    api: tuple[LoopbackApi, Path], faults: ClusterFaults, controllers: Controllers
) -> None:
    changes = get_fault("chaos.network-delay").changes({"workload": "cart"}, NS)
    applied = faults.inject(changes)
    chaos = stored(api, "chaos-mesh.org", "networkchaos", changes[0].name)
    assert chaos["status"]["conditions"] == [{"type": "AllInjected", "status": "True"}]
    faults.remove(applied)
    assert stored(api, "chaos-mesh.org", "networkchaos", changes[0].name) is None
    # Without a Chaos Mesh that injects, the injection fails and leaves nothing behind.
    controllers.chaos = False
    slow = ClusterFaults(reader=faults.reader, runner=faults.runner, chaos_timeout=3)
    with pytest.raises(EnvironmentFailure, match="NetworkChaos/cart-network-delay"):
        slow.inject(changes)
    assert stored(api, "chaos-mesh.org", "networkchaos", changes[0].name) is None


def test_a_cordon_fault_patches_the_cluster_scoped_node_and_removal_uncordons_it(
    api: tuple[LoopbackApi, Path], faults: ClusterFaults
) -> None:
    applied = faults.inject(
        get_fault("kubernetes.cordoned-node").changes({"workload": "payment"}, NS)
    )
    node = api[0].get("", "nodes", None, "kind-worker")
    assert node is not None and node["spec"]["unschedulable"] is True
    payment = stored(api, "apps", "deployments", "payment")
    assert payment["spec"]["replicas"] == 2
    assert payment["spec"]["template"]["spec"]["nodeSelector"] == {
        "kubernetes.io/hostname": "kind-worker"
    }
    faults.remove(applied)
    node = api[0].get("", "nodes", None, "kind-worker")
    assert node is not None and "unschedulable" not in node["spec"]
    assert stored(api, "apps", "deployments", "payment")["spec"]["replicas"] == 1


def test_the_live_patches_make_exactly_the_twins_changes(
    api: tuple[LoopbackApi, Path], faults: ClusterFaults
) -> None:
    # Each merge-patch fault, applied by its playbook to the pinned chart's object, gives the
    # object the twin computes with the same merge semantics.
    cases = [
        ("kubernetes.valkey-password", {}),
        ("kubernetes.dns-policy", {"workload": "frontend"}),
        ("kubernetes.crashing-init-container", {"workload": "recommendation"}),
        ("kubernetes.secret-credentials", {"workload": "product-reviews"}),
    ]
    expected = {}
    patches = []
    for fault_id, args in cases:
        for change in get_fault(fault_id).changes(args, NS):
            if change.op != "merge-patch":
                continue
            group = change.api_version.split("/")[0] if "/" in change.api_version else ""
            where = (group, change.kind.lower() + "s", change.name)
            assert where not in expected, "each object is patched once"
            before = stored(api, *where)
            expected[where] = (
                fault_id,
                merge_patch(restorable(before), change.body, kind=change.kind),
            )
            patches.append(change)
    faults.inject(patches)
    for where, (fault_id, obj) in expected.items():
        assert spec_of(stored(api, *where)) == spec_of(obj), fault_id


def test_every_playbook_passes_ansibles_syntax_check(collections_path: str) -> None:
    playbooks = sorted(PLAYBOOK_DIR.glob("*/*.yaml"))
    assert {p.name for p in playbooks} >= {Path(p).name for p in PLAYBOOK_FOR_OP.values()}
    done = subprocess.run(
        [
            str(Path(sys.executable).with_name("ansible-playbook")),
            "--syntax-check",
            *map(str, playbooks),
        ],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "ANSIBLE_COLLECTIONS_PATH": collections_path},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    checked = [
        line.removeprefix("playbook: ")
        for line in done.stdout.splitlines()
        if line.startswith("playbook: ")
    ]
    assert checked == list(map(str, playbooks)), done.stdout
    warnings = [
        line
        for line in done.stderr.splitlines()
        if line.startswith("[WARNING]") and "inventory" not in line and "hosts list" not in line
    ]
    assert warnings == []
