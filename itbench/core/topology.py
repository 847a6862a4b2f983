"""The system topology: Kubernetes objects and service calls as a graph of typed edges.

Nodes are entities named `Kind/name`; edges say how one entity relates to another (owns, selects,
runs-on, ...). NTAM measures how far a predicted entity lies from the ground truth on this graph.
"""

from __future__ import annotations

import heapq
import math
import re
from bisect import bisect_left
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from fnmatch import translate
from typing import Any, TypeGuard

WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job")
"""Kinds that carry a pod template."""


class EdgeType(StrEnum):
    """How two entities relate; the source is named first."""

    OWNS = "owns"
    SELECTS = "selects"
    RUNS_ON = "runs-on"
    MOUNTS = "mounts"
    ENV = "env"
    SCALES = "scales"
    CALLS = "calls"
    CONFIGURES = "configures"


DOWNWARD: dict[EdgeType, bool] = {
    EdgeType.OWNS: True,
    EdgeType.SELECTS: True,
    EdgeType.MOUNTS: True,
    EdgeType.ENV: True,
    EdgeType.SCALES: True,
    EdgeType.CONFIGURES: True,
    EdgeType.RUNS_ON: False,
}
"""Edge types that define sub-trees: True follows source->target, False target->source.

A Node's sub-tree holds the pods that run on it; `calls` edges define no sub-tree.
"""


class TopologyError(ValueError):
    """A topology is malformed (an edge names an unknown node, an id is not `Kind/name`)."""


@dataclass(frozen=True, order=True)
class Edge:
    """One typed, directed edge."""

    source: str
    target: str
    type: EdgeType


def split_ref(ref: str) -> tuple[str, str]:
    """Split `Kind/name` into its kind and name.

    Args:
        ref: An entity reference.

    Returns:
        The kind and the name; the kind is empty when the reference has no slash.
    """
    kind, sep, name = ref.partition("/")
    return (kind, name) if sep else ("", ref)


