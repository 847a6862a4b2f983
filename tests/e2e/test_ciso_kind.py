"""End to end on kind: CISO policies evaluated by the real Kyverno of the pinned stack
(`make stack-up`). A scenario's trial variant is provisioned in a fresh namespace, the platform
installs its audit copy of the policy, Kyverno's PolicyReports decide the posture on both
variants, and nothing of the evaluation is left afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from agents.ciso_reference import solutions
from itbench.ciso import reports as rp
from itbench.ciso.cluster import (
    COUNTERPART_PREFIX,
    LiveEvaluator,
    Rest,
    apply_manifests,
    variant_manifests,
)
from itbench.core.ciso.posture import score_compliance
from itbench.core.models.compliance import ComplianceSubmission
from itbench.core.models.scenario import Scenario
from tests.integration.ciso_sample import ciso_instance

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_SECONDS = 240.0


def pattern_policy(pattern_value: bool | None) -> dict[str, Any]:
    """A pattern-style ClusterPolicy on hostNetwork (live-only in the twin); None: the right
    check, True/False: a fixed answer."""
    pattern: dict[str, Any] = (
        {"spec": {"=(hostNetwork)": False}}
        if pattern_value is None
        else {"metadata": {"name": "*"} if pattern_value else {"name": "?*-never-*"}}
    )
    return {
        "apiVersion": "kyverno.io/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": "disallow-host-network"},
        "spec": {
            "rules": [
                {
                    "name": "host-network",
                    "match": {"any": [{"resources": {"kinds": ["Pod"]}}]},
                    "validate": {"message": "no host network", "pattern": pattern},
                }
            ]
        },
    }


_instance = ciso_instance


@pytest.fixture(scope="module")
def rest() -> Iterator[Rest]:
    kubernetes = pytest.importorskip("kubernetes")
    kubernetes.config.load_kube_config()
    client = kubernetes.client.ApiClient()
    try:
        yield Rest(client)
    finally:
        client.close()


@pytest.fixture
def namespace(rest: Rest) -> Iterator[str]:
    name = f"itbench-e2e-ciso-{uuid.uuid4().hex[:6]}"
    yield name
    rest.call("DELETE", f"/api/v1/namespaces/{name}")


def _evaluate(
    rest: Rest, namespace: str, scenario: Scenario, submission: ComplianceSubmission
) -> Any:
    apply_manifests(rest, variant_manifests(scenario, namespace))
    evaluator = LiveEvaluator(rest, namespace, timeout_seconds=TIMEOUT_SECONDS)
    evaluation = evaluator.evaluate(scenario, submission)
    left = [
        p["metadata"]["name"]
        for p in rest.items("/apis/kyverno.io/v1/clusterpolicies")
        + rest.items("/apis/policies.kyverno.io/v1/validatingpolicies")
        if (p["metadata"].get("labels") or {}).get(rp.MANAGED_LABEL) == evaluator.token
    ]
    assert left == [], f"the evaluation left {left} installed"
    gone = rest.call("GET", f"/api/v1/namespaces/{evaluator.counterpart_namespace}")
    assert gone is None or gone["metadata"].get("deletionTimestamp"), "counterpart kept"
    assert evaluator.counterpart_namespace.startswith(COUNTERPART_PREFIX)
    return evaluation, score_compliance(evaluation, scenario, ttp=1.0)


@pytest.mark.e2e
@pytest.mark.parametrize("state", ["compliant", "noncompliant"])
def test_kyverno_reports_score_a_pattern_policy_on_both_variants(
    rest: Rest, namespace: str, state: str
) -> None:
    scenario = _instance("ciso-kyverno-host-network", state)
    submission = ComplianceSubmission(kyverno=yaml.safe_dump(pattern_policy(None)))
    evaluation, scores = _evaluate(rest, namespace, scenario, submission)
    assert scores.passed, scores.reason
    assert [v.engine for v in evaluation.variants] == ["kyverno", "kyverno"]


@pytest.mark.e2e
@pytest.mark.parametrize("fixed", [True, False])
def test_a_fixed_answer_fails_on_one_variant_under_kyverno(
    rest: Rest, namespace: str, fixed: bool
) -> None:
    scenario = _instance("ciso-kyverno-host-network", "noncompliant")
    submission = ComplianceSubmission(kyverno=yaml.safe_dump(pattern_policy(fixed)))
    _evaluation, scores = _evaluate(rest, namespace, scenario, submission)
    assert not scores.passed
    assert "WrongPosture" in scores.reason or "WrongOnCounterpart" in scores.reason


@pytest.mark.e2e
def test_the_reference_validating_policy_passes_under_kyverno(rest: Rest, namespace: str) -> None:
    scenario = _instance("ciso-kyverno-host-network", "noncompliant")
    policy = solutions.validating_policy("cis-host-network", solutions.CEL["host-network"], "no")
    submission = ComplianceSubmission(kyverno=yaml.safe_dump(policy))
    _evaluation, scores = _evaluate(rest, namespace, scenario, submission)
    assert scores.passed, scores.reason


@pytest.mark.e2e
def test_a_policy_kyverno_rejects_fails_with_its_webhooks_message(
    rest: Rest, namespace: str
) -> None:
    scenario = _instance("ciso-kyverno-host-network", "compliant")
    broken = pattern_policy(None)
    broken["spec"]["rules"][0]["validate"]["anyPattern"] = [{"spec": {}}]  # pattern and anyPattern
    submission = ComplianceSubmission(kyverno=yaml.safe_dump(broken))
    _evaluation, scores = _evaluate(rest, namespace, scenario, submission)
    assert not scores.passed
    assert "InvalidPolicy: the cluster refused ClusterPolicy/disallow-host-network" in scores.reason
    assert "only one of pattern, anyPattern" in scores.reason
