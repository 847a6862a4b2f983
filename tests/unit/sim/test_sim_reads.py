"""Reads of the twin's objects and events: copies by default, in place when asked, events of
one object, and the copy itself (plain data, any other value through pickle)."""

from __future__ import annotations

import marshal
from datetime import UTC, datetime

from itbench.core.topology import build_topology
from itbench.environments.sim import SimEnvironment
from itbench.environments.sim.objects import clone
from itbench.gateway.kubectl import render_describe
from itbench.gateway.topology import collect_objects, topology_view


def test_objects_are_copies_unless_read_in_place(env: SimEnvironment) -> None:
    copied = env.get_objects("Deployment", "cart")[0]
    copied["spec"]["replicas"] = 99
    assert env.get_objects("Deployment", "cart")[0]["spec"]["replicas"] != 99

    in_place = env.get_objects("Deployment", "cart", copy=False)[0]
    assert in_place is env.cluster.get("Deployment", "cart")
    everything = env.get_objects("Pod", copy=False)
    assert [p["metadata"]["name"] for p in everything] == [
        p["metadata"]["name"] for p in env.get_objects("Pod")
    ]
    assert all(a is b for a, b in zip(everything, env.cluster.of_kind("Pod"), strict=True))


def test_events_of_one_object_are_those_whose_involved_object_it_is(env: SimEnvironment) -> None:
    every = env.events()
    pod = next(e["involvedObject"]["name"] for e in every if e["involvedObject"]["kind"] == "Pod")
    mine = env.events("Pod", pod)
    assert mine
    assert mine == [
        e
        for e in every
        if e["involvedObject"]["kind"] == "Pod" and e["involvedObject"]["name"] == pod
    ]
    assert env.events("Pod", "no-such-pod") == []
    mine[0]["message"] = "changed by the reader"
    assert env.events("Pod", pod)[0]["message"] != "changed by the reader"


def test_clone_copies_plain_data_deeply_and_anything_else_through_pickle() -> None:
    plain = {"a": [1, 2.5, {"b": None, "c": True}], "d": ("x", "y"), "e": b"bytes"}
    copied = clone(plain)
    assert copied == plain
    assert copied["a"][2] is not plain["a"][2]
    assert copied["a"][2]["c"] is True and copied["d"] == ("x", "y")
    when = datetime(2026, 1, 1, tzinfo=UTC)
    odd = {"at": when, "items": [when]}
    assert clone(odd) == odd


def test_describe_text_follows_every_change_of_the_object(env: SimEnvironment) -> None:
    deployment = env.get_objects("Deployment", "cart")[0]
    first = render_describe(deployment, [])
    assert render_describe(clone(deployment), []) == first
    deployment["spec"]["replicas"] = 7
    changed = render_describe(deployment, [])
    assert changed != first
    assert "replicas: 7" in changed
    deployment["spec"]["replicas"] = 1
    assert "replicas: 1" in render_describe(deployment, [])


def test_the_topology_view_reads_objects_in_place_and_changes_none(env: SimEnvironment) -> None:
    before = marshal.dumps(env.cluster.objects)
    view = topology_view(env)
    assert marshal.dumps(env.cluster.objects) == before
    copied = build_topology(collect_objects(env, copy=True), env.service_calls())
    assert [n["id"] for n in view.nodes] == list(copied.nodes)
    assert len(view.edges) == len(copied.edges) > 0
