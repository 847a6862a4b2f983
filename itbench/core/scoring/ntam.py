"""NTAM, the normalised topology-aware match of predicted entities against the ground truth.

Three components (paper, Appendix C.6.3): a topology similarity that decays with the typed
distance and favours small, discriminative sub-trees; an importance weight by position in the
propagation chain; penalties for predicting too many or too few entities. See docs/metrics.md.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence

from itbench.core.matching import entity_matches, matching_nodes
from itbench.core.models.scenario import GroundTruth, GroundTruthEntity
from itbench.core.scoring.profile import EvaluationProfile
from itbench.core.topology import Topology


def discriminativeness(node: str, topology: Topology, profile: EvaluationProfile) -> float:
    """How discriminative naming an entity is, in [1 - kappa, 1] (kappa = the profile weight).

    BM25-like: `(1 - kappa) + kappa * ln(N / size) / ln(N)` with N the topology size and size
    the entity's sub-tree size, so a leaf scores 1 and the root of everything scores 1 - kappa.
    """
    total = len(topology)
    if total <= 1 or node not in topology:
        return 1.0
    size = topology.subtree_size(node)
    idf = math.log(total / size) / math.log(total)
    kappa = profile.discriminativeness_weight
    return (1.0 - kappa) + kappa * min(max(idf, 0.0), 1.0)


def chain_importance(truth: GroundTruth, profile: EvaluationProfile) -> dict[str, float]:
    """Importance weight of each ground-truth entity: `decay ** depth` in the propagation chain.

    Depth is the number of propagation edges from the nearest root cause (roots have depth 0);
    entities the chain does not reach get one more than the deepest reached entity.
    """
    depth: dict[str, int] = {}
    queue: deque[str] = deque()
    for entity in truth.entities:
        if entity.root_cause:
            depth[entity.id] = 0
            queue.append(entity.id)
    children: dict[str, list[str]] = {}
    for edge in truth.propagation:
        children.setdefault(edge.source, []).append(edge.target)
    while queue:
        current = queue.popleft()
        for child in children.get(current, []):
            if child not in depth:
                depth[child] = depth[current] + 1
                queue.append(child)
    unreached = max(depth.values(), default=-1) + 1
    return {e.id: profile.importance_decay ** depth.get(e.id, unreached) for e in truth.entities}


def chain_entities(truth: GroundTruth) -> list[GroundTruthEntity]:
    """The entities FPC-NTAM scores: root causes and every entity on a propagation edge.

    Without propagation edges, every ground-truth entity.
    """
    if not truth.propagation:
        return list(truth.entities)
    on_chain = {e.source for e in truth.propagation} | {e.target for e in truth.propagation}
    return [e for e in truth.entities if e.root_cause or e.id in on_chain]


def similarity(
    predicted: str,
    truth: GroundTruthEntity,
    distances: Mapping[str, float],
    topology: Topology,
    profile: EvaluationProfile,
) -> float:
    """Similarity of one predicted entity to one ground-truth entity, in [0, 1].

    1 when the prediction names the entity (through any alias); otherwise
    `decay ** distance * discriminativeness` within the profile's maximum distance, else 0.

    Args:
        predicted: The predicted `Kind/name`.
        truth: The ground-truth entity.
        distances: Typed distances from the truth entity's nodes (see `Topology.distances`).
        topology: The system topology.
        profile: The evaluation profile.
    """
    if entity_matches(predicted, truth):
        return 1.0
    d = distances.get(predicted)
    if d is None or d <= 0 or d > profile.max_distance:
        return 0.0
    return float(profile.distance_decay**d) * discriminativeness(predicted, topology, profile)


def ntam(
    predicted: Iterable[str],
    truth: Sequence[GroundTruthEntity],
    weights: Mapping[str, float],
    topology: Topology,
    profile: EvaluationProfile,
) -> float:
    """Normalised topology-aware match of a predicted entity set, in [0, 1].

    Predicted and truth entities are paired one-to-one, greedily by weighted similarity
    (ties broken by truth id, then predicted name). With s the similarity of each pair:

        R = sum(w_g * s_g) / sum(w_g)          (importance-weighted recall)
        P = sum(s) / |predicted|               (precision)
        L = 1 / (1 + a * surplus / |truth|) / (1 + b * missing / |truth|)
        NTAM = sqrt(R * P) * L

    Args:
        predicted: Predicted entities, `Kind/name` (duplicates count once).
        truth: Ground-truth entities to match.
        weights: Importance per truth entity id (missing ids weigh 1).
        topology: The system topology.
        profile: The evaluation profile.

    Returns:
        1.0 exactly when every prediction names a distinct truth entity and every truth entity
        is named; 0.0 for an empty prediction (or any prediction when the truth is empty and
        something was predicted); 1.0 when both are empty.
    """
    preds = sorted(set(predicted))
    if not truth:
        return 1.0 if not preds else 0.0
    if not preds:
        return 0.0
    candidates: list[tuple[float, str, str, float]] = []
    for g in truth:
        sources = matching_nodes(g, topology)
        distances = (
            topology.distances(
                sources,
                profile.edge_costs,
                cutoff=profile.max_distance,
                targets=[p for p in preds if p in topology],
            )
            if sources
            else {}
        )
        w = weights.get(g.id, 1.0)
        for p in preds:
            s = similarity(p, g, distances, topology, profile)
            if s > 0:
                candidates.append((-w * s, g.id, p, s))
    candidates.sort()
    matched_truth: dict[str, float] = {}
    matched_pred: set[str] = set()
    for _, gid, p, s in candidates:
        if gid in matched_truth or p in matched_pred:
            continue
        matched_truth[gid] = s
        matched_pred.add(p)
    total_weight = 0.0
    hit_weight = 0.0
    for g in truth:
        w = weights.get(g.id, 1.0)
        total_weight += w
        hit_weight += w * matched_truth.get(g.id, 0.0)
    recall = hit_weight / total_weight if total_weight > 0 else 0.0
    precision = sum(matched_truth[g.id] for g in truth if g.id in matched_truth) / len(preds)
    surplus = max(0, len(preds) - len(truth))
    missing = max(0, len(truth) - len(preds))
    length = 1.0 / (1.0 + profile.over_prediction_penalty * surplus / len(truth))
    length /= 1.0 + profile.under_prediction_penalty * missing / len(truth)
    score = math.sqrt(recall * precision) * length
    return min(max(score, 0.0), 1.0)


def fl_ntam(
    predicted_root_causes: Iterable[str],
    truth: GroundTruth,
    topology: Topology,
    profile: EvaluationProfile,
) -> float:
    """Fault-localization NTAM: predicted root causes against the ground-truth root causes."""
    return ntam(predicted_root_causes, truth.root_causes(), {}, topology, profile)


def fpc_ntam(
    predicted: Iterable[str],
    truth: GroundTruth,
    topology: Topology,
    profile: EvaluationProfile,
) -> float:
    """Fault-propagation-chain NTAM: every predicted entity against the whole chain."""
    return ntam(
        predicted, chain_entities(truth), chain_importance(truth, profile), topology, profile
    )
