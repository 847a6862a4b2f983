"""Live CISO evaluation as data: Kyverno's PolicyReports (shaped as Kyverno v1.19.0 writes them,
`tests/fixtures/kyverno/README.md`) mapped to the posture, and the platform's copies of a
submitted policy checked against the pinned CRD schemas and Kubernetes' own."""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from agents.ciso_reference import solutions
from itbench.catalog_files import load_variants
from itbench.ciso import reports as rp
from itbench.ciso.cluster import HOLD_LABEL, variant_manifests
from itbench.core.models.compliance import VerdictResult
from itbench.core.models.scenario import Scenario

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "kyverno"
ROOT = Path(__file__).resolve().parents[3] / "scenarios" / "ciso"
K8S_VERSION = "1.33"
NAMESPACES = ["otel-demo", "itbench-ciso-abc"]


def _reports() -> list[dict[str, Any]]:
    return list(yaml.safe_load_all((FIXTURES / "reports.yaml").read_text(encoding="utf-8")))


@cache
def _schemas() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        gzip.decompress((FIXTURES / "policy-schemas.json.gz").read_bytes())
    )
    for plural in ("policyreports", "clusterpolicyreports"):
        crd = yaml.safe_load(
            (FIXTURES / f"wgpolicyk8s.io_{plural}.yaml").read_text(encoding="utf-8")
        )
        for version in crd["spec"]["versions"]:
            key = f"{crd['spec']['group']}/{version['name']}/{crd['spec']['names']['kind']}"
            data[key] = version["schema"]["openAPIV3Schema"]
    return data


def _pruned(value: Any, schema: dict[str, Any], path: str) -> list[str]:
    """The fields of value the API server would prune: not in a structural schema's properties."""
    if schema.get("x-kubernetes-preserve-unknown-fields") or not isinstance(value, (dict, list)):
        return []
    if isinstance(value, list):
        items = schema.get("items") or {}
        return [p for n, v in enumerate(value) for p in _pruned(v, items, f"{path}[{n}]")]
    props = schema.get("properties")
    if props is None:
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            return [p for k, v in value.items() for p in _pruned(v, extra, f"{path}.{k}")]
        return []
    out = []
    for key, item in value.items():
        if key not in props:
            out.append(f"{path}.{key}")
        else:
            out += _pruned(item, props[key], f"{path}.{key}")
    return out


def _check_crd(body: dict[str, Any]) -> None:
    """Validate against the pinned CRD's schema: types, enums, required fields, and no field
    the API server would prune (metadata is the API server's own)."""
    schema = _schemas()[f"{body['apiVersion']}/{body['kind']}"]
    jsonschema.validate(body, schema)
    rest = {k: v for k, v in body.items() if k != "metadata"}
    assert _pruned(rest, schema, "") == []


def _policy(source: str, name: str) -> rp.PlatformPolicy:
    return rp.PlatformPolicy("g", "v1", "x", "K", name, {}, source, "", "K/" + name)


def _instance(name: str) -> Scenario:
    variants, problems = load_variants(ROOT / name / "scenario.yaml")
    assert variants is not None, problems
    return variants.instances[0].scenario


# ---- reports → posture -------------------------------------------------------------------------
def test_the_fixture_reports_match_the_pinned_policyreport_crds() -> None:
    for report in _reports():
        _check_crd(report)
    assert {r["kind"] for r in _reports()} == {"PolicyReport", "ClusterPolicyReport"}


def test_a_validating_policy_fail_result_fails_the_reported_deployment() -> None:
    results = rp.report_results(
        _reports(), [_policy(rp.SOURCE_VALIDATING_POLICY, "vpol-report-background-sample")]
    )
    assert [(r.namespace, r.target, r.verdict.result) for r in results] == [
        ("otel-demo", "Deployment/test-deployment-vpol-background", VerdictResult.FAIL)
    ]
    assert "found env=staging" in results[0].verdict.detail


