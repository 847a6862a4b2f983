"""What a CISO scenario expects, its counterpart variant, and the posture score of a trial.

The expected posture of an instance covers every target of the kinds its controls assess: the
targets its ground truth lists take the listed result, every other target of those kinds must
pass. The environment also carries other CIS weaknesses than the assessed setting (the
`ciso.background` fault: other settings non-compliant on other objects, the same in both
variants), so "every other target passes" is the assessed control's verdict, not the
environment's: a policy flagging every weakness it knows fails targets that only break other
controls. The counterpart of an instance is the same scenario with the state of each
`ciso.setting` fault flipped and each listed result with it; the platform evaluates the agent's
artefacts on both. Together they fail a fixed answer (always compliant, always violating), one
policy for everything (a union of CIS checks, of every reference solution, or every target
non-compliant): the union fails a background target on both variants, and under `default@5` any
target of another kind the artefacts flag (a Role when the control assesses Deployments) is a
finding outside the control and fails the posture too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from itbench.core.ciso.classes import CisoClass, class_of
from itbench.core.ciso.faults import POLICY_SET_FAULT, SETTING_FAULT
from itbench.core.ciso.host import HOST_TARGET
from itbench.core.ciso.namespace import baseline_targets
from itbench.core.ciso.settings import SETTINGS, State, setting_target
from itbench.core.faults import get_fault
from itbench.core.models.agent_io import PostureReport
from itbench.core.models.compliance import (
    ComplianceEvaluation,
    TargetVerdict,
    VariantEvaluation,
    VerdictResult,
)
from itbench.core.models.scenario import ExpectedPosture, PostureResult, Scenario
from itbench.core.models.trial import PostureScores

PASS, FAIL = PostureResult.PASS, PostureResult.FAIL


def setting_faults(scenario: Scenario) -> list[tuple[int, str, str, str]]:
    """The `ciso.setting` faults of a scenario as (index, setting, state, workload)."""
    out: list[tuple[int, str, str, str]] = []
    for n, fault in enumerate(scenario.spec.faults):
        if fault.id == SETTING_FAULT:
            out.append(
                (
                    n,
                    str(fault.args.get("setting", "")),
                    str(fault.args.get("state", "")),
                    str(fault.args.get("workload", "")),
                )
            )
    return out


def policy_update(scenario: Scenario) -> tuple[str, str] | None:
    """The (policy set, policy to update) of an update scenario, if it installs a set."""
    for fault in scenario.spec.faults:
        if fault.id == POLICY_SET_FAULT:
            return str(fault.args.get("set", "")), str(fault.args.get("update", ""))
    return None


def target_kinds(scenario: Scenario) -> list[str]:
    """The kinds of target the scenario's controls assess, in fault order."""
    kinds: list[str] = []
    for _n, setting_id, _state, _workload in setting_faults(scenario):
        s = SETTINGS.get(setting_id)
        if s is not None and s.target_kind not in kinds:
            kinds.append(s.target_kind)
    return kinds


def environment_targets(scenario: Scenario) -> list[str]:
    """Every target of the assessed kinds in the instance's environment, sorted: the
    baseline's, plus what its faults create, less what they delete."""
    kinds = target_kinds(scenario)
    if kinds == ["Host"]:
        return [HOST_TARGET]
    found: set[str] = set()
    for kind in kinds:
        found.update(baseline_targets(kind))
    ns = scenario.spec.environment.namespace
    for fault in scenario.spec.faults:
        try:
            changes = get_fault(fault.id).changes(fault.args, ns)
        except (LookupError, ValueError):
            continue
        for change in changes:
            ref = f"{change.kind}/{change.name}"
            if change.kind not in kinds:
                continue
            if change.op == "create":
                found.add(ref)
            elif change.op == "delete":
                found.discard(ref)
    return sorted(found)


def fault_posture(scenario: Scenario) -> list[ExpectedPosture]:
    """The posture each `ciso.setting` fault decides: its target fails when the setting is
    configured non-compliantly and passes otherwise (the control id is the setting's)."""
    out: list[ExpectedPosture] = []
    for _n, setting_id, state, workload in setting_faults(scenario):
        s = SETTINGS.get(setting_id)
        if s is None or state not in ("compliant", "noncompliant"):
            continue
        out.append(
            ExpectedPosture(
                control_id=setting_id,
                target=setting_target(s, workload),
                result=FAIL if state == "noncompliant" else PASS,
            )
        )
    return out


