"""NTAM properties (hypothesis) and worked cases on a small shop topology."""

from __future__ import annotations

import math

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from itbench.core.models.scenario import EntityKind, GroundTruth, GroundTruthEntity, PropagationEdge
from itbench.core.scoring.ntam import (
    chain_entities,
    chain_importance,
    discriminativeness,
    fl_ntam,
    fpc_ntam,
    ntam,
)
from itbench.core.scoring.profile import DEFAULT_PROFILE
from itbench.core.topology import Edge, EdgeType, Topology

KINDS = [
    EntityKind.DEPLOYMENT,
    EntityKind.POD,
    EntityKind.SERVICE,
    EntityKind.NODE,
    EntityKind.CONFIG_MAP,
]
EDGE_TYPES = list(EdgeType)


@st.composite
def topologies(draw: st.DrawFn) -> Topology:
    """A random connected topology of 4..30 entities with random typed edges."""
    n = draw(st.integers(min_value=4, max_value=30))
    kinds = draw(st.lists(st.sampled_from(KINDS), min_size=n, max_size=n))
    nodes = [f"{k.value}/e{i}" for i, k in enumerate(kinds)]
    edges: list[Edge] = []
    for i in range(1, n):
        j = draw(st.integers(min_value=0, max_value=i - 1))
        etype = draw(st.sampled_from(EDGE_TYPES))
        a, b = (nodes[j], nodes[i]) if draw(st.booleans()) else (nodes[i], nodes[j])
        edges.append(Edge(a, b, etype))
    extra = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=n))
    for a, b in extra:
        if a != b:
            edges.append(Edge(nodes[a], nodes[b], draw(st.sampled_from(EDGE_TYPES))))
    return Topology(nodes, edges)


def entity(ref: str, *, root: bool = False, eid: str | None = None) -> GroundTruthEntity:
    kind, name = ref.split("/", 1)
    return GroundTruthEntity(id=eid or name, kind=EntityKind(kind), name=name, root_cause=root)


@st.composite
def cases(draw: st.DrawFn) -> tuple[Topology, GroundTruth, list[str]]:
    """A topology, a chain ground truth on it, and a random prediction."""
    topo = draw(topologies())
    nodes = topo.nodes
    chain = draw(st.lists(st.sampled_from(nodes), min_size=1, max_size=4, unique=True))
    entities = [entity(ref, root=i == 0) for i, ref in enumerate(chain)]
    edges = [
        PropagationEdge(source=entities[i].id, target=entities[i + 1].id)
        for i in range(len(entities) - 1)
    ]
    truth = GroundTruth(entities=entities, propagation=edges)
    predicted = draw(
        st.lists(st.sampled_from([*nodes, "Pod/not-in-topology"]), max_size=8, unique=True)
    )
    return topo, truth, predicted


def refs(truth: GroundTruth) -> list[str]:
    return [f"{e.kind.value}/{e.name}" for e in truth.entities]


@settings(max_examples=200, deadline=None)
@given(cases())
def test_ntam_is_between_zero_and_one(case: tuple[Topology, GroundTruth, list[str]]) -> None:
    topo, truth, predicted = case
    for score in (
        fl_ntam(predicted, truth, topo, DEFAULT_PROFILE),
        fpc_ntam(predicted, truth, topo, DEFAULT_PROFILE),
    ):
        assert 0.0 <= score <= 1.0


@settings(max_examples=200, deadline=None)
@given(cases())
def test_ntam_is_one_exactly_for_the_perfect_prediction_only(
    case: tuple[Topology, GroundTruth, list[str]],
) -> None:
    topo, truth, predicted = case
    assert fpc_ntam(refs(truth), truth, topo, DEFAULT_PROFILE) == 1.0
    assert fl_ntam(refs(truth)[:1], truth, topo, DEFAULT_PROFILE) == 1.0
    if set(predicted) != set(refs(truth)):
        assert fpc_ntam(predicted, truth, topo, DEFAULT_PROFILE) < 1.0
    if set(predicted) != set(refs(truth)[:1]):
        assert fl_ntam(predicted, truth, topo, DEFAULT_PROFILE) < 1.0


@settings(max_examples=100, deadline=None)
@given(cases())
def test_empty_prediction_scores_zero(case: tuple[Topology, GroundTruth, list[str]]) -> None:
    topo, truth, _ = case
    assert fl_ntam([], truth, topo, DEFAULT_PROFILE) == 0.0
    assert fpc_ntam([], truth, topo, DEFAULT_PROFILE) == 0.0


