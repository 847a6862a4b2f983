"""Diagnosis scoring: fault-localization pass, FL-NTAM and FPC-NTAM of a diagnosis report.

Under a whole-environment profile (`default@3` on) the report is graded against the specific
cause: the fault injector's own objects are not part of the truth an agent is graded on (it can
never see them); an alias every flag scenario shares (the flag ConfigMap) and a workload that only
locates a more specific cause (the service that evaluates a flag, the Deployment behind a broken
Service) are neutral: naming them is not wrong, but never enough. Decoys, the trial's benign
changes, are ordinary wrong answers, and reported as such.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from itbench.core.matching import entity_matches
from itbench.core.models.agent_io import DiagnosisReport, PredictedEntity
from itbench.core.models.scenario import (
    INJECTOR_KINDS,
    EntityKind,
    FaultCategory,
    GroundTruth,
    GroundTruthEntity,
)
from itbench.core.models.trial import DiagnosisScores
from itbench.core.scoring.ntam import fl_ntam, fpc_ntam
from itbench.core.scoring.profile import EvaluationProfile
from itbench.core.topology import Topology

WORKLOAD_KINDS = frozenset({"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Pod"})


@dataclass(frozen=True)
class GradedTruth:
    """The ground truth as a diagnosis is graded against it.

    Attributes:
        truth: The truth with the graded root causes (others demoted to involved entities), each
            root with the category the oracle reports.
        neutral: Entities naming which as a root cause is neither right nor wrong on its own.
        shared_aliases: Aliases that are neutral wherever they appear.
        categories: The fault categories a root cause may be named with (empty: any).
    """

    truth: GroundTruth
    neutral: tuple[GroundTruthEntity, ...]
    shared_aliases: frozenset[str]
    categories: frozenset[FaultCategory] = frozenset()

    def accepts(self, entity: GroundTruthEntity, category: FaultCategory | None) -> bool:
        """Whether naming the entity with this category is right (always without categories)."""
        if not self.categories:
            return True
        return category is not None and (
            category == entity.category if entity.category else category in self.categories
        )


def graded_truth(
    truth: GroundTruth,
    profile: EvaluationProfile,
    categories: Sequence[FaultCategory] = (),
) -> GradedTruth:
    """The truth a diagnosis is graded against under a profile (unchanged before `default@3`).

    Args:
        truth: The scenario's ground truth.
        profile: The evaluation profile.
        categories: The categories of the scenario's faults, in order.
    """
    if not profile.whole_environment:
        return GradedTruth(truth=truth, neutral=(), shared_aliases=frozenset())
    shared = frozenset(profile.shared_aliases)
    observable = [e for e in truth.entities if e.kind.value not in INJECTOR_KINDS]
    ids = {e.id for e in observable}
    edges = [e for e in truth.propagation if e.source in ids and e.target in ids]
    specific = {e.id for e in observable if e.root_cause and e.kind.value in profile.specific_kinds}
    accepted = frozenset(categories) if profile.require_category else frozenset()
    entities: list[GroundTruthEntity] = []
    neutral: list[GroundTruthEntity] = []
    for e in observable:
        e = e.model_copy(update={"aliases": [a for a in e.aliases if a not in shared]})
        if specific and e.root_cause and e.id not in specific and e.kind.value in WORKLOAD_KINDS:
            neutral.append(e)
            e = e.model_copy(update={"root_cause": False})
        if e.root_cause and e.category is None and categories:
            e = e.model_copy(
                update={"category": categories[0] if len(set(categories)) == 1 else None}
            )
        entities.append(e)
    graded = truth.model_copy(update={"entities": entities, "propagation": edges})
    return GradedTruth(
        truth=graded, neutral=tuple(neutral), shared_aliases=shared, categories=accepted
    )


def predicted_root_causes(report: DiagnosisReport) -> list[str]:
    """The entities the report flags as root causes, `Kind/name`, without duplicates."""
    return sorted({e.ref() for e in report.entities if e.root_cause})


def predicted_entities(report: DiagnosisReport) -> list[str]:
    """Every entity the report names: its entities and both ends of each propagation edge."""
    refs = {e.ref() for e in report.entities}
    for edge in report.propagation_chain:
        refs.update((edge.source, edge.target))
    return sorted(refs)


def localization(
    root_causes: Sequence[PredictedEntity],
    graded: GradedTruth,
    decoys: Iterable[str] = (),
) -> tuple[bool, str]:
    """Whether the predicted root causes localise the fault, and why.

    Passes when at least one predicted root cause names a graded root cause (with an accepted
    category, where categories are required) and every other one names a graded root cause or a
    neutral entity (naming many entities to be sure does not pass); one entity named with two
    categories is a guess, not a diagnosis. With no graded root cause (a no-fault control), it
    passes only when no root cause is predicted.
    """
    roots = graded.truth.root_causes()
    decoy_refs = set(decoys)
    refs = sorted({p.ref() for p in root_causes})
    if not roots:
        if refs:
            return False, f"NoFault: the report names root causes: {', '.join(refs)}"
        return True, "NoFault: no root cause named"
    if not refs:
        return False, "NoRootCause: the report names no root cause"
    named: dict[str, set[FaultCategory | None]] = {}
    for p in root_causes:
        named.setdefault(p.ref(), set()).add(p.category)
    guessed = sorted(r for r, cats in named.items() if len(cats) > 1)
    if guessed:
        return False, f"AmbiguousCategory: {', '.join(guessed)} named with several categories"
    hit = False
    miscategorised: list[str] = []
    wrong: list[str] = []
    for ref, cats in sorted(named.items()):
        (category,) = cats
        matches = [g for g in roots if entity_matches(ref, g)]
        if matches:
            if any(graded.accepts(g, category) for g in matches):
                hit = True
            else:
                miscategorised.append(f"{ref} ({category.value if category else 'no category'})")
        elif ref in graded.shared_aliases or any(entity_matches(ref, n) for n in graded.neutral):
            continue
        else:
            wrong.append(ref + (" (a benign change)" if ref in decoy_refs else ""))
    if wrong:
        return False, f"WrongRootCause: {', '.join(wrong)} is not a root cause"
    if not hit and miscategorised:
        return False, (
            f"WrongCategory: {', '.join(miscategorised)}: the place is right, what is wrong there "
            "is not"
        )
    if not hit:
        return False, (
            "NotSpecific: the named root causes only locate the fault; name the specific cause"
        )
    return True, "Localized: the root cause is named"


def localization_passed(root_causes: list[str], truth: GroundTruth) -> bool:
    """Whether the predicted root causes (`Kind/name`) localise the fault, under the plain
    truth."""
    graded = GradedTruth(truth=truth, neutral=(), shared_aliases=frozenset())
    predicted = []
    for ref in root_causes:
        kind, _, name = ref.partition("/")
        try:
            predicted.append(PredictedEntity(kind=EntityKind(kind), name=name, root_cause=True))
        except ValueError:
            return False
    return localization(predicted, graded)[0]


def _decoys_named(root_causes: list[str], decoys: Iterable[str]) -> list[str]:
    refs = list(decoys)
    out = []
    for p in root_causes:
        kind, _, name = p.partition("/")
        for ref in refs:
            d_kind, _, d_name = ref.partition("/")
            same = p == ref
            owned = (
                d_kind == "Deployment"
                and kind in ("Pod", "ReplicaSet", "Service")
                and (name == d_name or name.startswith(f"{d_name}-"))
            )
            if same or owned:
                out.append(p)
                break
    return sorted(set(out))


def score_diagnosis(
    report: DiagnosisReport | None,
    truth: GroundTruth,
    topology: Topology,
    profile: EvaluationProfile,
    decoys: Iterable[str] = (),
    categories: Sequence[FaultCategory] = (),
) -> DiagnosisScores:
    """Score a diagnosis report against the ground truth on the system topology.

    Args:
        report: The accepted diagnosis, or None when the agent submitted none.
        truth: The scenario's ground truth.
        topology: The application's topology at evaluation time.
        profile: The evaluation profile.
        decoys: `Kind/name` of the trial's benign changes.
        categories: The categories of the scenario's faults.

    Returns:
        Pass (with its reason), FL-NTAM, FPC-NTAM and the decoys named as root causes;
        `ttd_seconds` is left for the runner, which knows when the diagnosis was accepted.
    """
    if report is None:
        report = DiagnosisReport()
    decoy_refs = list(decoys)
    roots = predicted_root_causes(report)
    graded = graded_truth(truth, profile, categories)
    named = _decoys_named(roots, decoy_refs)
    passed, reason = localization([e for e in report.entities if e.root_cause], graded, named)
    return DiagnosisScores(
        passed=passed,
        reason=reason,
        fl_ntam=fl_ntam(roots, graded.truth, topology, profile),
        fpc_ntam=fpc_ntam(predicted_entities(report), graded.truth, topology, profile),
        decoys_named=named,
    )