def test_results_of_other_sources_with_the_same_policy_name_are_not_counted() -> None:
    reports = _reports()[1:2]
    vpol = rp.report_results(
        reports, [_policy(rp.SOURCE_VALIDATING_POLICY, "report-background-sample")]
    )
    vap = rp.report_results(
        reports, [_policy(rp.SOURCE_ADMISSION_POLICY, "report-background-sample")]
    )
    cpol = rp.report_results(reports, [_policy(rp.SOURCE_KYVERNO, "report-background-sample")])
    assert [r.verdict.result for r in vpol] == [VerdictResult.PASS]
    assert [r.verdict.result for r in vap] == [VerdictResult.PASS]
    assert cpol == []


def test_a_cluster_policy_rule_failure_names_the_rule_and_rolls_up_to_the_owner() -> None:
    results = rp.report_results(
        _reports(), [_policy(rp.SOURCE_KYVERNO, "podsecurity-subrule-restricted")]
    )
    by_target = {r.target: r for r in results}
    assert by_target["Pod/badpod01"].verdict.result == VerdictResult.FAIL
    assert by_target["Pod/badpod01"].verdict.detail.startswith("restricted: Validation rule")
    assert by_target["Namespace/otel-demo"].namespace == "otel-demo"
    owners = {"Pod/badpod01": "Deployment/bad"}
    assert rp.uncovered(["Deployment/bad", "Deployment/other"], results, owners) == [
        "Deployment/other"
    ]


def test_a_namespaced_policy_result_is_matched_by_its_name() -> None:
    report = _reports()[2]
    report["results"][0]["policy"] = "otel-demo/podsecurity-subrule-restricted"
    results = rp.report_results(
        [report], [_policy(rp.SOURCE_KYVERNO, "podsecurity-subrule-restricted")]
    )
    assert [r.target for r in results] == ["Pod/badpod01"]


@pytest.mark.parametrize(
    ("result", "verdict"),
    [
        ("pass", VerdictResult.PASS),
        ("fail", VerdictResult.FAIL),
        ("warn", VerdictResult.FAIL),
        ("error", VerdictResult.ERROR),
        ("skip", VerdictResult.PASS),
    ],
)
def test_every_kyverno_result_value_maps_to_a_verdict(result: str, verdict: VerdictResult) -> None:
    report = _reports()[0]
    report["results"][0]["result"] = result
    _check_crd(report)
    found = rp.report_results(
        [report], [_policy(rp.SOURCE_VALIDATING_POLICY, "vpol-report-background-sample")]
    )
    assert [r.verdict.result for r in found] == [verdict]


def test_owners_follow_pods_through_replicasets_to_deployments() -> None:
    objects = [
        {
            "kind": "Pod",
            "metadata": {
                "name": "p",
                "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "controller": True}],
            },
        },
        {
            "kind": "ReplicaSet",
            "metadata": {
                "name": "rs",
                "ownerReferences": [{"kind": "Deployment", "name": "d", "controller": True}],
            },
        },
        {"kind": "Deployment", "metadata": {"name": "d"}},
    ]
    assert rp.owners_of(objects) == {"Pod/p": "Deployment/d", "ReplicaSet/rs": "Deployment/d"}


def test_readiness_reads_each_kinds_status() -> None:
    cpol = rp.PlatformPolicy(
        "kyverno.io", "v1", "clusterpolicies", "ClusterPolicy", "n", {}, "kyverno", "conditions", ""
    )
    vpol = rp.PlatformPolicy(
        "policies.kyverno.io",
        "v1",
        "validatingpolicies",
        "ValidatingPolicy",
        "n",
        {},
        rp.SOURCE_VALIDATING_POLICY,
        "conditionStatus",
        "",
    )
    ready_cpol = {
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "Succeeded", "message": "Ready"}
            ]
        }
    }
    not_ready = {
        "status": {"conditions": [{"type": "Ready", "status": "False", "message": "rule x: bad"}]}
    }
    ready_vpol = {
        "status": {
            "conditionStatus": {
                "ready": True,
                "conditions": [
                    {
                        "type": "RBACPermissionsGranted",
                        "status": "True",
                        "message": "Policy is ready for reporting.",
                    }
                ],
            }
        }
    }
    assert rp.policy_ready(cpol, ready_cpol) == (True, "")
    assert rp.policy_ready(cpol, not_ready) == (False, "Ready: rule x: bad")
    assert rp.policy_ready(cpol, None) == (False, "")
    assert rp.policy_ready(vpol, ready_vpol) == (True, "")


