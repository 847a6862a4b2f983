"""The loopback API speaks enough Kubernetes for the official client, watch, kubectl and Kopf."""

from __future__ import annotations

import asyncio
import json
import time

import kopf
import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException
from operator_lab import NS, Cluster, until

GROUP, VERSION = "itbench.io", "v1alpha1"


def _run(name: str = "r1", **spec: object) -> dict[str, object]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "BenchmarkRun",
        "metadata": {"name": name},
        "spec": {"agentRef": {"name": "agent"}, "scenarios": {"names": ["x"]}, **spec},
    }


def test_create_fills_server_metadata_and_answers_201(cluster: Cluster) -> None:
    custom = cluster.api.custom
    created, code, _ = custom.create_namespaced_custom_object_with_http_info(
        GROUP, VERSION, NS, "benchmarkruns", _run()
    )
    meta = created["metadata"]
    assert code == 201
    assert meta["namespace"] == NS and meta["uid"] and meta["generation"] == 1
    assert int(meta["resourceVersion"]) > 0 and meta["creationTimestamp"].endswith("Z")
    listed = custom.list_namespaced_custom_object(GROUP, VERSION, NS, "benchmarkruns")
    assert listed["kind"] == "BenchmarkRunList"
    assert [i["kind"] for i in listed["items"]] == ["BenchmarkRun"]
    with pytest.raises(ApiException) as again:
        custom.create_namespaced_custom_object(GROUP, VERSION, NS, "benchmarkruns", _run())
    assert again.value.status == 409


def test_status_subresource_is_separate_and_generation_tracks_spec(cluster: Cluster) -> None:
    custom = cluster.api.custom
    custom.create_namespaced_custom_object(GROUP, VERSION, NS, "benchmarkruns", _run())
    custom.patch_namespaced_custom_object(
        GROUP, VERSION, NS, "benchmarkruns", "r1", {"status": {"phase": "Running"}}
    )
    assert "status" not in cluster.get("benchmarkruns", "r1")  # type: ignore[operator]
    after = custom.patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        NS,
        "benchmarkruns",
        "r1",
        {"status": {"phase": "Running"}, "spec": {"seed": 1}},
    )
    assert after["status"] == {"phase": "Running"} and "seed" not in after["spec"]
    assert after["metadata"]["generation"] == 1
    changed = custom.patch_namespaced_custom_object(
        GROUP, VERSION, NS, "benchmarkruns", "r1", {"spec": {"seed": 7}}
    )
    assert changed["metadata"]["generation"] == 2 and changed["status"] == {"phase": "Running"}


def test_failed_json_patch_test_is_422_and_put_checks_resource_version(cluster: Cluster) -> None:
    custom = cluster.api.custom
    created = custom.create_namespaced_custom_object(GROUP, VERSION, NS, "benchmarkruns", _run())
    stale = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "0"},
        {"op": "add", "path": "/metadata/finalizers", "value": ["x/y"]},
    ]
    with pytest.raises(ApiException) as failed:
        custom.patch_namespaced_custom_object(GROUP, VERSION, NS, "benchmarkruns", "r1", stale)
    assert failed.value.status == 422
    created["spec"]["seed"] = 5
    replaced = custom.replace_namespaced_custom_object(
        GROUP, VERSION, NS, "benchmarkruns", "r1", created
    )
    assert replaced["spec"]["seed"] == 5
    with pytest.raises(ApiException) as conflict:
        custom.replace_namespaced_custom_object(GROUP, VERSION, NS, "benchmarkruns", "r1", created)
    assert conflict.value.status == 409


def test_label_selectors_and_owner_garbage_collection(cluster: Cluster) -> None:
    core = cluster.api.core
    owner = core.create_namespaced_config_map(NS, {"metadata": {"name": "owner"}})
    for name, team in (("a", "x"), ("b", "y")):
        core.create_namespaced_config_map(
            NS,
            {
                "metadata": {
                    "name": name,
                    "labels": {"team": team},
                    "ownerReferences": [
                        {
                            "apiVersion": "v1",
                            "kind": "ConfigMap",
                            "name": "owner",
                            "uid": owner.metadata.uid,
                        }
                    ],
                }
            },
        )
    picked = core.list_namespaced_config_map(NS, label_selector="team in (x,z)").items
    assert [c.metadata.name for c in picked] == ["a"]
    assert [
        c.metadata.name for c in core.list_namespaced_config_map(NS, label_selector="team!=x").items
    ] == ["b", "owner"]
    core.delete_namespaced_config_map("owner", NS)
    assert core.list_namespaced_config_map(NS).items == []


