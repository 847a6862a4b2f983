"""The topology builder on Kubernetes-shaped objects: typed edges, distances, sub-trees."""

from __future__ import annotations

from typing import Any

import pytest

from itbench.core.topology import Edge, EdgeType, Topology, TopologyError, build_topology


def obj(kind: str, name: str, **fields: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "otel-demo"}
    for key in ("labels", "ownerReferences"):
        if key in fields:
            meta[key] = fields.pop(key)
    return {"apiVersion": "v1", "kind": kind, "metadata": meta, **fields}


def owner(kind: str, name: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": f"uid-{name}"}


def shop_objects() -> list[dict[str, Any]]:
    pod_spec = {
        "nodeName": "node-1",
        "volumes": [{"name": "cfg", "configMap": {"name": "cart-config"}}],
        "containers": [
            {
                "name": "cart",
                "env": [
                    {
                        "name": "PASSWORD",
                        "valueFrom": {"secretKeyRef": {"name": "cart-secret", "key": "pw"}},
                    }
                ],
            }
        ],
    }
    return [
        obj("Deployment", "cart", spec={"template": {"metadata": {"labels": {"app": "cart"}}}}),
        obj("ReplicaSet", "cart-7d9f", ownerReferences=[owner("Deployment", "cart")]),
        obj(
            "Pod",
            "cart-7d9f-abcde",
            labels={"app": "cart", "pod-template-hash": "7d9f"},
            ownerReferences=[owner("ReplicaSet", "cart-7d9f")],
            spec=pod_spec,
            status={"phase": "Running"},
        ),
        obj("Service", "cart", spec={"selector": {"app": "cart"}}),
        obj("ConfigMap", "cart-config", data={"k": "v"}),
        obj("Secret", "cart-secret"),
        obj(
            "HorizontalPodAutoscaler",
            "cart",
            spec={
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "cart"}
            },
        ),
        obj("Flag", "cartFailure", spec={"targets": ["Deployment/cart"]}),
        obj("Deployment", "checkout", spec={"template": {"metadata": {"labels": {"app": "co"}}}}),
        obj("Service", "checkout", spec={"selector": {"app": "co"}}),
        obj("Node", "node-1"),
    ]


def test_builder_creates_every_typed_edge_from_kubernetes_objects() -> None:
    topo = build_topology(shop_objects(), [("checkout", "cart"), ("frontend", "checkout")])
    edges = set(topo.edges)
    expected = {
        Edge("Deployment/cart", "ReplicaSet/cart-7d9f", EdgeType.OWNS),
        Edge("ReplicaSet/cart-7d9f", "Pod/cart-7d9f-abcde", EdgeType.OWNS),
        Edge("Service/cart", "Pod/cart-7d9f-abcde", EdgeType.SELECTS),
        Edge("Pod/cart-7d9f-abcde", "Node/node-1", EdgeType.RUNS_ON),
        Edge("ConfigMap/cart-config", "Pod/cart-7d9f-abcde", EdgeType.MOUNTS),
        Edge("Secret/cart-secret", "Pod/cart-7d9f-abcde", EdgeType.ENV),
        Edge("HorizontalPodAutoscaler/cart", "Deployment/cart", EdgeType.SCALES),
        Edge("Flag/cartFailure", "Deployment/cart", EdgeType.CONFIGURES),
        Edge("Service/checkout", "Service/cart", EdgeType.CALLS),
        Edge("Service/frontend", "Service/checkout", EdgeType.CALLS),
        # No checkout pods exist, so the Service selects the workload by its pod template.
        Edge("Service/checkout", "Deployment/checkout", EdgeType.SELECTS),
    }
    assert expected <= edges
    assert "Service/frontend" in topo  # only referenced by the call graph


def test_service_selector_needs_every_label() -> None:
    objects = [
        obj("Pod", "a", labels={"app": "cart", "tier": "web"}),
        obj("Pod", "b", labels={"app": "cart"}),
        obj("Service", "web", spec={"selector": {"app": "cart", "tier": "web"}}),
    ]
    topo = build_topology(objects, [])
    assert [n for n, _ in topo.neighbours("Service/web")] == ["Pod/a"]


def test_network_policy_selects_pods_and_empty_selector_selects_all() -> None:
    objects = [
        obj("Pod", "a", labels={"app": "x"}),
        obj("Pod", "b", labels={"app": "y"}),
        obj("NetworkPolicy", "only-x", spec={"podSelector": {"matchLabels": {"app": "x"}}}),
        obj("NetworkPolicy", "all", spec={"podSelector": {}}),
    ]
    topo = build_topology(objects, [])
    assert sorted(n for n, _ in topo.neighbours("NetworkPolicy/only-x")) == ["Pod/a"]
    assert sorted(n for n, _ in topo.neighbours("NetworkPolicy/all")) == ["Pod/a", "Pod/b"]


def test_objects_without_kind_or_name_are_skipped() -> None:
    topo = build_topology([{"metadata": {"name": "x"}}, {"kind": "Pod", "metadata": {}}], [])
    assert len(topo) == 0


