"""Real kubectl against the served twin: discovery, get, apply, the three patch types, status
subresources, delete, watch, and writes the twin's controllers act on."""

from __future__ import annotations

import base64
import json
import threading
from typing import Any

import kubernetes
import pytest
from served_lab import Kubectl, eventually

from itbench.environments.served.server import ServedCluster

NS = "otel-demo"


def _json(kubectl: Kubectl, *args: str) -> Any:
    return json.loads(kubectl(*args, "-o", "json").stdout)


def test_kubectl_reaches_the_api_over_tls_with_the_written_kubeconfig(
    served: ServedCluster, kubectl: Kubectl
) -> None:
    version = json.loads(kubectl("version", "-o", "json").stdout)
    assert version["serverVersion"]["gitVersion"].endswith("+itbench-twin")
    resources = kubectl("api-resources", "-o", "name").stdout.split()
    for name in (
        "deployments.apps",
        "pods",
        "networkchaos.chaos-mesh.org",
        "prometheusrules.monitoring.coreos.com",
    ):
        assert name in resources
    namespaces = {n["metadata"]["name"] for n in _json(kubectl, "get", "namespaces")["items"]}
    assert {NS, "default", "kube-system", "monitoring", "chaos-mesh"} <= namespaces


def test_get_lists_the_twins_objects_as_tables_and_json(
    served: ServedCluster, kubectl: Kubectl
) -> None:
    table = kubectl("get", "deployments", "-n", NS).stdout.splitlines()
    assert table[0].split()[:2] == ["NAME", "READY"]
    names = sorted(line.split()[0] for line in table[1:])
    assert names == sorted(d["metadata"]["name"] for d in served.env.get_objects("Deployment"))
    cart = _json(kubectl, "get", "deployment", "cart", "-n", NS)
    assert cart["kind"] == "Deployment" and cart["metadata"]["namespace"] == NS
    assert cart["metadata"]["resourceVersion"] and cart["metadata"]["uid"]
    pods = _json(kubectl, "get", "pods", "-n", NS, "-l", "opentelemetry.io/name=cart")["items"]
    assert pods and all(p["metadata"]["labels"]["opentelemetry.io/name"] == "cart" for p in pods)
    missing = kubectl("get", "deployment", "no-such", "-n", NS, check=False)
    assert missing.returncode == 1
    assert 'deployments.apps "no-such" not found' in missing.stderr


CONFIGMAP = """apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: otel-demo
data:
  mode: {mode}
"""