# ---- the platform's copies of a policy ---------------------------------------------------------
PATTERN_POLICY: dict[str, Any] = {
    "apiVersion": "kyverno.io/v1",
    "kind": "Policy",
    "metadata": {"name": "no-host-network", "namespace": "otel-demo"},
    "spec": {
        "validationFailureAction": "Enforce",
        "rules": [
            {
                "name": "host-network",
                "match": {"any": [{"resources": {"kinds": ["Pod"]}}]},
                "validate": {
                    "failureAction": "Enforce",
                    "message": "no host network",
                    "pattern": {"spec": {"=(hostNetwork)": False}},
                },
            },
            {
                "name": "add-label",
                "match": {"resources": {"kinds": ["Pod"]}},
                "mutate": {"patchStrategicMerge": {"metadata": {"labels": {"x": "y"}}}},
            },
            {
                "name": "elsewhere",
                "match": {"all": [{"resources": {"kinds": ["Pod"], "namespaces": ["prod-*"]}}]},
                "validate": {"message": "m", "deny": {}},
            },
        ],
    },
}


def test_a_pattern_policy_becomes_an_audit_cluster_policy_scoped_to_the_namespaces() -> None:
    [policy] = rp.platform_policies([PATTERN_POLICY], NAMESPACES, "tok")
    body = policy.body
    _check_crd(body)
    assert (policy.kind, policy.name, policy.source) == (
        "ClusterPolicy",
        "itbench-ciso-tok-0",
        "kyverno",
    )
    assert body["metadata"] == {"name": "itbench-ciso-tok-0", "labels": {rp.MANAGED_LABEL: "tok"}}
    spec = body["spec"]
    assert spec["background"] is True and spec["admission"] is False
    assert "validationFailureAction" not in spec
    assert [r["name"] for r in spec["rules"]] == ["host-network", "elsewhere"]
    first, other = spec["rules"]
    assert first["validate"]["failureAction"] == "Audit"
    assert first["match"]["any"][0]["resources"]["namespaces"] == NAMESPACES
    # The author limited this rule to other namespaces: it stays matching none of ours.
    resources = other["match"]["all"][0]["resources"]
    assert resources["namespaceSelector"]["matchExpressions"][0]["operator"] == "DoesNotExist"


def test_a_legacy_match_resources_block_is_scoped_too() -> None:
    doc = {
        "apiVersion": "kyverno.io/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": "x"},
        "spec": {
            "rules": [
                {
                    "name": "r",
                    "match": {"resources": {"kinds": ["Deployment"], "namespaces": ["otel-*"]}},
                    "validate": {"message": "m", "pattern": {"spec": {"replicas": ">0"}}},
                }
            ]
        },
    }
    [policy] = rp.platform_policies([doc], NAMESPACES, "tok")
    _check_crd(policy.body)
    assert policy.body["spec"]["rules"][0]["match"]["resources"]["namespaces"] == ["otel-demo"]


def test_the_reference_validating_policy_is_audited_in_background_in_the_namespaces_only() -> None:
    doc = solutions.validating_policy("cis-check", solutions.CEL["host-network"], "not compliant")
    [policy] = rp.platform_policies([doc], NAMESPACES, "tok")
    _check_crd(policy.body)
    spec = policy.body["spec"]
    assert spec["validationActions"] == ["Audit"]
    assert spec["evaluation"]["background"] == {"enabled": True}
    assert spec["evaluation"]["admission"] == {"enabled": False}
    assert spec["matchConstraints"]["namespaceSelector"]["matchExpressions"][-1] == {
        "key": rp.NAME_LABEL,
        "operator": "In",
        "values": NAMESPACES,
    }
    assert spec["validations"] == doc["spec"]["validations"]
    assert policy.ready == "conditionStatus"