def test_hops_and_typed_distances_ignore_direction() -> None:
    topo = build_topology(shop_objects(), [("checkout", "cart")])
    assert topo.hops("Pod/cart-7d9f-abcde", "Deployment/cart") == 2
    assert topo.hops("Service/cart", "Node/node-1") == 2
    costs = {EdgeType.OWNS: 1.0, EdgeType.SELECTS: 1.0, EdgeType.RUNS_ON: 2.0}
    dist = topo.distances(["Deployment/cart"], costs)
    assert dist["Deployment/cart"] == 0.0
    assert dist["Pod/cart-7d9f-abcde"] == 2.0
    assert dist["Service/cart"] == 3.0
    assert dist["Node/node-1"] == 4.0
    assert "ConfigMap/cart-config" not in dist  # mounts edges are not in the cost table


def test_distances_respect_the_cutoff_and_stop_at_targets() -> None:
    topo = Topology(
        ["Pod/a", "Pod/b", "Pod/c", "Pod/d"],
        [
            Edge("Pod/a", "Pod/b", EdgeType.CALLS),
            Edge("Pod/b", "Pod/c", EdgeType.CALLS),
            Edge("Pod/c", "Pod/d", EdgeType.CALLS),
        ],
    )
    costs = {EdgeType.CALLS: 1.0}
    assert topo.distances(["Pod/a"], costs, cutoff=2.0) == {"Pod/a": 0, "Pod/b": 1, "Pod/c": 2}
    assert topo.distances(["Pod/a"], costs, targets=["Pod/b"]) == {"Pod/a": 0, "Pod/b": 1}
    assert topo.hops("Pod/a", "Pod/missing") is None


def test_subtree_size_counts_owned_selected_and_hosted_entities_once() -> None:
    topo = build_topology(shop_objects(), [])
    assert topo.subtree_size("Pod/cart-7d9f-abcde") == 1
    assert topo.subtree_size("ReplicaSet/cart-7d9f") == 2
    assert topo.subtree_size("Deployment/cart") == 3
    assert topo.subtree_size("Node/node-1") == 2
    # The HPA's sub-tree is its target's, plus itself.
    assert topo.subtree_size("HorizontalPodAutoscaler/cart") == 4


def test_to_dict_round_trips_and_is_json_shaped() -> None:
    topo = build_topology(shop_objects(), [("checkout", "cart")])
    data = topo.to_dict()
    assert {"id": "Deployment/cart", "kind": "Deployment", "name": "cart"} in data["nodes"]
    assert {"source": "Service/checkout", "target": "Service/cart", "type": "calls"} in data[
        "edges"
    ]
    again = Topology.from_dict(data)
    assert again.nodes == topo.nodes
    assert again.edges == topo.edges


def test_malformed_topologies_are_rejected() -> None:
    with pytest.raises(TopologyError, match="unknown node"):
        Topology(["Pod/a"], [Edge("Pod/a", "Pod/b", EdgeType.CALLS)])
    with pytest.raises(TopologyError, match="Kind/name"):
        Topology(["nokind"], [])
    with pytest.raises(TopologyError, match="malformed"):
        Topology.from_dict({"nodes": [{"id": "Pod/a"}], "edges": [{"source": "Pod/a"}]})


def test_match_finds_names_by_exact_name_and_pattern() -> None:
    topo = build_topology(shop_objects(), [])
    assert topo.match("Pod", "cart-*") == ["Pod/cart-7d9f-abcde"]
    assert topo.match("Service", "cart") == ["Service/cart"]
    assert topo.match("service", "cart") == []
    assert topo.match("Pod", "Cart-*") == []


def test_match_handles_every_wildcard_form() -> None:
    topo = Topology(["Pod/cart-1", "Pod/cart-22", "Pod/bart-1", "Pod/checkout-1", "Pod/cart"], [])
    assert topo.match("Pod", "cart-*") == ["Pod/cart-1", "Pod/cart-22"]
    assert topo.match("Pod", "cart-?") == ["Pod/cart-1"]
    assert topo.match("Pod", "[bc]art-1") == ["Pod/bart-1", "Pod/cart-1"]
    assert topo.match("Pod", "*-1") == ["Pod/bart-1", "Pod/cart-1", "Pod/checkout-1"]
    assert len(topo.match("Pod", "*")) == 5
    assert topo.match("Pod", "cart*") == ["Pod/cart", "Pod/cart-1", "Pod/cart-22"]


def test_distances_are_the_same_for_equal_cost_tables_given_in_any_order() -> None:
    topo = build_topology(shop_objects(), [("checkout", "cart")])
    a = {EdgeType.OWNS: 1.0, EdgeType.CALLS: 2.0}
    b = {EdgeType.CALLS: 2.0, EdgeType.OWNS: 1.0}
    assert topo.distances(["Service/checkout"], a) == topo.distances(["Service/checkout"], b)
    assert topo.distances(["Service/checkout"], a)["Service/cart"] == 2.0