def test_apply_creates_then_configures_and_delete_removes(kubectl: Kubectl) -> None:
    assert "created" in kubectl("apply", "-f", "-", stdin=CONFIGMAP.format(mode="a")).stdout
    first = _json(kubectl, "get", "configmap", "settings", "-n", NS)
    assert "configured" in kubectl("apply", "-f", "-", stdin=CONFIGMAP.format(mode="b")).stdout
    second = _json(kubectl, "get", "configmap", "settings", "-n", NS)
    assert second["data"] == {"mode": "b"}
    assert second["metadata"]["uid"] == first["metadata"]["uid"]
    assert int(second["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])
    assert "unchanged" in kubectl("apply", "-f", "-", stdin=CONFIGMAP.format(mode="b")).stdout
    assert "deleted" in kubectl("delete", "configmap", "settings", "-n", NS).stdout
    assert kubectl("get", "configmap", "settings", "-n", NS, check=False).returncode == 1


SECRET = """apiVersion: v1
kind: Secret
metadata:
  name: creds
  namespace: otel-demo
data:
  user: YWRtaW4=
  mode: b2xk
stringData:
  mode: new
  password: s3cret
"""


def test_a_secrets_string_data_is_folded_into_base64_data_as_kube_apiserver_does(
    served: ServedCluster, kubectl: Kubectl
) -> None:
    kubectl("apply", "-f", "-", stdin=SECRET)
    secret = _json(kubectl, "get", "secret", "creds", "-n", NS)
    assert "stringData" not in secret
    decoded = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert decoded == {"user": "admin", "mode": "new", "password": "s3cret"}
    # The twin holds what the API holds: its pods read the same values.
    twin = served.env.get_objects("Secret", "creds")[0]
    assert "stringData" not in twin and twin["data"] == secret["data"]
    kubectl("patch", "secret", "creds", "-n", NS, "-p", json.dumps({"stringData": {"user": "ops"}}))
    patched = _json(kubectl, "get", "secret", "creds", "-n", NS)
    assert "stringData" not in patched
    assert base64.b64decode(patched["data"]["user"]).decode() == "ops"
    assert patched["data"]["password"] == secret["data"]["password"]
    assert "deleted" in kubectl("delete", "secret", "creds", "-n", NS).stdout


def test_a_strategic_merge_patch_merges_containers_by_name(
    served: ServedCluster, kubectl: Kubectl
) -> None:
    before = _json(kubectl, "get", "deployment", "flagd", "-n", NS)
    patch = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [{"name": "flagd", "resources": {"limits": {"memory": "99Mi"}}}]
                }
            }
        }
    }
    kubectl("patch", "deployment", "flagd", "-n", NS, "-p", json.dumps(patch))
    after = _json(kubectl, "get", "deployment", "flagd", "-n", NS)
    containers = after["spec"]["template"]["spec"]["containers"]
    was = before["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == [c["name"] for c in was]
    assert containers[0]["resources"]["limits"]["memory"] == "99Mi"
    assert containers[0]["image"] == was[0]["image"] and containers[1] == was[1]
    assert after["metadata"]["generation"] == before["metadata"]["generation"] + 1
    # The write reached the twin itself, not only the API's copy.
    twin = served.env.get_objects("Deployment", "flagd")[0]
    assert (
        twin["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"] == "99Mi"
    )
    kubectl(
        "patch",
        "deployment",
        "flagd",
        "-n",
        NS,
        "-p",
        json.dumps(
            {
                "spec": {
                    "template": {
                        "spec": {
                            "containers": [{"name": "flagd", "resources": was[0]["resources"]}]
                        }
                    }
                }
            }
        ),
    )


def test_json_and_merge_patches_apply_and_a_failed_test_op_changes_nothing(
    kubectl: Kubectl,
) -> None:
    kubectl("apply", "-f", "-", stdin=CONFIGMAP.format(mode="a").replace("settings", "patched"))
    ops = [
        {"op": "test", "path": "/data/mode", "value": "a"},
        {"op": "replace", "path": "/data/mode", "value": "j"},
    ]
    kubectl("patch", "configmap", "patched", "-n", NS, "--type=json", "-p", json.dumps(ops))
    assert _json(kubectl, "get", "configmap", "patched", "-n", NS)["data"] == {"mode": "j"}
    failed = kubectl(
        "patch", "configmap", "patched", "-n", NS, "--type=json", "-p", json.dumps(ops), check=False
    )
    assert failed.returncode == 1 and "test failed" in failed.stderr
    assert _json(kubectl, "get", "configmap", "patched", "-n", NS)["data"] == {"mode": "j"}
    kubectl(
        "patch",
        "configmap",
        "patched",
        "-n",
        NS,
        "--type=merge",
        "-p",
        '{"data":{"mode":null,"x":"y"}}',
    )
    assert _json(kubectl, "get", "configmap", "patched", "-n", NS)["data"] == {"x": "y"}
    kubectl("delete", "configmap", "patched", "-n", NS)


CHAOS = """apiVersion: chaos-mesh.org/v1alpha1
kind: PodChaos
metadata:
  name: probe
  namespace: {namespace}
spec:
  action: pod-kill
  mode: one
  selector:
    namespaces: [{namespace}]
    labelSelectors:
      opentelemetry.io/name: cart
"""


def test_status_is_a_subresource_of_custom_resources(kubectl: Kubectl) -> None:
    # Outside the twin's namespace: no Chaos Mesh controller writes this object's status.
    kubectl("apply", "-f", "-", stdin=CHAOS.format(namespace="default"))
    status = {"status": {"conditions": [{"type": "AllInjected", "status": "True"}]}}
    kubectl(
        "patch",
        "podchaos",
        "probe",
        "-n",
        "default",
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(status),
    )
    stored = _json(kubectl, "get", "podchaos", "probe", "-n", "default")
    assert stored["status"] == status["status"]
    generation = stored["metadata"]["generation"]
    # A write of the object leaves status alone; a status write leaves the spec alone.
    kubectl(
        "patch",
        "podchaos",
        "probe",
        "-n",
        "default",
        "--type=merge",
        "-p",
        '{"spec":{"mode":"all"},"status":{}}',
    )
    after = _json(kubectl, "get", "podchaos", "probe", "-n", "default")
    assert after["spec"]["mode"] == "all" and after["status"] == status["status"]
    assert after["metadata"]["generation"] == generation + 1
    kubectl(
        "patch",
        "podchaos",
        "probe",
        "-n",
        "default",
        "--subresource=status",
        "--type=merge",
        "-p",
        '{"spec":{"mode":"one"}}',
    )
    assert _json(kubectl, "get", "podchaos", "probe", "-n", "default")["spec"]["mode"] == "all"
    invalid = kubectl(
        "apply",
        "-f",
        "-",
        stdin=CHAOS.format(namespace="default").replace("pod-kill", "no-such-action"),
        check=False,
    )
    assert invalid.returncode == 1, "the pinned CRD schema refuses an unknown action"
    kubectl("delete", "podchaos", "probe", "-n", "default")


def test_the_twins_chaos_mesh_reports_an_experiment_in_its_namespace(kubectl: Kubectl) -> None:
    kubectl("apply", "-f", "-", stdin=CHAOS.format(namespace=NS))

    def injected() -> bool:
        status = _json(kubectl, "get", "podchaos", "probe", "-n", NS).get("status") or {}
        conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
        return conditions.get("AllInjected") == "True"

    eventually(injected, "Chaos Mesh's AllInjected on the PodChaos")
    kubectl("delete", "podchaos", "probe", "-n", NS)
    assert kubectl("get", "podchaos", "probe", "-n", NS, check=False).returncode == 1


def test_a_watch_sees_creations_and_deletions_in_order(kubeconfig: Any) -> None:
    client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
    core = kubernetes.client.CoreV1Api(client)
    start = core.list_namespaced_config_map(NS).metadata.resource_version
    seen: list[tuple[str, str]] = []

    def watch() -> None:
        stream = kubernetes.watch.Watch()
        for event in stream.stream(
            core.list_namespaced_config_map, NS, resource_version=start, timeout_seconds=20
        ):
            seen.append((event["type"], event["object"].metadata.name))
            if event["type"] == "DELETED":
                stream.stop()

    thread = threading.Thread(target=watch)
    thread.start()
    core.create_namespaced_config_map(NS, {"metadata": {"name": "watched"}, "data": {"a": "1"}})
    core.patch_namespaced_config_map("watched", NS, {"data": {"a": "2"}})
    core.delete_namespaced_config_map("watched", NS)
    thread.join(30)
    assert seen == [("ADDED", "watched"), ("MODIFIED", "watched"), ("DELETED", "watched")]


def test_the_twins_controllers_act_on_writes_through_the_api(kubectl: Kubectl) -> None:
    def pods(app: str) -> list[Any]:
        return _json(kubectl, "get", "pods", "-n", NS, "-l", f"opentelemetry.io/name={app}")[
            "items"
        ]

    assert pods("ad")
    kubectl("patch", "deployment", "ad", "-n", NS, "-p", '{"spec":{"replicas":0}}')
    eventually(lambda: not pods("ad") or None, "the ad pods deleted after scaling to zero")
    kubectl("patch", "deployment", "ad", "-n", NS, "-p", '{"spec":{"replicas":1}}')
    kubectl("rollout", "status", "deployment/ad", "-n", NS, "--timeout=60s", timeout=90)
    running = eventually(
        lambda: [p for p in pods("ad") if p["status"]["phase"] == "Running"], "an ad pod running"
    )
    assert len(running) == 1


def test_kubectl_logs_reads_the_twins_container_logs(
    served: ServedCluster, kubectl: Kubectl
) -> None:
    pod = _json(kubectl, "get", "pods", "-n", NS, "-l", "opentelemetry.io/name=cart")["items"][0]
    name = pod["metadata"]["name"]
    lines = kubectl("logs", name, "-n", NS, "--tail=5").stdout.splitlines()
    assert lines == served.env.pod_logs(name, 5)


def test_a_request_without_the_token_is_unauthorized(
    served: ServedCluster, kubeconfig: Any, tmp_path: Any
) -> None:
    import yaml

    config = yaml.safe_load(kubeconfig.read_text())
    config["users"][0]["user"]["token"] = "not-a-token"
    bad = tmp_path / "bad"
    bad.write_text(yaml.safe_dump(config))
    denied = Kubectl(bad)("get", "pods", "-n", NS, check=False)
    said = denied.stderr + denied.stdout
    # kubectl words a 401 as "Unauthorized", or as "You must be logged in" during discovery.
    assert denied.returncode == 1
    assert "Unauthorized" in said or "You must be logged in to the server" in said


@pytest.mark.parametrize("body", ["[]", '"text"'])
def test_a_patch_that_is_not_an_object_is_a_bad_request(kubectl: Kubectl, body: str) -> None:
    done = kubectl("patch", "deployment", "cart", "-n", NS, "--type=merge", "-p", body, check=False)
    assert done.returncode == 1


def test_a_crd_whose_metadata_schema_has_a_description_is_refused_as_kube_apiserver_does(
    kubectl: Kubectl,
) -> None:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.io"},
        "spec": {
            "group": "example.io",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "metadata": {"type": "object", "description": "Standard."}
                            },
                        }
                    },
                }
            ],
        },
    }
    refused = kubectl("apply", "-f", "-", stdin=json.dumps(crd), check=False)
    assert refused.returncode == 1
    assert (
        "spec.versions[0].schema.openAPIV3Schema.properties[metadata]: Forbidden: must not "
        "specify anything other than name and generateName" in refused.stderr
    )
    assert kubectl("get", "crd", "widgets.example.io", check=False).returncode == 1
    del crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["metadata"][
        "description"
    ]
    assert "created" in kubectl("apply", "-f", "-", stdin=json.dumps(crd)).stdout