def expected_posture(scenario: Scenario) -> dict[str, PostureResult]:
    """The expected result of every assessed target of an instance: what its faults decide and
    its ground truth lists; every other target of the assessed kinds passes."""
    expected = {target: PASS for target in environment_targets(scenario)}
    for entry in [*fault_posture(scenario), *scenario.spec.ground_truth.posture]:
        expected[entry.target.strip()] = entry.result
    return dict(sorted(expected.items()))


def control_ids(scenario: Scenario) -> list[str]:
    """The control ids the scenario's ground truth assesses, in order, once each."""
    entries = [*fault_posture(scenario), *scenario.spec.ground_truth.posture]
    return list(dict.fromkeys(e.control_id for e in entries))


def counterpart(scenario: Scenario) -> Scenario:
    """The instance's other variant: every `ciso.setting` state flipped, every listed posture
    result with it."""
    faults = []
    for fault in scenario.spec.faults:
        if fault.id == SETTING_FAULT and fault.args.get("state") in ("compliant", "noncompliant"):
            state = State(str(fault.args["state"])).flipped()
            fault = fault.model_copy(update={"args": {**fault.args, "state": state.value}})
        faults.append(fault)
    truth = scenario.spec.ground_truth
    posture = [
        e.model_copy(update={"result": FAIL if e.result == PASS else PASS}) for e in truth.posture
    ]
    spec = scenario.spec.model_copy(
        update={
            "faults": faults,
            "ground_truth": truth.model_copy(update={"posture": posture}),
        }
    )
    return scenario.model_copy(update={"spec": spec})


def aggregate(
    verdicts: Iterable[TargetVerdict], owners: Mapping[str, str]
) -> dict[str, TargetVerdict]:
    """Object verdicts rolled up to their targets.

    A Pod's or ReplicaSet's verdict counts for the Deployment that owns it (`owners` maps
    `Kind/name` to the owning target); a target fails when any of its objects fails, is in
    error when one errs and none fails, and passes when every one of its objects passed.

    Args:
        verdicts: Verdicts on objects (`Pod/...`, `Deployment/...`, `Role/...`).
        owners: The owning target of each derived object.
    """
    rank = {VerdictResult.FAIL: 3, VerdictResult.ERROR: 2, VerdictResult.PASS: 1}
    out: dict[str, TargetVerdict] = {}
    for verdict in verdicts:
        target = owners.get(verdict.target, verdict.target)
        current = out.get(target)
        if current is None or rank.get(verdict.result, 0) > rank.get(current.result, 0):
            out[target] = TargetVerdict(target=target, result=verdict.result, detail=verdict.detail)
    return out


def _mismatches(
    variant: VariantEvaluation, expected: Mapping[str, PostureResult]
) -> tuple[int, list[str]]:
    got = variant.by_target()
    matched = 0
    wrong: list[str] = []
    for target, want in expected.items():
        verdict = got.get(target)
        result = verdict.result if verdict is not None else VerdictResult.NOT_ASSESSED
        if result.value == want.value:
            matched += 1
            continue
        detail = f" ({verdict.detail})" if verdict is not None and verdict.detail else ""
        wrong.append(f"{target} {result.value}, expected {want.value}{detail}")
    return matched, wrong


def _outside(variant: VariantEvaluation, expected: Mapping[str, PostureResult]) -> list[str]:
    """Targets the artefacts fail that the assessed control does not assess."""
    return [
        f"{v.target} {v.result.value}, not a target of this control"
        for v in variant.verdicts
        if v.result == VerdictResult.FAIL and v.target not in expected
    ]


