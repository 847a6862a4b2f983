"""The other CIS weaknesses of a CISO trial: drawn per instance, never the assessed setting's
nor one overlapping it, the same in both variants; a union of CIS checks fails on them, and a
finding outside the assessed control's targets fails the posture under default@5."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from agents.ciso_reference import solutions
from agents.validity.ciso import CIS_CEL, CIS_REGO_K8S
from itbench.catalog_files import load_variants
from itbench.ciso import sandbox
from itbench.ciso.evaluate import evaluate_submission
from itbench.core.ciso.background import (
    BACKGROUND_DRAWS,
    HOST_SETTINGS,
    POD_SETTINGS,
    POLICY_SET_COVERS,
    ROLE_SETTINGS,
    TEMPLATE_SETTINGS,
    background_weaknesses,
    related,
)
from itbench.core.ciso.classes import CisoClass
from itbench.core.ciso.controls import CONTROLS
from itbench.core.ciso.faults import BACKGROUND_FAULT
from itbench.core.ciso.posture import counterpart, expected_posture, score_compliance
from itbench.core.ciso.settings import SETTINGS, Scope
from itbench.core.models.compliance import (
    CollectionKind,
    ComplianceEvaluation,
    ComplianceSubmission,
    EvidenceCollection,
    TargetVerdict,
    VariantEvaluation,
    VerdictResult,
)
from itbench.core.models.scenario import PostureResult, Scenario

ROOT = Path(__file__).resolve().parents[3] / "scenarios" / "ciso"
NEEDS_SANDBOX = pytest.mark.skipif(
    bool(sandbox.sandbox_problem()), reason=f"no evidence sandbox: {sandbox.sandbox_problem()}"
)


def _draws() -> list[tuple[str, str, int, bool]]:
    out = []
    for control in CONTROLS:
        update = control.cls == CisoClass.KYVERNO_UPDATE
        for workload in control.workloads or ("",):
            out += [(control.setting, workload, d, update) for d in range(BACKGROUND_DRAWS)]
    return out


def test_no_draw_weakens_the_assessed_setting_its_target_or_what_overlaps_it() -> None:
    for setting, workload, draw, update in _draws():
        found = background_weaknesses(setting, workload, draw, update=update)
        names = [s for s, _w in found]
        assert not set(names) & related(setting), (setting, draw, names)
        if update:
            assert not set(names) & POLICY_SET_COVERS, (setting, draw, names)
        deployments = [w for _s, w in found if w]
        assert workload not in deployments
        assert len(deployments) == len(set(deployments))
        if SETTINGS[setting].scope == Scope.HOST:
            assert len(names) == 2 and set(names) <= set(HOST_SETTINGS)
        else:
            assert names[0] in POD_SETTINGS and names[1] in TEMPLATE_SETTINGS
            if SETTINGS[setting].target_kind == "Role":
                assert names[2] in ROLE_SETTINGS


def test_the_draw_varies_and_repeats() -> None:
    for control in CONTROLS:
        workload = control.workloads[0] if control.workloads else ""
        drawn = {
            tuple(background_weaknesses(control.setting, workload, d))
            for d in range(BACKGROUND_DRAWS)
        }
        assert len(drawn) > 1, control.name
        assert background_weaknesses(control.setting, workload, 3) == background_weaknesses(
            control.setting, workload, 3
        )


def _instance(name: str, n: int = 0) -> Scenario:
    variants, problems = load_variants(ROOT / name / "scenario.yaml")
    assert variants is not None, problems
    return variants.instances[n].scenario


def test_every_template_draws_its_background_and_the_counterpart_keeps_it() -> None:
    for control in CONTROLS:
        variants, problems = load_variants(ROOT / control.name / "scenario.yaml")
        assert variants is not None, problems
        draws = {i.values["background"] for i in variants.instances}
        assert draws == set(range(BACKGROUND_DRAWS)), control.name
        scenario = variants.instances[0].scenario
        background = [f for f in scenario.spec.faults if f.id == BACKGROUND_FAULT]
        assert len(background) == 1
        other = [f for f in counterpart(scenario).spec.faults if f.id == BACKGROUND_FAULT]
        assert other == background


def test_a_background_role_is_a_target_that_must_pass() -> None:
    scenario = _instance("ciso-opa-role-secrets")
    draw = next(f for f in scenario.spec.faults if f.id == BACKGROUND_FAULT)
    role = next(
        s
        for s, _w in background_weaknesses("role-secrets", "", int(draw.args["draw"]))
        if s in ROLE_SETTINGS
    )
    target = SETTINGS[role].fixed_target
    assert expected_posture(scenario)[target] == PostureResult.PASS
    assert expected_posture(counterpart(scenario))[target] == PostureResult.PASS


def test_a_union_of_the_cis_checks_fails_a_kyverno_control() -> None:
    policy = solutions.validating_policy("cis-union", "true", "")
    policy["spec"]["validations"] = [{"expression": e, "message": "weak"} for e in CIS_CEL]
    for n in range(0, 64, 9):
        scenario = _instance("ciso-kyverno-host-pid", n)
        evaluation = evaluate_submission(
            scenario, ComplianceSubmission(kyverno=yaml.safe_dump(policy))
        )
        scores = score_compliance(evaluation, scenario, ttp=1.0)
        assert not scores.passed
        assert "WrongPosture" in scores.reason and "WrongOnCounterpart" in scores.reason
        reference = solutions.validating_policy("cis", solutions.CEL["host-pid"], "weak")
        own = evaluate_submission(scenario, ComplianceSubmission(kyverno=yaml.safe_dump(reference)))
        assert score_compliance(own, scenario, ttp=1.0).passed


@NEEDS_SANDBOX
def test_a_union_rego_fails_a_control_of_another_kind_under_default_5() -> None:
    scenario = _instance("ciso-opa-cluster-admin-binding")
    union = ComplianceSubmission(
        rego=solutions.rego_module(CIS_REGO_K8S),
        collection=EvidenceCollection(
            kind=CollectionKind.SCRIPT, content=solutions.k8s_collection("otel-demo")
        ),
    )
    evaluation = evaluate_submission(scenario, union)
    assert score_compliance(evaluation, scenario, ttp=1.0).passed, "default@4 let it pass"
    scores = score_compliance(evaluation, scenario, ttp=1.0, outside_fails=True)
    assert not scores.passed
    assert "FindingOutsideControl: Deployment/" in scores.reason
    assert scores.counterpart_passed is False


def _evaluation(verdicts: list[TargetVerdict], other: list[TargetVerdict]) -> ComplianceEvaluation:
    return ComplianceEvaluation(
        submitted=True,
        variants=[
            VariantEvaluation(variant="trial", engine="regorus", verdicts=verdicts),
            VariantEvaluation(variant="counterpart", engine="regorus", verdicts=other),
        ],
    )


def test_a_finding_outside_the_control_fails_only_under_the_new_grading() -> None:
    scenario = _instance("ciso-opa-network-policies")
    right = [
        TargetVerdict(target=t, result=VerdictResult(r.value))
        for t, r in expected_posture(scenario).items()
    ]
    other = [
        TargetVerdict(target=t, result=VerdictResult(r.value))
        for t, r in expected_posture(counterpart(scenario)).items()
    ]
    flagged = TargetVerdict(target="Role/settings-reader", result=VerdictResult.FAIL)
    assert score_compliance(_evaluation(right, other), scenario, ttp=1.0, outside_fails=True).passed
    evaluation = _evaluation([*right, flagged], other)
    assert score_compliance(evaluation, scenario, ttp=1.0).passed
    scores = score_compliance(evaluation, scenario, ttp=1.0, outside_fails=True)
    assert not scores.passed
    assert scores.reason.startswith(
        "FindingOutsideControl: Role/settings-reader fail, not a target of this control"
    )