@settings(max_examples=300, deadline=None)
@given(topologies(), st.data())
def test_adjacent_to_root_cause_beats_three_hops_away(topo: Topology, data: st.DataObject) -> None:
    root = data.draw(st.sampled_from(topo.nodes))
    near = [n for n in topo.nodes if topo.hops(root, n) == 1]
    far = [n for n in topo.nodes if topo.hops(root, n) == 3]
    assume(near and far)
    truth = GroundTruth(entities=[entity(root, root=True)])
    a = fl_ntam([data.draw(st.sampled_from(near))], truth, topo, DEFAULT_PROFILE)
    b = fl_ntam([data.draw(st.sampled_from(far))], truth, topo, DEFAULT_PROFILE)
    assert a > b


@settings(max_examples=200, deadline=None)
@given(cases())
def test_hitting_the_root_cause_beats_hitting_only_a_downstream_entity(
    case: tuple[Topology, GroundTruth, list[str]],
) -> None:
    topo, truth, _ = case
    chain = refs(truth)
    assume(len(chain) >= 2)
    root_score = fpc_ntam([chain[0]], truth, topo, DEFAULT_PROFILE)
    for downstream in chain[1:]:
        assert root_score > fpc_ntam([downstream], truth, topo, DEFAULT_PROFILE)


@settings(max_examples=200, deadline=None)
@given(cases(), st.integers(min_value=1, max_value=5))
def test_padding_with_unrelated_entities_lowers_the_score(
    case: tuple[Topology, GroundTruth, list[str]], pads: int
) -> None:
    topo, truth, predicted = case
    unrelated = [f"ConfigMap/unrelated-{i}" for i in range(pads)]
    padded_topo = Topology([*topo.nodes, *unrelated], topo.edges)
    for base in (refs(truth), predicted):
        before = fpc_ntam(base, truth, padded_topo, DEFAULT_PROFILE)
        after = fpc_ntam([*base, *unrelated], truth, padded_topo, DEFAULT_PROFILE)
        if before > 0:
            assert after < before
        else:
            assert after == 0.0
    perfect_fl = fl_ntam(refs(truth)[:1], truth, padded_topo, DEFAULT_PROFILE)
    assert fl_ntam([refs(truth)[0], *unrelated], truth, padded_topo, DEFAULT_PROFILE) < perfect_fl


@settings(max_examples=100, deadline=None)
@given(cases(), st.randoms(use_true_random=False))
def test_ntam_is_deterministic_and_order_free(
    case: tuple[Topology, GroundTruth, list[str]], rnd: object
) -> None:
    topo, truth, predicted = case
    first = fpc_ntam(predicted, truth, topo, DEFAULT_PROFILE)
    shuffled = list(predicted)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    assert fpc_ntam(shuffled, truth, topo, DEFAULT_PROFILE) == first
    assert fpc_ntam(predicted + predicted, truth, topo, DEFAULT_PROFILE) == first


# ---- worked cases -------------------------------------------------------------------------


def shop() -> Topology:
    nodes = [
        "Deployment/cart",
        "ReplicaSet/cart-1",
        "Pod/cart-1-a",
        "Service/cart",
        "Service/checkout",
        "Service/frontend",
        "Node/node-1",
    ]
    edges = [
        Edge("Deployment/cart", "ReplicaSet/cart-1", EdgeType.OWNS),
        Edge("ReplicaSet/cart-1", "Pod/cart-1-a", EdgeType.OWNS),
        Edge("Service/cart", "Pod/cart-1-a", EdgeType.SELECTS),
        Edge("Pod/cart-1-a", "Node/node-1", EdgeType.RUNS_ON),
        Edge("Service/checkout", "Service/cart", EdgeType.CALLS),
        Edge("Service/frontend", "Service/checkout", EdgeType.CALLS),
    ]
    return Topology(nodes, edges)


def test_an_alias_counts_as_naming_the_entity() -> None:
    truth = GroundTruth(
        entities=[
            GroundTruthEntity(
                id="cart",
                kind=EntityKind.DEPLOYMENT,
                name="cart",
                aliases=["Service/cart", "Pod/cart-*"],
                root_cause=True,
            )
        ]
    )
    for ref in ("Deployment/cart", "Service/cart", "Pod/cart-1-a"):
        assert fl_ntam([ref], truth, shop(), DEFAULT_PROFILE) == 1.0