def score_compliance(
    evaluation: ComplianceEvaluation | None,
    scenario: Scenario,
    *,
    ttp: float | None,
    report: PostureReport | None = None,
    outside_fails: bool = False,
) -> PostureScores:
    """Score a CISO trial from the platform's evaluation of its artefacts.

    The posture passes when the artefacts were evaluated on both variants, every expected
    target of each got its expected result, nothing outside the requirement changed (update
    class) and a submitted posture report, if any, claims nothing the trial's variant
    contradicts. With `outside_fails`, a failing verdict on a target the control does not assess
    (a union policy's finding of another control) fails the posture too, as does a report that
    claims one.

    Args:
        evaluation: The platform's evaluation (None: the trial never reached one).
        scenario: The trial's instance.
        ttp: Time to process in seconds: from Ready to the accepted artefacts.
        report: The agent's posture report, if it submitted one.
        outside_fails: Findings outside the assessed control's targets fail (`default@5`).
    """
    expected = expected_posture(scenario)
    total = len(expected)
    if evaluation is None or not evaluation.submitted:
        return PostureScores(
            passed=False,
            matched=0,
            expected=total,
            ttp_seconds=None,
            reason="NoSubmission: no compliance artefacts were accepted",
        )
    if evaluation.live_only:
        return PostureScores(
            passed=False,
            matched=0,
            expected=total,
            ttp_seconds=ttp,
            live_only=True,
            reason=f"LiveOnly: {evaluation.problem}",
        )
    if evaluation.platform_error:
        return PostureScores(
            passed=False,
            matched=0,
            expected=total,
            ttp_seconds=ttp,
            reason=f"PlatformError: {evaluation.problem or 'the evaluation could not run'}",
        )
    if evaluation.problem or not evaluation.variants:
        return PostureScores(
            passed=False,
            matched=0,
            expected=total,
            ttp_seconds=ttp,
            reason=f"NotEvaluated: {evaluation.problem or 'nothing was evaluated'}",
        )
    reasons: list[str] = []
    trial = evaluation.variants[0]
    if trial.problem:
        matched, wrong = 0, list[str]()
        reasons.append(f"ArtefactFailed: {trial.problem}")
    else:
        matched, wrong = _mismatches(trial, expected)
        if wrong:
            reasons.append(f"WrongPosture: {'; '.join(wrong[:6])}")
        outside = _outside(trial, expected) if outside_fails else []
        if outside:
            reasons.append(f"FindingOutsideControl: {'; '.join(outside[:6])}")
    counterpart_ok: bool | None = None
    if len(evaluation.variants) > 1:
        other = evaluation.variants[1]
        if other.problem:
            counterpart_ok = False
            reasons.append(f"CounterpartFailed: {other.problem}")
        else:
            other_expected = expected_posture(counterpart(scenario))
            _m, other_wrong = _mismatches(other, other_expected)
            other_outside = _outside(other, other_expected) if outside_fails else []
            counterpart_ok = not other_wrong and not other_outside
            if other_wrong:
                reasons.append(f"WrongOnCounterpart: {'; '.join(other_wrong[:6])}")
            if other_outside:
                reasons.append(
                    f"FindingOutsideControlOnCounterpart: {'; '.join(other_outside[:6])}"
                )
    else:
        counterpart_ok = False
        reasons.append("CounterpartMissing: the other variant was not evaluated")
    if evaluation.untouched:
        reasons.append(f"PolicySetChanged: {'; '.join(evaluation.untouched[:6])}")
    if report is not None:
        contradicted = _contradicted(report, scenario, outside_fails=outside_fails)
        if contradicted:
            reasons.append(f"PostureClaim: the posture report says {'; '.join(contradicted[:6])}")
    return PostureScores(
        passed=not reasons,
        matched=matched,
        expected=total,
        ttp_seconds=ttp,
        counterpart_passed=counterpart_ok,
        reason="; ".join(reasons) if reasons else "Assessed: right on both variants",
    )


def _contradicted(
    report: PostureReport, scenario: Scenario, *, outside_fails: bool = False
) -> list[str]:
    expected = expected_posture(scenario)
    out = []
    for claim in report.assessments:
        want = expected.get(claim.target.strip())
        if want is not None and claim.result != want:
            out.append(f"{claim.target} {claim.result.value}")
        elif want is None and outside_fails and claim.result == FAIL:
            out.append(f"{claim.target} {claim.result.value}, not a target of this control")
    return out


def class_rules_of(scenario: Scenario) -> CisoClass | None:
    """The CISO class of a scenario, if it is one."""
    return class_of(scenario.spec.scenario_class)
