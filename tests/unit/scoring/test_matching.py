"""Entity matching through aliases and name patterns."""

from __future__ import annotations

from itbench.core.matching import entity_matches, matching_nodes
from itbench.core.models.scenario import EntityKind, GroundTruthEntity
from itbench.core.topology import Topology

CART = GroundTruthEntity(
    id="cart",
    kind=EntityKind.DEPLOYMENT,
    name="cart",
    aliases=["Service/cart", "Pod/cart-*", "Flag/cartFailure"],
    root_cause=True,
)


def test_own_name_and_every_alias_match() -> None:
    for ref in ("Deployment/cart", "Service/cart", "Pod/cart-7d9f-abcde", "Flag/cartFailure"):
        assert entity_matches(ref, CART), ref


def test_kind_is_case_sensitive_and_must_agree() -> None:
    assert not entity_matches("deployment/cart", CART)
    assert not entity_matches("StatefulSet/cart", CART)
    assert not entity_matches("Service/cart-7d9f", CART)


def test_names_compare_exactly_unless_the_alias_is_a_pattern() -> None:
    assert not entity_matches("Deployment/cart2", CART)
    assert not entity_matches("Deployment/Cart", CART)
    assert not entity_matches("Pod/checkout-1", CART)
    assert not entity_matches("Flag/cartfailure", CART)


def test_malformed_references_never_match() -> None:
    assert not entity_matches("cart", CART)
    assert not entity_matches("Deployment/", CART)


def test_matching_nodes_resolves_aliases_in_a_topology() -> None:
    topo = Topology(
        ["Deployment/cart", "Pod/cart-1", "Pod/cart-2", "Pod/checkout-1", "Service/cart"], []
    )
    assert matching_nodes(CART, topo) == [
        "Deployment/cart",
        "Service/cart",
        "Pod/cart-1",
        "Pod/cart-2",
    ]