def test_worked_example_one_owns_hop_from_the_root_cause() -> None:
    topo = shop()
    truth = GroundTruth(entities=[entity("Deployment/cart", root=True)])
    score = fl_ntam(["ReplicaSet/cart-1"], truth, topo, DEFAULT_PROFILE)
    # distance 1.0 (owns); sub-tree of the ReplicaSet = 2 of 7 entities.
    disc = 0.7 + 0.3 * math.log(7 / 2) / math.log(7)
    sim = 0.5**1.0 * disc
    assert discriminativeness("ReplicaSet/cart-1", topo, DEFAULT_PROFILE) == disc
    assert score == sim  # sqrt(sim * sim) with no length penalty
    assert round(score, 4) == 0.4466


def test_entities_beyond_the_maximum_distance_score_zero() -> None:
    topo = shop()
    truth = GroundTruth(entities=[entity("Deployment/cart", root=True)])
    # Deployment -> RS -> Pod -> Service/cart -> checkout -> frontend: 1+1+1+1.5+1.5 = 6 > 4.5
    assert fl_ntam(["Service/frontend"], truth, topo, DEFAULT_PROFILE) == 0.0


def test_chain_importance_halves_per_step_from_the_root() -> None:
    truth = GroundTruth(
        entities=[
            entity("Service/cart", root=True, eid="a"),
            entity("Service/checkout", eid="b"),
            entity("Service/frontend", eid="c"),
            entity("Node/node-1", eid="d"),
        ],
        propagation=[
            PropagationEdge(source="a", target="b"),
            PropagationEdge(source="b", target="c"),
        ],
    )
    assert chain_importance(truth, DEFAULT_PROFILE) == {"a": 1.0, "b": 0.5, "c": 0.25, "d": 0.125}
    assert [e.id for e in chain_entities(truth)] == ["a", "b", "c"]


def test_empty_truth_accepts_only_an_empty_prediction() -> None:
    assert ntam([], [], {}, shop(), DEFAULT_PROFILE) == 1.0
    assert ntam(["Service/cart"], [], {}, shop(), DEFAULT_PROFILE) == 0.0


def test_over_prediction_penalty_matches_the_formula() -> None:
    truth = GroundTruth(entities=[entity("Service/cart", root=True)])
    score = fl_ntam(["Service/cart", "Service/other"], truth, shop(), DEFAULT_PROFILE)
    # R = 1, P = 1/2, L = 1 / (1 + 0.5 * 1 / 1)
    assert score == pytest.approx(math.sqrt(0.5) / 1.5, abs=1e-12)


def test_the_worked_example_of_docs_metrics_md() -> None:
    e = EdgeType
    topo = Topology(
        [
            "Deployment/cart",
            "ReplicaSet/cart-1",
            "Pod/cart-1-a",
            "Service/cart",
            "Node/node-1",
            "Flag/cartFailure",
            "Service/checkout",
            "Service/frontend",
            "Service/ad",
        ],
        [
            Edge("Deployment/cart", "ReplicaSet/cart-1", e.OWNS),
            Edge("ReplicaSet/cart-1", "Pod/cart-1-a", e.OWNS),
            Edge("Service/cart", "Pod/cart-1-a", e.SELECTS),
            Edge("Pod/cart-1-a", "Node/node-1", e.RUNS_ON),
            Edge("Flag/cartFailure", "Deployment/cart", e.CONFIGURES),
            Edge("Service/checkout", "Service/cart", e.CALLS),
            Edge("Service/frontend", "Service/checkout", e.CALLS),
            Edge("Service/frontend", "Service/ad", e.CALLS),
        ],
    )

    def ent(name: str, extra: list[str], root: bool = False) -> GroundTruthEntity:
        aliases = [f"Service/{name}", f"Pod/{name}-*", f"ReplicaSet/{name}-*", *extra]
        return GroundTruthEntity(
            id=name, kind=EntityKind.DEPLOYMENT, name=name, aliases=aliases, root_cause=root
        )

    truth = GroundTruth(
        entities=[
            ent("cart", ["Flag/cartFailure"], True),
            ent("checkout", []),
            ent("frontend", []),
        ],
        propagation=[
            PropagationEdge(source="cart", target="checkout"),
            PropagationEdge(source="checkout", target="frontend"),
        ],
    )
    predicted = ["Node/node-1", "Service/checkout", "Service/frontend", "Service/ad"]
    assert round(fl_ntam(["Node/node-1"], truth, topo, DEFAULT_PROFILE), 4) == 0.3201
    assert round(fpc_ntam(predicted, truth, topo, DEFAULT_PROFILE), 4) == 0.5105
    perfect = ["Service/cart", "Service/checkout", "Service/frontend"]
    assert fpc_ntam(perfect, truth, topo, DEFAULT_PROFILE) == 1.0
    assert fl_ntam(["Pod/cart-1-a"], truth, topo, DEFAULT_PROFILE) == 1.0
