"""An operator SIGKILLed in the middle of a fault injection, on the real control plane: the
injection's undo was kept on the Trial before its playbook ran, the playbook died with the
operator, and the next operator process rolls back whatever part of the fault was made, so the
shop is back at its baseline and the trial injects the fault again, once.

Each kill point is a random moment of an injection of two faults in one playbook run (a patch of
a Deployment, and a Chaos Mesh experiment the playbook waits on, which no Chaos Mesh reports
here, so the run is still going when it is killed). ITBENCH_KILL_POINTS sets how many (default 4).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from typing import Any

import kubernetes
from kube_shop import ChaosStandIn, chaos_crds, load_shop

import itbench.core.fault_library  # noqa: F401 (registers the faults)
from itbench.core.faults import get_fault
from itbench.environments.kube.faults import restorable
from itbench.operator.clusters import InjectionRecords, Lease, LeasedClusterEnvironment
from itbench.operator.kubeapi import KubeApi
from tests.kube_collection import kubernetes_core
from tests.kube_controlplane import ControlPlane

NS = "kill-shop"
KEY = "uid/inject/0"
KILL_POINTS = int(os.environ.get("ITBENCH_KILL_POINTS", "4"))

INJECT = """
import json, sys
from pathlib import Path
import kubernetes
import itbench.core.fault_library
from itbench.core.faults import get_fault
from itbench.operator.clusters import InjectionRecords, Lease, LeasedClusterEnvironment
from itbench.operator.kubeapi import KubeApi

kubeconfig, ns, collections, server = sys.argv[1:5]
client = kubernetes.config.new_client_from_config(config_file=kubeconfig)
env = LeasedClusterEnvironment(
    kubeconfig=Path(kubeconfig), namespace=ns, collections_path=collections,
    lease=Lease(cluster=server, slot=0, secret=f"{ns}/lab", provisioned_at=1000.0),
    api=KubeApi(client), trial=(ns, "t"), chaos_timeout=300,
)
env.resume(InjectionRecords())
changes = [
    *get_fault("kubernetes.memory-limit").changes({"workload": "cart", "memory": "20Mi"}, ns),
    *get_fault("chaos.network-delay").changes(json.loads(sys.argv[5]), ns),
]
env.inject(sys.argv[6], changes)
"""


def _state(plane: ControlPlane) -> dict[str, Any]:
    cart = json.loads(plane.kubectl("get", "deployment", "cart", "-n", NS, "-o", "json").stdout)
    chaos = json.loads(plane.kubectl("get", "networkchaos", "-n", NS, "-o", "json").stdout)
    spec = restorable(cart)["spec"]
    return {"cart": spec, "chaos": [c["metadata"]["name"] for c in chaos["items"]]}


def _changes(delay_args: dict[str, Any]) -> list[Any]:
    return [
        *get_fault("kubernetes.memory-limit").changes({"workload": "cart", "memory": "20Mi"}, NS),
        *get_fault("chaos.network-delay").changes(delay_args, NS),
    ]


def _records(plane: ControlPlane) -> InjectionRecords:
    trial = json.loads(plane.kubectl("get", "trial", "t", "-n", NS, "-o", "json").stdout)
    return InjectionRecords.of(trial)


def test_an_injection_cut_short_by_a_kill_is_rolled_back_and_made_once_again(
    control_plane: ControlPlane,
) -> None:
    control_plane.kubectl(
        "apply",
        "--server-side",
        "-f",
        "-",
        stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": chaos_crds()}),
    )
    control_plane.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    load_shop(control_plane, NS)
    baseline = _state(control_plane)
    assert baseline["chaos"] == []
    delay_args = {"workload": "product-catalog", "latencyMs": 2000}
    collections = kubernetes_core()
    client = kubernetes.config.new_client_from_config(config_file=str(control_plane.kubeconfig))
    rng = random.Random(2026)
    figures = {"kills": 0, "rolled_back": 0, "leaked": 0, "injected_twice": 0}
    for point in range(KILL_POINTS):
        trial = {
            "apiVersion": "itbench.io/v1alpha1",
            "kind": "Trial",
            "metadata": {"name": "t", "namespace": NS},
            "spec": {
                "agentRef": {"name": "a"},
                "scenario": "kill-point",
                "runRef": {"name": "r"},
                "attempt": point,
                "seed": point,
            },
        }
        control_plane.kubectl("delete", "trial", "t", "-n", NS, "--ignore-not-found", "--wait")
        control_plane.kubectl("apply", "-f", "-", stdin=json.dumps(trial))
        operator = subprocess.Popen(
            [
                sys.executable,
                "-c",
                INJECT,
                str(control_plane.kubeconfig),
                NS,
                collections,
                control_plane.server,
                json.dumps(delay_args),
                KEY,
            ],
            start_new_session=True,
        )
        # A random moment after the intent is kept and before the run could finish.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and _records(control_plane).prepared is None:
            assert operator.poll() is None, "the injection ended before it was killed"
            time.sleep(0.1)
        time.sleep(rng.uniform(0.0, 6.0))
        assert operator.poll() is None, "the injection ended before it was killed"
        operator.send_signal(signal.SIGKILL)
        operator.wait()
        figures["kills"] += 1
        time.sleep(1.0)  # anything the killed run left running would act now
        records = _records(control_plane)
        assert records.pending == KEY and records.prepared is not None, point

        restarted = LeasedClusterEnvironment(
            kubeconfig=control_plane.kubeconfig,
            namespace=NS,
            collections_path=collections,
            lease=Lease(
                cluster=control_plane.server, slot=0, secret=f"{NS}/lab", provisioned_at=1000.0
            ),
            api=KubeApi(client),
            trial=(NS, "t"),
        )
        try:
            restarted.resume(records)
            figures["rolled_back"] += 1
            assert _state(control_plane) == baseline, f"kill point {point} left the fault"
            after = _records(control_plane)
            assert after.pending is None and after.prepared is None and not after.records
            # The trial goes on: the fault is injected again, once, and removed at its end.
            with ChaosStandIn(client, NS):
                assert restarted.inject(KEY, _changes(delay_args))
                injected = _state(control_plane)
                figures["injected_twice"] += len(injected["chaos"]) != 1
                assert injected["cart"] != baseline["cart"]
                assert not restarted.inject(KEY, _changes(delay_args)), "a key is made once"
                assert restarted.remove(KEY)
        finally:
            restarted.close()
        leaked = _state(control_plane) != baseline
        figures["leaked"] += leaked
        events = json.loads(
            control_plane.kubectl(
                "get",
                "events",
                "-n",
                NS,
                "--field-selector",
                "involvedObject.name=t,reason=InjectionRolledBack",
                "-o",
                "json",
            ).stdout
        )["items"]
        assert events, "the rollback is not on the Trial's Events"
    print(f"kill figures: {figures}")
    assert figures == {
        "kills": KILL_POINTS,
        "rolled_back": KILL_POINTS,
        "leaked": 0,
        "injected_twice": 0,
    }