class Topology:
    """An immutable graph of entities and typed edges, with distance and sub-tree queries."""

    def __init__(self, nodes: Iterable[str], edges: Iterable[Edge]) -> None:
        """Build the graph.

        Args:
            nodes: Entity ids, `Kind/name`.
            edges: Typed edges between those ids.

        Raises:
            TopologyError: An id is not `Kind/name`, or an edge names an unknown node.
        """
        self._nodes: dict[str, None] = {}
        self._by_kind: dict[str, dict[str, str]] = {}
        for node in nodes:
            kind, name = split_ref(node)
            if not kind or not name:
                raise TopologyError(f"node {node!r}: expected `Kind/name`")
            if node not in self._nodes:
                self._nodes[node] = None
                self._by_kind.setdefault(kind, {})[name] = node
        self._edges: list[Edge] = []
        seen: set[Edge] = set()
        self._adjacent: dict[str, list[tuple[str, EdgeType]]] = {n: [] for n in self._nodes}
        self._down: dict[str, list[str]] = {n: [] for n in self._nodes}
        for edge in edges:
            for end in (edge.source, edge.target):
                if end not in self._nodes:
                    raise TopologyError(
                        f"edge {edge.source} -{edge.type}-> {edge.target}: unknown node {end!r}"
                    )
            if edge in seen or edge.source == edge.target:
                continue
            seen.add(edge)
            self._edges.append(edge)
            self._adjacent[edge.source].append((edge.target, edge.type))
            self._adjacent[edge.target].append((edge.source, edge.type))
            if edge.type in DOWNWARD:
                parent, child = (
                    (edge.source, edge.target)
                    if DOWNWARD[edge.type]
                    else (edge.target, edge.source)
                )
                self._down[parent].append(child)
        self._subtree: dict[str, int] = {}
        self._sorted_names: dict[str, list[str]] = {}
        self._weighted: dict[tuple[tuple[str, float], ...], dict[str, list[tuple[str, float]]]] = {}

    # ---- structure ------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._nodes)

    def __contains__(self, node: object) -> bool:
        return node in self._nodes

    @property
    def nodes(self) -> list[str]:
        """Every entity id, in insertion order."""
        return list(self._nodes)

    @property
    def edges(self) -> list[Edge]:
        """Every distinct edge, in insertion order."""
        return list(self._edges)

    def kind_nodes(self, kind: str) -> list[str]:
        """Every entity id of one kind."""
        return list(self._by_kind.get(kind, {}).values())

    def match(self, kind: str, pattern: str) -> list[str]:
        """Entity ids of a kind whose name matches a shell-style pattern (case-sensitive).

        Args:
            kind: The exact kind.
            pattern: A name, or a pattern with `*`, `?` or `[...]`.

        Returns:
            The matching ids; for a wildcard pattern, in name order.
        """
        names = self._by_kind.get(kind)
        if not names:
            return []
        if not any(c in pattern for c in "*?["):
            node = names.get(pattern)
            return [node] if node is not None else []
        ordered = self._sorted_names.get(kind)
        if ordered is None:
            ordered = sorted(names)
            self._sorted_names[kind] = ordered
        first_wildcard = min(i for i, c in enumerate(pattern) if c in "*?[")
        prefix = pattern[:first_wildcard]
        start = bisect_left(ordered, prefix)
        if pattern == prefix + "*":
            end = bisect_left(ordered, prefix + "\U0010ffff", lo=start)
            return [names[n] for n in ordered[start:end]]
        regex = _compiled(pattern)
        found: list[str] = []
        for name in ordered[start:]:
            if not name.startswith(prefix):
                break
            if regex.match(name):
                found.append(names[name])
        return found

    def neighbours(self, node: str) -> list[tuple[str, EdgeType]]:
        """Adjacent entities with the type of the connecting edge, in either direction.

        Raises:
            KeyError: The node is not in the topology.
        """
        return list(self._adjacent[node])

    # ---- distances ------------------------------------------------------------------------

    def hops(self, source: str, target: str) -> int | None:
        """The number of edges on a shortest path ignoring direction, or None if unconnected."""
        if source not in self._nodes or target not in self._nodes:
            return None
        seen = {source: 0}
        queue = deque([source])
        while queue:
            node = queue.popleft()
            if node == target:
                return seen[node]
            for nxt, _ in self._adjacent[node]:
                if nxt not in seen:
                    seen[nxt] = seen[node] + 1
                    queue.append(nxt)
        return None

    def distances(
        self,
        sources: Iterable[str],
        costs: Mapping[EdgeType, float],
        *,
        cutoff: float = math.inf,
        targets: Iterable[str] | None = None,
    ) -> dict[str, float]:
        """Shortest typed distances from a set of sources, ignoring edge direction.

        Each edge costs `costs[type]` (edge types missing from `costs` are not traversed).

        Args:
            sources: Start entities (distance 0); unknown ids are ignored.
            costs: Positive cost per edge type.
            cutoff: Entities farther than this are left out.
            targets: Stop once all of these are settled (an optimisation; None explores all).

        Returns:
            Distance per reached entity, sources included.
        """
        adjacency = self._weighted_adjacency(costs)
        dist: dict[str, float] = {}
        heap: list[tuple[float, str]] = []
        for s in sources:
            if s in self._nodes and s not in dist:
                dist[s] = 0.0
                heap.append((0.0, s))
        heapq.heapify(heap)
        remaining = set(targets) & self._nodes.keys() if targets is not None else None
        done: set[str] = set()
        inf = math.inf
        while heap:
            d, node = heapq.heappop(heap)
            if node in done:
                continue
            done.add(node)
            if remaining is not None:
                remaining.discard(node)
                if not remaining:
                    break
            for nxt, cost in adjacency[node]:
                nd = d + cost
                if nd <= cutoff and nd < dist.get(nxt, inf):
                    dist[nxt] = nd
                    heapq.heappush(heap, (nd, nxt))
        return {n: dist[n] for n in done} if remaining is not None else dist

    def _weighted_adjacency(
        self, costs: Mapping[EdgeType, float]
    ) -> dict[str, list[tuple[str, float]]]:
        key = tuple(sorted((EdgeType(t).value, float(c)) for t, c in costs.items()))
        adjacency = self._weighted.get(key)
        if adjacency is None:
            table = {EdgeType(t): float(c) for t, c in costs.items()}
            adjacency = {
                node: [(nxt, table[etype]) for nxt, etype in links if etype in table]
                for node, links in self._adjacent.items()
            }
            if len(self._weighted) < 8:
                self._weighted[key] = adjacency
        return adjacency

    # ---- sub-trees ------------------------------------------------------------------------

    def subtree_size(self, node: str) -> int:
        """Entities in the node's sub-tree, itself included.

        The sub-tree follows owns, selects, mounts, env, scales and configures edges from source
        to target, and runs-on edges from a Node to its pods; shared descendants count once.

        Raises:
            KeyError: The node is not in the topology.
        """
        cached = self._subtree.get(node)
        if cached is not None:
            return cached
        if node not in self._nodes:
            raise KeyError(node)
        seen = {node}
        stack = [node]
        while stack:
            for child in self._down[stack.pop()]:
                if child not in seen:
                    seen.add(child)
                    stack.append(child)
        self._subtree[node] = len(seen)
        return len(seen)

    # ---- serialisation --------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: `{"nodes": [{id, kind, name}], "edges": [{source, target, type}]}`."""
        return {
            "nodes": [
                {"id": n, "kind": split_ref(n)[0], "name": split_ref(n)[1]} for n in self._nodes
            ],
            "edges": [
                {"source": e.source, "target": e.target, "type": e.type.value} for e in self._edges
            ],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Topology:
        """Rebuild a topology from `to_dict()` output.

        Raises:
            TopologyError: The data is malformed.
        """
        try:
            nodes = [str(n["id"]) for n in data.get("nodes", [])]
            edges = [
                Edge(str(e["source"]), str(e["target"]), EdgeType(e["type"]))
                for e in data.get("edges", [])
            ]
        except (KeyError, TypeError, ValueError) as exc:
            raise TopologyError(f"malformed topology: {exc}") from exc
        return cls(nodes, edges)


_PATTERNS: dict[str, re.Pattern[str]] = {}


def _compiled(pattern: str) -> re.Pattern[str]:
    regex = _PATTERNS.get(pattern)
    if regex is None:
        regex = re.compile(translate(pattern))
        if len(_PATTERNS) < 4096:
            _PATTERNS[pattern] = regex
    return regex


# ---- building from Kubernetes objects -----------------------------------------------------


def _is_mapping(value: object) -> TypeGuard[Mapping[str, Any]]:
    # Nearly every value is a dict: its exact type is checked before the ABC's far slower check.
    return type(value) is dict or isinstance(value, Mapping)


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if _is_mapping(meta) else {}


def _labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    labels = _meta(obj).get("labels")
    return labels if _is_mapping(labels) else {}


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if _is_mapping(spec) else {}


def _selector_matches(selector: Mapping[str, Any], labels: Mapping[str, Any]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def _label_selector(selector: Any) -> Mapping[str, Any] | None:
    """The matchLabels of a LabelSelector (None when it uses expressions we cannot evaluate)."""
    if not _is_mapping(selector):
        return None
    if selector.get("matchExpressions"):
        return None
    labels = selector.get("matchLabels")
    return labels if _is_mapping(labels) else {}


def _config_refs(pod_spec: Mapping[str, Any]) -> list[tuple[str, str, EdgeType]]:
    """(kind, name, edge type) of every ConfigMap and Secret a pod spec mounts or reads."""
    refs: list[tuple[str, str, EdgeType]] = []
    for vol in pod_spec.get("volumes") or []:
        if not _is_mapping(vol):
            continue
        sources: list[Mapping[str, Any]] = [vol]
        projected = vol.get("projected")
        if _is_mapping(projected):
            sources += [s for s in projected.get("sources") or [] if _is_mapping(s)]
        for src in sources:
            cm = src.get("configMap")
            if _is_mapping(cm) and cm.get("name"):
                refs.append(("ConfigMap", str(cm["name"]), EdgeType.MOUNTS))
            secret = src.get("secret")
            if _is_mapping(secret):
                name = secret.get("secretName") or secret.get("name")
                if name:
                    refs.append(("Secret", str(name), EdgeType.MOUNTS))
    containers = [
        *(pod_spec.get("initContainers") or []),
        *(pod_spec.get("containers") or []),
    ]
    for container in containers:
        if not _is_mapping(container):
            continue
        for env in container.get("env") or []:
            value_from = env.get("valueFrom") if _is_mapping(env) else None
            if not _is_mapping(value_from):
                continue
            for key, kind in (("configMapKeyRef", "ConfigMap"), ("secretKeyRef", "Secret")):
                ref = value_from.get(key)
                if _is_mapping(ref) and ref.get("name"):
                    refs.append((kind, str(ref["name"]), EdgeType.ENV))
        for env_from in container.get("envFrom") or []:
            if not _is_mapping(env_from):
                continue
            for key, kind in (("configMapRef", "ConfigMap"), ("secretRef", "Secret")):
                ref = env_from.get(key)
                if _is_mapping(ref) and ref.get("name"):
                    refs.append((kind, str(ref["name"]), EdgeType.ENV))
    return refs


def build_topology(
    objects: Sequence[Mapping[str, Any]], calls: Sequence[tuple[str, str]]
) -> Topology:
    """Build the topology of an application from its Kubernetes objects and call graph.

    Works on the simulator's objects and on objects read from a live cluster alike: only
    `kind`, `metadata` (name, labels, ownerReferences) and the spec fields below are read.

    Edges: owns (ownerReferences, e.g. Deployment -> ReplicaSet -> Pod); selects (Service ->
    Pods by `spec.selector`, NetworkPolicy -> Pods by `spec.podSelector`; a Service that selects
    no Pod selects the workloads whose pod template matches instead); runs-on (Pod -> Node by
    `spec.nodeName`); mounts and env (ConfigMap/Secret -> Pod or workload); scales
    (HorizontalPodAutoscaler -> `spec.scaleTargetRef`); calls (Service -> Service); configures
    (Flag -> each `Kind/name` in the Flag object's `spec.targets`).

    Args:
        objects: Kubernetes-shaped dicts; objects without kind or name are skipped.
        calls: (caller, callee) service names.

    Returns:
        The topology; entities that are only referenced (an owner, a Node, a called service)
        become nodes too.
    """
    nodes: dict[str, None] = {}
    edges: list[Edge] = []

    def node(kind: str, name: str) -> str:
        ref = f"{kind}/{name}"
        nodes.setdefault(ref, None)
        return ref

    named = [
        o for o in objects if isinstance(o.get("kind"), str) and o["kind"] and _meta(o).get("name")
    ]
    for obj in named:
        node(obj["kind"], str(_meta(obj)["name"]))
    pods = [o for o in named if o["kind"] == "Pod"]
    pod_index: dict[tuple[str, str], list[str]] = {}
    for pod in pods:
        for key, value in _labels(pod).items():
            pod_index.setdefault((str(key), str(value)), []).append(f"Pod/{_meta(pod)['name']}")
    all_pods = [f"Pod/{_meta(p)['name']}" for p in pods]

    def select_pods(selector: Mapping[str, Any]) -> list[str]:
        if not selector:
            return all_pods
        groups = [pod_index.get((str(k), str(v)), []) for k, v in selector.items()]
        smallest = min(groups, key=len)
        others = [set(g) for g in groups if g is not smallest]
        return [p for p in smallest if all(p in o for o in others)]

    for obj in named:
        kind, name = obj["kind"], str(_meta(obj)["name"])
        ref = f"{kind}/{name}"
        spec = _spec(obj)
        for owner in _meta(obj).get("ownerReferences") or []:
            if _is_mapping(owner) and owner.get("kind") and owner.get("name"):
                edges.append(Edge(node(owner["kind"], str(owner["name"])), ref, EdgeType.OWNS))
        if kind == "Pod":
            if spec.get("nodeName"):
                edges.append(Edge(ref, node("Node", str(spec["nodeName"])), EdgeType.RUNS_ON))
            for ckind, cname, etype in _config_refs(spec):
                edges.append(Edge(node(ckind, cname), ref, etype))
        elif kind in WORKLOAD_KINDS:
            template = spec.get("template")
            tspec = _spec(template) if _is_mapping(template) else {}
            for ckind, cname, etype in _config_refs(tspec):
                edges.append(Edge(node(ckind, cname), ref, etype))
        elif kind == "Service":
            selector = spec.get("selector")
            if _is_mapping(selector) and selector:
                selected = select_pods(selector)
                if selected:
                    edges.extend(Edge(ref, pod_ref, EdgeType.SELECTS) for pod_ref in selected)
                else:
                    for wl in named:
                        if wl["kind"] not in WORKLOAD_KINDS or wl["kind"] == "ReplicaSet":
                            continue
                        template = _spec(wl).get("template")
                        tlabels = _labels(template) if _is_mapping(template) else {}
                        if _selector_matches(selector, tlabels):
                            wl_ref = f"{wl['kind']}/{_meta(wl)['name']}"
                            edges.append(Edge(ref, wl_ref, EdgeType.SELECTS))
        elif kind == "NetworkPolicy":
            selector = _label_selector(spec.get("podSelector"))
            if selector is not None:
                edges.extend(
                    Edge(ref, pod_ref, EdgeType.SELECTS) for pod_ref in select_pods(selector)
                )
        elif kind == "HorizontalPodAutoscaler":
            target = spec.get("scaleTargetRef")
            if _is_mapping(target) and target.get("kind") and target.get("name"):
                edges.append(
                    Edge(ref, node(str(target["kind"]), str(target["name"])), EdgeType.SCALES)
                )
        elif kind == "Flag":
            for target_ref in spec.get("targets") or []:
                tkind, tname = split_ref(str(target_ref))
                if tkind and tname:
                    edges.append(Edge(ref, node(tkind, tname), EdgeType.CONFIGURES))
    for caller, callee in calls:
        if caller and callee and caller != callee:
            edges.append(Edge(node("Service", caller), node("Service", callee), EdgeType.CALLS))
    return Topology(nodes, edges)
