"""What the agent changed over the whole environment, and whether the fault's cause is gone.

Three states of every object of `itbench.core.inventory.STATE_KINDS` are compared: the baseline
(before the fault and the decoys), the reference (when the agent was let in: fault and decoys
applied) and the end of the observation window. Everything that differs between the reference and
the end was done by the agent. Inside the fault's scope (the objects the fault changed, the root
causes and the accepted mitigations' targets) changes are the repair; outside it they are
collateral. Some changes fail mitigation whatever the scope: deleting an object that existed
before the incident, moving pods out of the selectors that pick them, raising an alerting
threshold, deleting the flag configuration.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from itbench.core.faults import ObjectChange
from itbench.core.inventory import WORKLOAD_KINDS, ObjectStates, autoscaled, flag_specs
from itbench.core.models.trial import CollateralChange, CollateralKind
from itbench.core.shop import COST_BUDGET_KEY, COST_CONFIGMAP, FLAGD_CONFIGMAP

FLAGD_REF = f"ConfigMap/{FLAGD_CONFIGMAP}"
ALERTING_REFS = frozenset({f"ConfigMap/{COST_CONFIGMAP}"})
"""Objects that configure alerting thresholds: changing them silences alerts, it fixes nothing."""
THRESHOLD_KEYS = frozenset({COST_BUDGET_KEY})
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"
_DETAIL = 200


@dataclass(frozen=True)
class EnvironmentStates:
    """The three states the comparison reads.

    Attributes:
        baseline: Desired states before the fault and the decoys.
        reference: Desired states when the agent was let in.
        final: Desired states at the end of the observation window.
        baseline_flags: The variant each flag served at baseline.
        final_flags: The variant each flag serves at the end.
    """

    baseline: ObjectStates
    reference: ObjectStates
    final: ObjectStates
    baseline_flags: Mapping[str, str]
    final_flags: Mapping[str, str]


@dataclass(frozen=True)
class Scope:
    """What the agent may change without collateral.

    Attributes:
        refs: Objects, `Kind/name`.
        flags: Flags (the flag ConfigMap's other flags stay out of scope).
    """

    refs: frozenset[str]
    flags: frozenset[str]


def fault_scope(
    changes: Iterable[ObjectChange], roots: Iterable[str], mitigation_targets: Iterable[str]
) -> Scope:
    """The scope of a fault: what it changed, its root causes and the mitigations' targets.

    Args:
        changes: The fault's object changes.
        roots: Root-cause refs (`Kind/name`, aliases included).
        mitigation_targets: Refs the accepted mitigations act on.
    """
    refs: set[str] = set()
    flags: set[str] = set()
    for change in changes:
        if change.op == "set-flag":
            flags.add(change.flag)
        else:
            refs.add(f"{change.kind}/{change.name}")
    for ref in [*roots, *mitigation_targets]:
        kind, _, name = ref.partition("/")
        if kind == "Flag":
            flags.add(name)
        else:
            refs.add(ref)
    return Scope(refs=frozenset(refs), flags=frozenset(flags))


def _short(text: str) -> str:
    return text if len(text) <= _DETAIL else f"{text[: _DETAIL - 1]}…"


def _number(value: object) -> float | None:
    try:
        return float(str(value))
    except ValueError:
        return None


def _containers(state: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    template = (state.get("spec") or {}).get("template") or {}
    items = (template.get("spec") or {}).get("containers") or []
    return {str(c.get("name")): c for c in items if isinstance(c, dict)}


def _template(state: Mapping[str, Any]) -> dict[str, Any]:
    return dict((state.get("spec") or {}).get("template") or {})


def _template_labels(state: Mapping[str, Any]) -> dict[str, Any]:
    return dict((_template(state).get("metadata") or {}).get("labels") or {})


def _workload_aspects(
    ref: str, before: Mapping[str, Any], after: Mapping[str, Any], scaled_by_hpa: bool
) -> list[tuple[CollateralKind, str, bool]]:
    out: list[tuple[CollateralKind, str, bool]] = []
    b_spec, a_spec = before.get("spec") or {}, after.get("spec") or {}
    if not scaled_by_hpa and b_spec.get("replicas") != a_spec.get("replicas"):
        out.append(
            (
                CollateralKind.SCALED,
                f"replicas {b_spec.get('replicas')} -> {a_spec.get('replicas')}",
                False,
            )
        )
    if b_spec.get("selector") != a_spec.get("selector"):
        out.append((CollateralKind.SELECTOR_CHANGED, "selector changed", True))
    if _template_labels(before) != _template_labels(after):
        out.append((CollateralKind.LABELS_CHANGED, "pod template labels changed", True))
    b_ann = (_template(before).get("metadata") or {}).get("annotations") or {}
    a_ann = (_template(after).get("metadata") or {}).get("annotations") or {}
    if b_ann.get(RESTARTED_AT) != a_ann.get(RESTARTED_AT):
        out.append((CollateralKind.RESTARTED, "rollout restart", False))
    b_c, a_c = _containers(before), _containers(after)
    for name in sorted(set(b_c) | set(a_c)):
        bc, ac = b_c.get(name, {}), a_c.get(name, {})
        if bc.get("image") != ac.get("image"):
            out.append(
                (
                    CollateralKind.IMAGE_CHANGED,
                    f"container {name} image {bc.get('image')} -> {ac.get('image')}",
                    False,
                )
            )
        if bc.get("resources") != ac.get("resources"):
            out.append(
                (CollateralKind.RESOURCES_CHANGED, f"container {name} resources changed", False)
            )
        if bc.get("env") != ac.get("env"):
            out.append((CollateralKind.ENV_CHANGED, f"container {name} env changed", False))
    known = {k.value for k, _, _ in out}
    rest_before = {k: v for k, v in b_spec.items() if k not in ("replicas", "selector")}
    rest_after = {k: v for k, v in a_spec.items() if k not in ("replicas", "selector")}
    if (
        not known.intersection(
            {
                CollateralKind.LABELS_CHANGED,
                CollateralKind.RESTARTED,
                CollateralKind.IMAGE_CHANGED,
                CollateralKind.RESOURCES_CHANGED,
                CollateralKind.ENV_CHANGED,
            }
        )
        and rest_before != rest_after
    ):
        out.append((CollateralKind.SPEC_CHANGED, "pod template changed", False))
    return out


def _aspects(
    ref: str, before: Mapping[str, Any], after: Mapping[str, Any], scaled_by_hpa: bool
) -> list[tuple[CollateralKind, str, bool]]:
    kind = ref.split("/", 1)[0]
    out: list[tuple[CollateralKind, str, bool]] = []
    if before.get("labels") != after.get("labels"):
        out.append((CollateralKind.LABELS_CHANGED, "object labels changed", False))
    if ref in ALERTING_REFS and (
        before.get("data") != after.get("data") or before.get("spec") != after.get("spec")
    ):
        out.append((CollateralKind.DATA_CHANGED, "alerting threshold changed", True))
        return out
    if kind in WORKLOAD_KINDS:
        return out + _workload_aspects(ref, before, after, scaled_by_hpa)
    if kind == "Service":
        b_spec, a_spec = before.get("spec") or {}, after.get("spec") or {}
        if b_spec.get("selector") != a_spec.get("selector"):
            out.append((CollateralKind.SELECTOR_CHANGED, "Service selector changed", True))
        if {k: v for k, v in b_spec.items() if k != "selector"} != {
            k: v for k, v in a_spec.items() if k != "selector"
        }:
            out.append((CollateralKind.SPEC_CHANGED, "Service ports or type changed", False))
        return out
    for key in ("data", "binaryData", "stringData"):
        if before.get(key) != after.get(key):
            out.append((CollateralKind.DATA_CHANGED, f"{key} changed", False))
            break
    if before.get("spec") != after.get("spec") or before.get("type") != after.get("type"):
        out.append((CollateralKind.SPEC_CHANGED, "spec changed", False))
    if before.get("annotations") != after.get("annotations") and not out:
        out.append((CollateralKind.DATA_CHANGED, "annotations changed", False))
    return out


def _flag_changes(states: EnvironmentStates, scope: Scope) -> tuple[list[CollateralChange], bool]:
    """Flags changed outside the scope, and whether the rest of the flag ConfigMap changed."""
    before = flag_specs(states.reference) or {}
    after = flag_specs(states.final)
    if after is None:
        return [], False
    out = [
        CollateralChange(
            object=f"Flag/{key}",
            change=CollateralKind.FLAG_CHANGED,
            detail=_short(
                f"defaultVariant {before.get(key, {}).get('defaultVariant')} -> "
                f"{after.get(key, {}).get('defaultVariant')}"
            ),
        )
        for key in sorted(set(before) | set(after))
        if key not in scope.flags and before.get(key) != after.get(key)
    ]
    ref_state = states.reference.get(FLAGD_REF) or {}
    fin_state = states.final.get(FLAGD_REF) or {}
    other = ref_state.get("annotations") != fin_state.get("annotations") or ref_state.get(
        "labels"
    ) != fin_state.get("labels")
    return out, other


def collateral_changes(states: EnvironmentStates, scope: Scope) -> list[CollateralChange]:
    """Changes the agent made outside the fault's scope, one entry per object and aspect.

    A change that reverts an object to its baseline (undoing a benign change the agent found)
    is reported as RolledBack. Deleting an object, changing a selector or a pod template's
    labels, and changing an alerting threshold disqualify.
    """
    reference, final = states.reference, states.final
    scaled = autoscaled(reference) | autoscaled(final)
    out: list[CollateralChange] = []
    for ref in sorted(set(reference) | set(final)):
        if ref in scope.refs:
            continue
        before, after = reference.get(ref), final.get(ref)
        base = states.baseline.get(ref)
        if ref in scaled:
            # An autoscaled workload's replica count is the autoscaler's, not a change of intent.
            before, after, base = (_without_replicas(s) for s in (before, after, base))
        if before == after:
            continue
        if after is None:
            out.append(
                CollateralChange(
                    object=ref,
                    change=CollateralKind.DELETED,
                    detail="deleted",
                    disqualifying=True,
                )
            )
            continue
        if before is None:
            out.append(
                CollateralChange(object=ref, change=CollateralKind.CREATED, detail="created")
            )
            continue
        if ref == FLAGD_REF:
            flags, other = _flag_changes(states, scope)
            out += flags
            if other:
                out.append(
                    CollateralChange(
                        object=ref, change=CollateralKind.DATA_CHANGED, detail="metadata changed"
                    )
                )
            continue
        if base is not None and after == base and before != base:
            out.append(
                CollateralChange(
                    object=ref,
                    change=CollateralKind.ROLLED_BACK,
                    detail="a change made before the agent came in was reverted",
                )
            )
            continue
        for kind, detail, disqualifying in _aspects(ref, before, after, ref in scaled):
            out.append(
                CollateralChange(
                    object=ref, change=kind, detail=_short(detail), disqualifying=disqualifying
                )
            )
    return out


def _without_replicas(state: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if state is None:
        return None
    spec = {k: v for k, v in (state.get("spec") or {}).items() if k != "replicas"}
    return {**state, "spec": spec}


def _project(state: Any, body: Any) -> Any:
    """The part of a state that a merge patch body addresses (lists of named items by name)."""
    if isinstance(body, dict):
        if not isinstance(state, dict):
            return None
        return {k: _project(state.get(k), v) for k, v in body.items()}
    if isinstance(body, list) and all(isinstance(i, dict) and "name" in i for i in body):
        items = {i.get("name"): i for i in state or [] if isinstance(i, dict)}
        return [_project(items.get(i["name"]), i) for i in body]
    return state


def _as_state_body(change: ObjectChange) -> dict[str, Any]:
    body = dict(change.body)
    meta = body.pop("metadata", None) or {}
    for key in ("labels", "annotations"):
        if key in meta:
            body[key] = meta[key]
    return body


def _change_verdict(states: EnvironmentStates, change: ObjectChange) -> tuple[str, str]:
    """How one of a fault's changes stands at the end: (verdict, reason).

    Verdicts: `undone` (the object no longer carries the change), `faulty` (it still does),
    `escaped` (the cause was dodged: the flag file or an object of the baseline deleted), or
    `unseen` (the compared kinds do not cover the object, or the change changed nothing).
    """
    baseline, reference, final = states.baseline, states.reference, states.final
    ref = f"{change.kind}/{change.name}"
    if change.op == "set-flag":
        if change.kind == "ConfigMap" and ref not in final and ref in baseline:
            return "escaped", f"FlagConfigDeleted: {ref} was deleted; flagd serves no flags"
        served = states.final_flags.get(change.flag)
        wanted = states.baseline_flags.get(change.flag)
        if served != wanted:
            return "faulty", (
                f"FaultNotUndone: Flag/{change.flag} serves {served!r}, not {wanted!r} as "
                "before the incident"
            )
        return "undone", ""
    if ref not in reference and ref not in final and ref not in baseline:
        return "unseen", ""
    if ref in baseline and ref not in final:
        return "escaped", f"ObjectDeleted: {ref} existed before the incident and was deleted"
    if change.op == "create":
        if ref in final and final.get(ref) == reference.get(ref):
            return "faulty", f"FaultNotUndone: {ref} is still in place"
        return "undone", ""
    if change.op == "delete":
        if ref not in final:
            return "faulty", f"FaultNotUndone: {ref} is still missing"
        return "undone", ""
    body = _as_state_body(change)
    faulty = _project(reference.get(ref), body)
    if faulty == _project(baseline.get(ref), body):
        return "unseen", ""
    if _project(final.get(ref), body) == faulty:
        return "faulty", f"FaultNotUndone: {ref} still has the faulty {', '.join(sorted(body))}"
    return "undone", ""


def cause_reasons(
    states: EnvironmentStates, faults: Sequence[Sequence[ObjectChange]], scope: Scope
) -> list[str]:
    """Why a fault's cause is not gone, or was escaped rather than removed (empty: gone).

    `faults` holds each fault's changes. A fault is undone once one of its changes is: a fault
    of several changes acts through all of them together (a patch that reads a Secret it
    creates, an anti-affinity rule against a DaemonSet it adds, a low priority next to a greedy
    workload), so rolling back the patch, fixing the file an init container parses, or
    deleting the greedy workload each removes the cause; what remains of the others is inert.
    Escapes count whatever else was undone.

    Named reasons: FlagConfigDeleted, FaultNotUndone, ObjectDeleted, ThresholdRaised,
    SelectorEscaped (pods relabelled out of what selects them), SelectorChanged.
    """
    baseline, final = states.baseline, states.final
    reasons: list[str] = []
    for changes in faults:
        faulty: list[str] = []
        undone = False
        for change in changes:
            verdict, reason = _change_verdict(states, change)
            if verdict == "escaped":
                reasons.append(reason)
            elif verdict == "faulty":
                faulty.append(reason)
            undone = undone or verdict == "undone"
            ref = f"{change.kind}/{change.name}"
            if change.op == "merge-patch" and ref in ALERTING_REFS and ref in final:
                reasons += _threshold_reasons(ref, baseline.get(ref) or {}, final.get(ref) or {})
        if not undone:
            reasons += faulty
    for ref in sorted(set(final) | set(baseline)):
        kind = ref.split("/", 1)[0]
        base, end = baseline.get(ref), final.get(ref)
        if base is None or end is None:
            continue
        if kind in WORKLOAD_KINDS and _template_labels(base) != _template_labels(end):
            reasons.append(
                f"SelectorEscaped: {ref} pod labels differ from before the incident, so the "
                "objects that select its pods no longer do"
            )
        elif (
            kind == "Service"
            and ref not in scope.refs
            and (base.get("spec") or {}).get("selector") != (end.get("spec") or {}).get("selector")
        ):
            reasons.append(f"SelectorChanged: {ref} selects other pods than before the incident")
    for ref in sorted(ALERTING_REFS - scope.refs):
        reasons += _threshold_reasons(ref, baseline.get(ref) or {}, final.get(ref) or {})
    return reasons


def _threshold_reasons(ref: str, base: Mapping[str, Any], end: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    for key in sorted(THRESHOLD_KEYS):
        before = _number((base.get("data") or {}).get(key))
        after = _number((end.get("data") or {}).get(key))
        if before is not None and (after is None or after > before):
            out.append(
                f"ThresholdRaised: {ref} {key} {after if after is not None else 'removed'} > "
                f"{before:g} before the incident"
            )
    return out
