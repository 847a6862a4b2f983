"""Entity matching: whether a predicted `Kind/name` names a ground-truth entity, via its aliases.

Kinds compare exactly (case-sensitive); names compare exactly or by shell-style pattern
(`fnmatch`, case-sensitive), so `Pod/cart-*` accepts any pod of the cart Deployment.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from itbench.core.models.scenario import GroundTruthEntity
from itbench.core.topology import Topology, split_ref


def truth_refs(truth: GroundTruthEntity) -> list[str]:
    """Every `Kind/name` (or pattern) that identifies a ground-truth entity, its own first."""
    return [f"{truth.kind.value}/{truth.name}", *truth.aliases]


def entity_matches(predicted_ref: str, truth: GroundTruthEntity) -> bool:
    """Whether a predicted entity names the ground-truth entity through any of its aliases.

    Args:
        predicted_ref: The predicted entity, `Kind/name`.
        truth: The ground-truth entity.

    Returns:
        True when the kind equals an alias's kind and the name equals its name or matches its
        pattern.
    """
    kind, name = split_ref(predicted_ref)
    if not kind or not name:
        return False
    for ref in truth_refs(truth):
        alias_kind, pattern = split_ref(ref)
        if alias_kind == kind and (pattern == name or fnmatchcase(name, pattern)):
            return True
    return False


def matching_nodes(truth: GroundTruthEntity, topology: Topology) -> list[str]:
    """The topology entities a ground-truth entity stands for (its own node and every alias).

    Args:
        truth: The ground-truth entity.
        topology: The system topology.

    Returns:
        Entity ids in the topology, without duplicates, in alias order.
    """
    found: dict[str, None] = {}
    for ref in truth_refs(truth):
        kind, pattern = split_ref(ref)
        if kind and pattern:
            for node in topology.match(kind, pattern):
                found.setdefault(node, None)
    return list(found)