def test_an_admission_policy_and_its_binding_are_renamed_together_and_valid_for_kubernetes() -> (
    None
):
    vap = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "no-host-network"},
        "spec": {
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": ["apps"],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["deployments"],
                    }
                ]
            },
            "validations": [
                {
                    "expression": "!has(object.spec.template.spec.hostNetwork)"
                    " || !object.spec.template.spec.hostNetwork"
                }
            ],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "no-host-network"},
        "spec": {"policyName": "no-host-network", "validationActions": ["Deny"]},
    }
    made = rp.platform_policies([binding, vap], NAMESPACES, "tok")
    assert [(p.kind, p.name) for p in made] == [
        ("ValidatingAdmissionPolicy", "itbench-ciso-tok-0"),
        ("ValidatingAdmissionPolicyBinding", "itbench-ciso-tok-0-b0"),
    ]
    assert made[1].body["spec"]["policyName"] == "itbench-ciso-tok-0"
    assert made[1].body["spec"]["validationActions"] == ["Audit"]
    for p in made:
        kubernetes_validate.validate(p.body, K8S_VERSION, strict=True)


def test_a_document_no_live_engine_takes_is_refused_with_its_name() -> None:
    with pytest.raises(ValueError, match="ConfigMap/x: not a policy kind"):
        rp.platform_policies([{"kind": "ConfigMap", "metadata": {"name": "x"}}], NAMESPACES, "t")
    mutate_only = {
        "apiVersion": "kyverno.io/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": "m"},
        "spec": {"rules": [{"name": "r", "mutate": {}}]},
    }
    with pytest.raises(ValueError, match=r"ClusterPolicy/m: spec\.rules: no validate rule"):
        rp.platform_policies([mutate_only], NAMESPACES, "t")


def test_names_are_unique_per_evaluation_and_dns_labels() -> None:
    a = rp.evaluation_token("otel-demo", "one")
    b = rp.evaluation_token("otel-demo", "two")
    assert a != b and len(rp.platform_name(a, 99)) <= 63


def test_counterpart_manifests_are_valid_kubernetes_objects_whose_pods_never_run() -> None:
    manifests = variant_manifests(_instance("ciso-kyverno-host-network"), "itbench-ciso-abc")
    assert manifests[0]["kind"] == "Namespace"
    assert manifests[0]["metadata"]["labels"][rp.NAME_LABEL] == "itbench-ciso-abc"
    kinds = {m["kind"] for m in manifests}
    assert "Pod" not in kinds and "ReplicaSet" not in kinds and "ValidatingPolicy" not in kinds
    for m in manifests:
        kubernetes_validate.validate(m, K8S_VERSION, strict=True)
        if m["kind"] != "Namespace":
            assert m["metadata"]["namespace"] == "itbench-ciso-abc"
        if m["kind"] == "Deployment":
            assert m["spec"]["template"]["spec"]["nodeSelector"][HOLD_LABEL] == "true"


def test_kyvernos_reports_controller_may_read_every_rbac_kind_controls_assess() -> None:
    # The chart binds the reports controller to `view`, which reads no RBAC objects; without a
    # grant in the stack's values, controls on Roles and RoleBindings would never be reported.
    from itbench.core.ciso.namespace import TARGET_KINDS

    values = yaml.safe_load((ROOT.parents[1] / "itbench/stack/values/kyverno.yaml").read_text())
    grants = values["reportsController"]["rbac"]["clusterRole"]["extraResources"]
    granted = {
        (group, resource) for g in grants for group in g["apiGroups"] for resource in g["resources"]
    }
    rbac = [k for k in TARGET_KINDS if k in ("Role", "RoleBinding", "ClusterRole")]
    assert rbac
    for kind in rbac:
        assert ("rbac.authorization.k8s.io", f"{kind.lower()}s") in granted