def test_watch_streams_changes_and_ends_at_its_timeout(cluster: Cluster) -> None:
    custom = cluster.api.custom
    custom.create_namespaced_custom_object(GROUP, VERSION, NS, "benchmarkruns", _run("a"))
    listed = custom.list_namespaced_custom_object(GROUP, VERSION, NS, "benchmarkruns")
    custom.create_namespaced_custom_object(GROUP, VERSION, NS, "benchmarkruns", _run("b"))
    custom.delete_namespaced_custom_object(GROUP, VERSION, NS, "benchmarkruns", "a")
    watch = kubernetes.watch.Watch()
    start = time.monotonic()
    events = [
        (e["type"], e["object"]["metadata"]["name"])
        for e in watch.stream(
            custom.list_namespaced_custom_object,
            GROUP,
            VERSION,
            NS,
            "benchmarkruns",
            resource_version=listed["metadata"]["resourceVersion"],
            timeout_seconds=1,
        )
    ]
    assert events == [("ADDED", "b"), ("DELETED", "a")]
    assert time.monotonic() - start < 10


def test_finalizers_hold_deletion_until_removed(cluster: Cluster) -> None:
    custom = cluster.api.custom
    body = _run()
    body["metadata"] = {"name": "r1", "finalizers": ["itbench.io/release"]}
    custom.create_namespaced_custom_object(GROUP, VERSION, NS, "benchmarkruns", body)
    custom.delete_namespaced_custom_object(GROUP, VERSION, NS, "benchmarkruns", "r1")
    held = cluster.get("benchmarkruns", "r1")
    assert held is not None and held["metadata"]["deletionTimestamp"]
    custom.patch_namespaced_custom_object(
        GROUP, VERSION, NS, "benchmarkruns", "r1", {"metadata": {"finalizers": None}}
    )
    assert cluster.get("benchmarkruns", "r1") is None


def test_kubectl_applies_patches_status_and_prints_columns(cluster: Cluster) -> None:
    assert "Server Version: v1.32" in cluster.kubectl("version")
    assert "created" in cluster.apply(_run())
    assert "unchanged" in cluster.apply(_run())
    cluster.kubectl(
        "patch",
        "benchmarkrun",
        "r1",
        "--type=merge",
        "--subresource=status",
        "-p",
        json.dumps({"status": {"phase": "Running", "progress": "3/9"}}),
    )
    table = cluster.kubectl("get", "benchmarkruns")
    header, row = table.splitlines()[:2]
    assert header.split()[:4] == ["NAME", "AGENT", "PHASE", "PROGRESS"]
    assert row.split()[:4] == ["r1", "agent", "Running", "3/9"]
    as_json = json.loads(cluster.kubectl("get", "br", "r1", "-o", "json"))
    assert as_json["status"]["progress"] == "3/9"
    cluster.kubectl(
        "wait", "--for=jsonpath={.status.phase}=Running", "benchmarkrun/r1", "--timeout=5s"
    )
    assert "deleted" in cluster.kubectl("delete", "benchmarkrun", "r1")


@pytest.mark.asyncio
async def test_kopf_runs_next_to_the_api_and_is_cancelled_quickly(cluster: Cluster) -> None:
    registry = kopf.OperatorRegistry()
    seen: list[str] = []

    @kopf.on.login(registry=registry)
    def login(**_: object) -> kopf.ConnectionInfo:
        return kopf.ConnectionInfo(server=cluster.server.url, insecure=True)

    @kopf.on.create(GROUP, VERSION, "benchmarkruns", id="seen", registry=registry)
    def created(name: str, **_: object) -> None:
        seen.append(name)

    @kopf.on.delete(GROUP, VERSION, "benchmarkruns", id="gone", registry=registry)
    def deleted(name: str, **_: object) -> None:
        seen.append(f"-{name}")

    settings = kopf.OperatorSettings()
    settings.scanning.disabled = True
    ready = asyncio.Event()
    task = asyncio.create_task(
        kopf.operator(
            registry=registry,
            settings=settings,
            standalone=True,
            clusterwide=True,
            ready_flag=ready,
        )
    )
    try:
        await asyncio.wait_for(ready.wait(), 10)
        cluster.api.custom.create_namespaced_custom_object(
            GROUP, VERSION, NS, "benchmarkruns", _run()
        )
        await until(lambda: seen == ["r1"], what="the create handler")
        finalizers = cluster.get("benchmarkruns", "r1")["metadata"]["finalizers"]  # type: ignore[index]
        assert finalizers == ["kopf.zalando.org/KopfFinalizerMarker"]
        cluster.api.custom.delete_namespaced_custom_object(
            GROUP, VERSION, NS, "benchmarkruns", "r1"
        )
        await until(lambda: cluster.get("benchmarkruns", "r1") is None, what="deletion")
        assert seen == ["r1", "-r1"]
    finally:
        start = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert time.monotonic() - start < 1.0
