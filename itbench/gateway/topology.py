"""The topology endpoint's view: the environment's objects and service calls as a typed graph."""

from __future__ import annotations

from typing import Any

from itbench.core.runner.context import TOPOLOGY_KINDS
from itbench.core.topology import build_topology, split_ref
from itbench.environments.port import Environment
from itbench.gateway.schemas import TopologyView


def collect_objects(env: Environment, *, copy: bool = True) -> list[dict[str, Any]]:
    """Every object of the topology kinds the environment serves, with `kind` filled in (the
    environment's own objects with `copy=False`: read them before the next call into it)."""
    objects: list[dict[str, Any]] = []
    for kind in TOPOLOGY_KINDS:
        try:
            found = env.get_objects(kind, copy=copy)
        except (KeyError, ValueError):
            continue  # a kind this environment does not serve
        for obj in found:
            objects.append(obj if obj.get("kind") else {**obj, "kind": kind})
    return objects


def topology_view(env: Environment) -> TopologyView:
    """The topology (`itbench.core.topology.build_topology`) of an environment, as JSON.

    The graph is built from the environment's objects in place (it only reads them, and keeps
    none), so call it where nothing else calls into the environment meanwhile (a session's
    lock)."""
    topology = build_topology(collect_objects(env, copy=False), env.service_calls())
    nodes = []
    for ref in topology.nodes:
        kind, name = split_ref(ref)
        nodes.append({"id": ref, "kind": kind, "name": name})
    edges = [{"source": e.source, "target": e.target, "type": e.type.value} for e in topology.edges]
    return TopologyView(nodes=nodes, edges=edges)
