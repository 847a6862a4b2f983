"""Live-cluster fault injection: the fault library's Ansible playbooks (kubernetes.core) run by
ansible-runner against a Kubernetes API, injecting and then removing real faults.

The kubernetes.core collection comes from the pinned `ansible` wheel on PyPI (only its
kubernetes/core directory is kept), cached in ~/.cache/itbench/tools.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
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
from itbench.environments.sim.objects import baseline_objects

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
ANSIBLE_WHEEL = "ansible==12.3.0"
ANSIBLE_WHEEL_SHA256 = "cd156f82fa87f7a899212b0efa9f7ca3a24d609212de9f78428a572eb01e5414"
COLLECTIONS = Path.home() / ".cache" / "itbench" / "tools" / "ansible-12.3.0-collections"
K8S_MODULE = COLLECTIONS / "ansible_collections" / "kubernetes" / "core" / "plugins" / "modules"


def _install_kubernetes_core() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", ANSIBLE_WHEEL, "-d", tmp],
            check=True,
            capture_output=True,
            timeout=600,
        )
        wheel = next(Path(tmp).glob("ansible-*.whl"))
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        assert digest == ANSIBLE_WHEEL_SHA256, f"{wheel.name} has sha256 {digest}"
        staging = COLLECTIONS.with_name(f"{COLLECTIONS.name}.{Path(tmp).name}")
        with zipfile.ZipFile(wheel) as archive:
            for name in archive.namelist():
                if name.startswith("ansible_collections/kubernetes/core/"):
                    archive.extract(name, staging)
        COLLECTIONS.parent.mkdir(parents=True, exist_ok=True)
        try:
            staging.rename(COLLECTIONS)
        except OSError:  # another worker got there first
            shutil.rmtree(staging, ignore_errors=True)


@pytest.fixture(scope="module")
def collections_path() -> str:
    if not (K8S_MODULE / "k8s.py").is_file():
        try:
            _install_kubernetes_core()
        except subprocess.CalledProcessError as exc:
            pytest.skip(f"cannot download {ANSIBLE_WHEEL} from the package index: {exc.stderr}")
    return str(COLLECTIONS)


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[LoopbackApi, Path]]:
    """A Kubernetes API holding the Astronomy Shop's Deployments, Services and ConfigMaps."""
    server = LoopbackApi()
    server.start()
    kubeconfig = server.kubeconfig(tmp_path / "kubeconfig")
    client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
    dynamic = kubernetes.dynamic.DynamicClient(client)
    for obj in baseline_objects(NS):
        if obj["kind"] in ("Namespace", "Deployment", "Service", "ConfigMap"):
            body = {k: v for k, v in obj.items() if k != "status"}
            resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
            resource.create(body=body, namespace=obj["metadata"].get("namespace"))
    try:
        yield server, kubeconfig
    finally:
        server.stop()


@pytest.fixture
def faults(api: tuple[LoopbackApi, Path], collections_path: str) -> ClusterFaults:
    _server, kubeconfig = api
    client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
    runner = AnsiblePlaybookRunner(kubeconfig=str(kubeconfig), collections_path=collections_path)
    return ClusterFaults(reader=KubeObjectReader(client), runner=runner)


def stored(api: tuple[LoopbackApi, Path], group: str, plural: str, name: str) -> Any:
    return api[0].get(group, plural, NS, name)


def spec_of(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in restorable(obj).items() if k != "metadata"} | {
        "labels": obj["metadata"].get("labels")
    }


def test_every_fault_names_a_playbook_that_exists_and_makes_its_changes() -> None:
    for fault in all_faults():
        assert (PLAYBOOK_DIR / fault.playbook).is_file(), fault.id
    catalog, problems = load_catalog(ROOT / "scenarios")
    assert not problems
    used: set[str] = set()
    for scenario in catalog:
        for spec in scenario.spec.faults:
            fault = get_fault(spec.id)
            changes = fault.changes(spec.args, scenario.spec.environment.namespace)
            assert {PLAYBOOK_FOR_OP[c.op] for c in changes} == {fault.playbook}, fault.id
            used.add(fault.playbook)
    assert used == set(PLAYBOOK_FOR_OP.values()), "the catalog exercises every playbook"
    for playbook in sorted(PLAYBOOK_DIR.glob("faults/*.yaml")):
        plays = yaml.safe_load(playbook.read_text(encoding="utf-8"))
        assert plays and all(p["hosts"] == "localhost" for p in plays), playbook.name


def test_a_patch_fault_changes_one_container_and_removal_restores_the_deployment(
    api: tuple[LoopbackApi, Path], faults: ClusterFaults
) -> None:
    before = stored(api, "apps", "deployments", "cart")
    changes = get_fault("kubernetes.memory-limit").changes(
        {"workload": "cart", "memory": "20Mi"}, NS
    )
    applied = faults.inject(changes)
    after = stored(api, "apps", "deployments", "cart")
    container = after["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["memory"] == "20Mi"
    original = before["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == original["image"], "a strategic merge keeps the rest"
    assert container["env"] == original["env"]
    faults.remove(applied)
    assert spec_of(stored(api, "apps", "deployments", "cart")) == spec_of(before)


def test_a_created_object_is_deleted_on_removal(
    api: tuple[LoopbackApi, Path], faults: ClusterFaults
) -> None:
    changes = get_fault("kubernetes.block-ingress").changes(
        {"workload": "payment", "port": 8080}, NS
    )
    applied = faults.inject(changes)
    name = changes[0].name
    policy = stored(api, "networking.k8s.io", "networkpolicies", name)
    assert policy["spec"]["podSelector"] == changes[0].body["spec"]["podSelector"]
    assert [a.before for a in applied] == [None]
    faults.remove(applied)
    assert stored(api, "networking.k8s.io", "networkpolicies", name) is None


def test_a_flag_fault_selects_the_variant_and_removal_selects_the_old_one(
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
    injected = faults.inject(get_fault("flagd.cart-failure").changes({}, NS))
    assert variant("cartFailure") == "on"
    assert injected[0].previous_variant == "off"
    # What removal needs is kept with the trial as JSON (a restarted operator removes from it).
    kept = json.loads(json.dumps([a.wire() for a in injected]))
    applied = [AppliedChange.from_wire(a) for a in kept]
    assert applied == injected
    assert {f: variant(f) for f in untouched if f != "cartFailure"} == {
        f: v for f, v in untouched.items() if f != "cartFailure"
    }
    faults.remove(applied)
    assert {f: variant(f) for f in untouched} == untouched


def test_a_failed_change_undoes_the_earlier_ones_and_names_the_object(
    api: tuple[LoopbackApi, Path], faults: ClusterFaults
) -> None:
    before = stored(api, "apps", "deployments", "cart")
    good = get_fault("kubernetes.memory-limit").changes({"workload": "cart", "memory": "20Mi"}, NS)
    with pytest.raises(EnvironmentFailure, match="Deployment/no-such-service"):
        faults.inject([*good, MISSING])
    assert spec_of(stored(api, "apps", "deployments", "cart")) == spec_of(before)


def test_the_patch_playbook_alone_refuses_a_missing_target(
    api: tuple[LoopbackApi, Path], collections_path: str
) -> None:
    runner = AnsiblePlaybookRunner(kubeconfig=str(api[1]), collections_path=collections_path)
    with pytest.raises(PlaybookError, match="Deployment otel-demo/no-such-service not found"):
        runner.run(PLAYBOOK_FOR_OP["merge-patch"], {"changes": [MISSING.wire()]})


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
