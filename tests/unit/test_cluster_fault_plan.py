"""How the live-cluster fault injector plans its playbook runs: one run per injection and one
per removal, consecutive changes of a kind in one step, and what a failed run undoes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

import itbench.core.fault_library  # noqa: F401 (registers the faults)
from itbench.core.faults import ObjectChange, get_fault
from itbench.environments.kube.faults import (
    PLAYBOOK_FOR_OP,
    RESTORE_PLAYBOOK,
    STEPS_PLAYBOOK,
    AppliedChange,
    ClusterFaults,
    PlaybookError,
    inject_plan,
    one_run,
    undo_plan,
)
from itbench.environments.port import EnvironmentFailure

NS = "otel-demo"


def deployment(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS, "resourceVersion": "7"},
        "spec": {"replicas": 1},
        "status": {"replicas": 1},
    }


class Cluster:
    """Objects by name (every change's target), and the playbook runs asked for."""

    def __init__(self, *names: str, fail: str | None = None) -> None:
        self.objects = {name: deployment(name) for name in names}
        self.runs: list[tuple[str, dict[str, Any]]] = []
        self.fail = fail

    def read(self, api_version: str, kind: str, name: str, namespace: str | None) -> Any:
        return self.objects.get(name)

    def run(self, playbook: str, extravars: Mapping[str, Any]) -> None:
        self.runs.append((playbook, dict(extravars)))
        if self.fail is not None and playbook == self.fail:
            raise PlaybookError(f"{playbook}: task 'x': refused")


def patch(name: str) -> ObjectChange:
    return ObjectChange(
        op="merge-patch",
        api_version="apps/v1",
        kind="Deployment",
        name=name,
        namespace=NS,
        body={"spec": {"replicas": 0}},
    )


def test_consecutive_changes_of_a_kind_make_one_step_in_their_order() -> None:
    changes = get_fault("kubernetes.priority-preemption").changes({"workload": "kafka"}, NS)
    assert [c.op for c in changes] == ["create", "create", "merge-patch", "create"]
    plan = inject_plan(changes)
    assert [p for p, _ in plan] == [
        PLAYBOOK_FOR_OP["create"],
        PLAYBOOK_FOR_OP["merge-patch"],
        PLAYBOOK_FOR_OP["create"],
    ]
    assert [[c["name"] for c in v["changes"]] for _, v in plan] == [
        [changes[0].name, changes[1].name],
        [changes[2].name],
        [changes[3].name],
    ]
    flag = inject_plan(get_fault("flagd.cart-failure").changes({}, NS), flagd_key="k")
    assert [p for p, _ in flag] == [PLAYBOOK_FOR_OP["set-flag"], PLAYBOOK_FOR_OP["rollout"]]
    assert flag[0][1]["flagd_key"] == "k" and "flagd_key" not in flag[1][1]


def test_several_steps_run_as_the_steps_playbook_and_one_step_as_its_own() -> None:
    single = [(RESTORE_PLAYBOOK, {"objects": [deployment("cart")]})]
    assert one_run(single) == single[0]
    plan = inject_plan(get_fault("flagd.cart-failure").changes({}, NS), flagd_key="k")
    playbook, extravars = one_run(plan)
    assert playbook == STEPS_PLAYBOOK
    assert extravars["flagd_key"] == "k", "variables every step shares are the run's"
    assert extravars["keep_going"] is False
    assert [(s["tasks"], s["label"]) for s in extravars["steps"]] == [
        ("flagd", "set-flag ConfigMap/flagd-config"),
        ("rollout", "rollout Deployment/flagd"),
    ]
    assert all("flagd_key" not in s for s in extravars["steps"])


def test_undoing_restores_latest_first_in_one_step_and_rolls_out_last() -> None:
    cart, ad = deployment("cart"), deployment("ad")
    rollout = ObjectChange(
        op="rollout", api_version="apps/v1", kind="Deployment", name="flagd", namespace=NS
    )
    applied = [
        AppliedChange(change=patch("cart"), before=cart),
        AppliedChange(change=rollout, before=deployment("flagd")),
        AppliedChange(change=patch("ad"), before=ad),
    ]
    plan = undo_plan(applied)
    assert [p for p, _ in plan] == [RESTORE_PLAYBOOK, PLAYBOOK_FOR_OP["rollout"]]
    assert [o["metadata"]["name"] for o in plan[0][1]["objects"]] == ["ad", "cart"]
    assert "resourceVersion" not in plan[0][1]["objects"][0]["metadata"]
    assert plan[1][1]["restarted_at"] == {"flagd": None}


def test_an_injection_is_one_run_and_its_removal_another() -> None:
    cluster = Cluster("cart", "ad")
    faults = ClusterFaults(reader=cluster, runner=cluster)
    applied = faults.inject([patch("cart"), patch("ad")])
    assert [a.before for a in applied] == [deployment("cart"), deployment("ad")]
    assert [(p, [c["name"] for c in v["changes"]]) for p, v in cluster.runs] == [
        (PLAYBOOK_FOR_OP["merge-patch"], ["cart", "ad"])
    ]
    faults.remove(applied)
    assert len(cluster.runs) == 2
    playbook, extravars = cluster.runs[1]
    assert playbook == RESTORE_PLAYBOOK
    assert [o["metadata"]["name"] for o in extravars["objects"]] == ["ad", "cart"]
    assert faults.inject([]) == [] and len(cluster.runs) == 2, "nothing to make: no run"


def test_a_missing_target_fails_before_anything_runs() -> None:
    cluster = Cluster("cart")
    faults = ClusterFaults(reader=cluster, runner=cluster)
    with pytest.raises(
        EnvironmentFailure, match=r"merge-patch Deployment/gone failed: .* not found"
    ):
        faults.inject([patch("cart"), patch("gone")])
    assert cluster.runs == []


def test_a_failed_run_undoes_every_change_it_was_to_make_and_names_them() -> None:
    cluster = Cluster("cart", "ad", fail=PLAYBOOK_FOR_OP["merge-patch"])
    faults = ClusterFaults(reader=cluster, runner=cluster)
    with pytest.raises(EnvironmentFailure) as failure:
        faults.inject([patch("cart"), patch("ad")])
    assert "merge-patch Deployment/cart, merge-patch Deployment/ad" in str(failure.value)
    assert "refused" in str(failure.value)
    [_, (undo, extravars)] = cluster.runs
    assert undo == RESTORE_PLAYBOOK
    assert [o["metadata"]["name"] for o in extravars["objects"]] == ["ad", "cart"]


def test_a_removal_keeps_going_past_a_failed_step_and_says_so() -> None:
    cluster = Cluster("cart", fail=STEPS_PLAYBOOK)
    faults = ClusterFaults(reader=cluster, runner=cluster)
    created = ObjectChange(op="create", kind="ConfigMap", name="extra", namespace=NS)
    applied = [
        AppliedChange(change=created, before=None),
        AppliedChange(change=patch("cart"), before=deployment("cart")),
    ]
    with pytest.raises(EnvironmentFailure, match=r"removing the fault failed: .*refused"):
        faults.remove(applied)
    [(playbook, extravars)] = cluster.runs
    assert playbook == STEPS_PLAYBOOK and extravars["keep_going"] is True
    assert [s["tasks"] for s in extravars["steps"]] == ["restore", "object-create"]
