"""The platform's evaluation of CISO artefacts: deliberately wrong policies fail on one of the two
variants, and bad artefacts are contained and scored as failed with their reason."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from agents.ciso_reference import solutions
from itbench.catalog_files import load_variants
from itbench.ciso import sandbox
from itbench.ciso.evaluate import evaluate_submission
from itbench.core.ciso.policies import BASELINE_SET
from itbench.core.ciso.posture import score_compliance
from itbench.core.models.compliance import (
    CollectionKind,
    ComplianceSubmission,
    EvidenceCollection,
)
from itbench.core.models.scenario import Scenario
from itbench.core.models.trial import PostureScores

ROOT = Path(__file__).resolve().parents[3] / "scenarios" / "ciso"
NEEDS_SANDBOX = pytest.mark.skipif(
    bool(sandbox.sandbox_problem()), reason=f"no evidence sandbox: {sandbox.sandbox_problem()}"
)


def _instance(name: str) -> Scenario:
    variants, problems = load_variants(ROOT / name / "scenario.yaml")
    assert variants is not None, problems
    return variants.instances[0].scenario


def _score(name: str, submission: ComplianceSubmission) -> PostureScores:
    scenario = _instance(name)
    return score_compliance(evaluate_submission(scenario, submission), scenario, ttp=1.0)


def _cel(expression: str) -> ComplianceSubmission:
    policy = solutions.validating_policy("cis-check", expression, "not compliant")
    return ComplianceSubmission(kyverno=yaml.safe_dump(policy))


K8S = EvidenceCollection(kind=CollectionKind.SCRIPT, content=solutions.k8s_collection("otel-demo"))
HOST = EvidenceCollection(kind=CollectionKind.SCRIPT, content=solutions.HOST_SCRIPT)


def test_the_reference_cel_policy_passes_both_variants() -> None:
    scores = _score("ciso-kyverno-host-network", _cel(solutions.CEL["host-network"]))
    assert scores.passed, scores.reason
    assert scores.counterpart_passed is True


@pytest.mark.parametrize(
    ("expression", "why"),
    [("true", "always compliant"), ("false", "always violating")],
)
def test_a_fixed_cel_answer_fails_one_variant(expression: str, why: str) -> None:
    scores = _score("ciso-kyverno-host-network", _cel(expression))
    assert not scores.passed, why
    assert "WrongPosture" in scores.reason or "WrongOnCounterpart" in scores.reason


def test_cel_that_does_not_compile_fails_with_the_field_named() -> None:
    scores = _score("ciso-kyverno-host-network", _cel("object.spec.hostNetwork ==="))
    assert not scores.passed
    assert scores.reason.startswith("NotEvaluated: InvalidPolicy: ValidatingPolicy/cis-check")


def test_invalid_yaml_fails_with_its_line() -> None:
    scores = _score("ciso-kyverno-host-network", ComplianceSubmission(kyverno="a: [1, 2\nb: c"))
    assert not scores.passed
    assert "InvalidYAML" in scores.reason and "line" in scores.reason


def test_a_document_that_is_not_a_policy_is_named() -> None:
    text = yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})
    scores = _score("ciso-kyverno-host-network", ComplianceSubmission(kyverno=text))
    assert "kind 'ConfigMap' is not a policy" in scores.reason


def test_a_pattern_style_kyverno_policy_is_live_only() -> None:
    policy = {
        "apiVersion": "kyverno.io/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": "disallow-host-network"},
        "spec": {
            "rules": [
                {
                    "name": "host-network",
                    "match": {"any": [{"resources": {"kinds": ["Pod"]}}]},
                    "validate": {"pattern": {"spec": {"=(hostNetwork)": False}}},
                }
            ]
        },
    }
    scores = _score(
        "ciso-kyverno-host-network", ComplianceSubmission(kyverno=yaml.safe_dump(policy))
    )
    assert not scores.passed
    assert scores.live_only is True
    assert scores.reason.startswith("LiveOnly:")


def test_an_update_that_changes_an_unconcerned_policy_fails() -> None:
    docs = [dict(p) for p in BASELINE_SET]
    docs[0] = {**docs[0], "spec": {**docs[0]["spec"], "validationActions": ["Deny"]}}
    changed = _score("ciso-update-net-raw", ComplianceSubmission(kyverno=yaml.safe_dump_all(docs)))
    assert "PolicySetChanged: disallow-host-namespaces was changed" in changed.reason
    added = _score(
        "ciso-update-net-raw",
        ComplianceSubmission(
            kyverno=yaml.safe_dump_all(
                [*BASELINE_SET, solutions.validating_policy("extra", "true", "x")]
            )
        ),
    )
    assert "extra was added" in added.reason


def test_an_unchanged_policy_set_fails_the_update() -> None:
    scores = _score(
        "ciso-update-net-raw", ComplianceSubmission(kyverno=yaml.safe_dump_all(BASELINE_SET))
    )
    assert not scores.passed
    assert "Wrong" in scores.reason


@NEEDS_SANDBOX
@pytest.mark.parametrize(
    ("rego", "why"),
    [
        ("violations := set()", "always compliant"),
        (
            'violations := {sprintf("Role/%s", [r.metadata.name]) | some r in input.items}',
            "always violating",
        ),
    ],
)
def test_a_fixed_rego_answer_fails_one_variant(rego: str, why: str) -> None:
    module = solutions.rego_module(rego)
    scores = _score("ciso-opa-role-wildcard", ComplianceSubmission(rego=module, collection=K8S))
    assert not scores.passed, why


@NEEDS_SANDBOX
@pytest.mark.parametrize("flag", ["true", "false"])
def test_a_fixed_host_answer_fails_one_variant(flag: str) -> None:
    module = solutions.rego_module(f"compliant := {flag}")
    scores = _score("ciso-rhel9-ip-forwarding", ComplianceSubmission(rego=module, collection=HOST))
    assert not scores.passed


def test_rego_that_does_not_compile_fails_before_any_collection() -> None:
    submission = ComplianceSubmission(rego="package cis\n\nviolations[x {", collection=K8S)
    scores = _score("ciso-opa-role-wildcard", submission)
    assert not scores.passed
    assert scores.reason.startswith("NotEvaluated: RegoCompile:")


def test_rego_without_a_collection_is_named() -> None:
    scores = _score("ciso-opa-role-wildcard", ComplianceSubmission(rego="package cis\n"))
    assert "MissingCollection" in scores.reason


@NEEDS_SANDBOX
def test_a_policy_that_never_terminates_is_stopped() -> None:
    module = solutions.rego_module(
        "violations contains x if {\n\tsome x in numbers.range(1, 100000000000)\n\tx < 0\n}"
    )
    scores = _score("ciso-opa-role-wildcard", ComplianceSubmission(rego=module, collection=K8S))
    assert not scores.passed
    assert "RegoFailed" in scores.reason
    # The engine process was replaced: the next evaluation works.
    good = solutions.rego_module(solutions.REGO_K8S["role-wildcard"])
    again = _score("ciso-opa-role-wildcard", ComplianceSubmission(rego=good, collection=K8S))
    assert again.passed, again.reason


@NEEDS_SANDBOX
@pytest.mark.parametrize(
    ("script", "reason"),
    [
        ("kubectl delete deployment cart -n otel-demo\necho '{}'\n", "tried to write"),
        ("sed -i 's/^PermitRootLogin no/PermitRootLogin yes/' /etc/ssh/sshd_config\n", "write"),
        ("curl -s https://example.com/ || true\necho '{}'\n", "reach the network"),
        ("yes aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n", "printed more than"),
        ("head -c 6000000 /dev/zero | tr '\\0' 'a' > \"$ITBENCH_EVIDENCE\"\n", "larger than"),
    ],
)
def test_a_collection_that_overreaches_fails_with_its_reason(script: str, reason: str) -> None:
    module = solutions.rego_module(solutions.REGO_K8S["role-wildcard"])
    collection = EvidenceCollection(kind=CollectionKind.SCRIPT, content=script)
    scores = _score(
        "ciso-opa-role-wildcard", ComplianceSubmission(rego=module, collection=collection)
    )
    assert not scores.passed
    assert "ArtefactFailed: CollectionFailed" in scores.reason
    assert reason in scores.reason
