"""CISO evaluation on a live cluster, through the real client against the loopback API: the
platform installs its copy of the agent's policy, waits for PolicyReports, reads them, and
removes what it made, also when Kyverno never reports or refuses the policy.

No Kyverno runs here: `ReportsController` plays the part of Kyverno's reports controller for
the platform's ClusterPolicies and ValidatingPolicies (marks each ready and writes one
PolicyReport per Deployment of the namespaces it matches, in Kyverno v1.19.0's shape). It judges
hostNetwork itself, whatever the policy says, so these tests prove the plumbing, not a policy's
meaning; the `e2e` test in tests/e2e/test_ciso_kind.py runs the real Kyverno. The loopback API
runs no controllers, so no Deployment has Pods: the stand-in reports on Deployments, as Kyverno's
autogen rules do, where Kyverno would report on the Pods too. It does not admit or refuse
policies either: `RefusingRest` answers as Kyverno's policy webhook does. The Kyverno CRDs served
are the pinned ones (tests/fixtures/kyverno).
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml
from operator_lab import Cluster

from agents.ciso_reference import solutions
from itbench.catalog_files import load_variants
from itbench.ciso import reports as rp
from itbench.ciso import sandbox
from itbench.ciso.cluster import (
    COUNTERPART_PREFIX,
    LiveEvaluator,
    RefusedError,
    Rest,
    apply_manifests,
    variant_manifests,
)
from itbench.core.ciso.posture import score_compliance
from itbench.core.models.compliance import (
    CollectionKind,
    ComplianceEvaluation,
    ComplianceSubmission,
    EvidenceCollection,
)
from itbench.core.models.scenario import Scenario
from tests.integration.ciso_sample import ciso_instance

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "kyverno"
NAMESPACE = "otel-demo"
TIMEOUT = 30.0

HOST_NETWORK_POLICY = {
    "apiVersion": "kyverno.io/v1",
    "kind": "ClusterPolicy",
    "metadata": {"name": "disallow-host-network"},
    "spec": {
        "validationFailureAction": "Enforce",
        "rules": [
            {
                "name": "host-network",
                "match": {"any": [{"resources": {"kinds": ["Pod"]}}]},
                "validate": {
                    "message": "Pods must not use the host network",
                    "pattern": {"spec": {"=(hostNetwork)": False}},
                },
            }
        ],
    },
}


def _crd(group: str, kind: str, plural: str, scope: str, versions: list[str]) -> dict[str, Any]:
    schemas = json.loads(gzip.decompress((FIXTURES / "policy-schemas.json.gz").read_bytes()))
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
            "scope": scope,
            "versions": [
                {
                    "name": v,
                    "served": True,
                    "storage": n == 0,
                    "schema": {"openAPIV3Schema": schemas[f"{group}/{v}/{kind}"]},
                    "subresources": {"status": {}},
                }
                for n, v in enumerate(versions)
            ],
        },
    }


def kyverno_crds() -> list[dict[str, Any]]:
    """The CRDs of Kyverno's policies and of the PolicyReports it writes (pinned schemas)."""
    out = [
        yaml.safe_load((FIXTURES / f"wgpolicyk8s.io_{plural}.yaml").read_text(encoding="utf-8"))
        for plural in ("policyreports", "clusterpolicyreports")
    ]
    out.append(_crd("kyverno.io", "ClusterPolicy", "clusterpolicies", "Cluster", ["v1"]))
    out.append(
        _crd("policies.kyverno.io", "ValidatingPolicy", "validatingpolicies", "Cluster", ["v1"])
    )
    return out


def _install_kyverno_crds(cluster: Cluster) -> None:
    for crd in kyverno_crds():
        cluster.server.install_crd(crd)


@dataclass
class ReportsController:
    """Kyverno's part, one reconcile per call, for the platform's ClusterPolicies and
    ValidatingPolicies."""

    rest: Rest
    runs: int = 0
    reported: set[str] = field(default_factory=set)

    def __call__(self, _seconds: float) -> None:
        self.runs += 1
        for policy in self.rest.items("/apis/kyverno.io/v1/clusterpolicies"):
            name = policy["metadata"]["name"]
            self.rest.call(
                "PATCH",
                f"/apis/kyverno.io/v1/clusterpolicies/{name}/status",
                {
                    "status": {
                        "conditions": [
                            {
                                "type": "Ready",
                                "status": "True",
                                "reason": "Succeeded",
                                "message": "Ready",
                                "lastTransitionTime": "2026-01-01T00:00:00Z",
                            }
                        ]
                    }
                },
            )
            rule = policy["spec"]["rules"][0]
            for namespace in rule["match"]["any"][0]["resources"]["namespaces"]:
                for deployment in self.rest.items(
                    f"/apis/apps/v1/namespaces/{namespace}/deployments"
                ):
                    self._report(name, rule["name"], deployment)
        for policy in self.rest.items("/apis/policies.kyverno.io/v1/validatingpolicies"):
            name = policy["metadata"]["name"]
            ready = {
                "ready": True,
                "conditions": [
                    {
                        "type": "RBACPermissionsGranted",
                        "status": "True",
                        "reason": "Succeeded",
                        "message": "Policy is ready for reporting.",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    }
                ],
            }
            self.rest.call(
                "PATCH",
                f"/apis/policies.kyverno.io/v1/validatingpolicies/{name}/status",
                {"status": {"conditionStatus": ready}},
            )
            selector = policy["spec"]["matchConstraints"]["namespaceSelector"]
            [scope] = [e for e in selector["matchExpressions"] if e["key"] == rp.NAME_LABEL]
            for namespace in scope["values"]:
                for deployment in self.rest.items(
                    f"/apis/apps/v1/namespaces/{namespace}/deployments"
                ):
                    self._report(name, "", deployment, source="KyvernoValidatingPolicy")

    def _report(
        self, policy: str, rule: str, deployment: dict[str, Any], source: str = "kyverno"
    ) -> None:
        meta = deployment["metadata"]
        host = (deployment["spec"]["template"]["spec"]).get("hostNetwork") is True
        result, verb = ("fail", "failed") if host else ("pass", "passed")
        ref = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta["uid"],
        }
        report = {
            "apiVersion": "wgpolicyk8s.io/v1alpha2",
            "kind": "PolicyReport",
            "metadata": {
                "name": meta["uid"],
                "namespace": meta["namespace"],
                "labels": {"app.kubernetes.io/managed-by": "kyverno"},
                "ownerReferences": [{k: ref[k] for k in ("apiVersion", "kind", "name", "uid")}],
            },
            "scope": ref,
            "results": [
                {
                    "source": source,
                    "policy": policy,
                    **({"rule": f"autogen-{rule}"} if rule else {}),
                    "result": result,
                    "message": f"validation rule 'autogen-{rule}' {verb}.",
                    "scored": True,
                    "properties": {"process": "background scan"},
                    "timestamp": {"seconds": 1767225600, "nanos": 0},
                }
            ],
            "summary": {"pass": int(not host), "fail": int(host), "warn": 0, "error": 0, "skip": 0},
        }
        path = f"/apis/wgpolicyk8s.io/v1alpha2/namespaces/{meta['namespace']}/policyreports"
        if self.rest.call("GET", f"{path}/{meta['uid']}") is None:
            self.rest.call("POST", path, report)
        else:
            self.rest.call("PATCH", f"{path}/{meta['uid']}", {"results": report["results"]})
        self.reported.add(f"{meta['namespace']}/Deployment/{meta['name']}")


@dataclass
class FakeClock:
    """Monotonic time that moves only when the evaluator waits."""

    now: float = 0.0

    def __call__(self) -> float:
        return self.now


class RefusingRest(Rest):
    """The API as Kyverno's policy webhook answers a policy it rejects (the webhook's name from
    upstream pkg/config/config.go, the message from pkg/policy/validate/validate.go)."""

    def call(self, method: str, path: str, body: Any = None, **kwargs: Any) -> Any:
        if method == "POST" and path.endswith("/clusterpolicies"):
            raise RefusedError(
                '400 admission webhook "validate-policy.kyverno.svc" denied the request: '
                "only one of pattern, anyPattern, deny, foreach, cel can be specified"
            )
        return super().call(method, path, body, **kwargs)


_instance = ciso_instance


@pytest.fixture
def rest(cluster: Cluster) -> Rest:
    _install_kyverno_crds(cluster)
    api = kubernetes.config.new_client_from_config(config_file=str(cluster.kubeconfig))
    return Rest(api)


def _provision(rest: Rest, scenario: Scenario) -> None:
    """The trial's namespace as the stack would leave it: the variant's objects."""
    apply_manifests(rest, variant_manifests(scenario, NAMESPACE))


def _evaluator(rest: Rest, sleep: Any, clock: FakeClock, timeout: float = TIMEOUT) -> LiveEvaluator:
    def wait(seconds: float) -> None:
        clock.now += seconds
        sleep(seconds)

    return LiveEvaluator(
        rest,
        NAMESPACE,
        timeout_seconds=timeout,
        poll_seconds=2.0,
        sleep=wait,
        monotonic=clock,
        salt="t",
    )


def _leftovers(rest: Rest) -> list[str]:
    policies = [p["metadata"]["name"] for p in rest.items("/apis/kyverno.io/v1/clusterpolicies")]
    namespaces = [
        n["metadata"]["name"]
        for n in rest.items("/api/v1/namespaces")
        if n["metadata"]["name"].startswith(COUNTERPART_PREFIX)
    ]
    return policies + namespaces


def _submission(doc: dict[str, Any]) -> ComplianceSubmission:
    return ComplianceSubmission(kyverno=yaml.safe_dump(doc))


@pytest.mark.parametrize("state", ["compliant", "noncompliant"])
def test_a_pattern_policy_is_scored_on_kyvernos_reports_for_both_variants(
    rest: Rest, state: str
) -> None:
    scenario = _instance("ciso-kyverno-host-network", state)
    _provision(rest, scenario)
    before = rest.items(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments")
    kyverno = ReportsController(rest)
    evaluator = _evaluator(rest, kyverno, FakeClock())
    evaluation = evaluator.evaluate(scenario, _submission(HOST_NETWORK_POLICY))
    scores = score_compliance(evaluation, scenario, ttp=1.0)
    assert scores.passed, scores.reason
    assert scores.counterpart_passed is True
    assert [v.engine for v in evaluation.variants] == ["kyverno", "kyverno"]
    # Both namespaces were reported on: the trial's and the counterpart built from the scenario.
    counterpart = evaluator.counterpart_namespace
    assert f"{NAMESPACE}/Deployment/frontend" in kyverno.reported
    assert f"{counterpart}/Deployment/frontend" in kyverno.reported
    # Nothing of the evaluation is left, and the trial's namespace is as it was.
    assert _leftovers(rest) == []
    after = rest.items(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments")
    assert [d["metadata"]["resourceVersion"] for d in after] == [
        d["metadata"]["resourceVersion"] for d in before
    ]


def test_the_policy_installed_is_the_platforms_audit_copy_not_the_agents(rest: Rest) -> None:
    scenario = _instance("ciso-kyverno-host-network", "noncompliant")
    _provision(rest, scenario)
    seen: list[dict[str, Any]] = []

    def kyverno(_seconds: float) -> None:
        seen.extend(rest.items("/apis/kyverno.io/v1/clusterpolicies"))

    _evaluator(rest, kyverno, FakeClock(), timeout=4.0).evaluate(
        scenario, _submission(HOST_NETWORK_POLICY)
    )
    assert seen, "the policy was never installed"
    policy = seen[0]
    assert policy["metadata"]["name"] == rp.platform_name(rp.evaluation_token(NAMESPACE, "t"), 0)
    assert policy["spec"]["background"] is True
    assert policy["spec"]["rules"][0]["validate"]["failureAction"] == "Audit"
    assert policy["spec"]["rules"][0]["match"]["any"][0]["resources"]["namespaces"] == [
        NAMESPACE,
        f"{COUNTERPART_PREFIX}{rp.evaluation_token(NAMESPACE, 't')}",
    ]
    assert not any(p["metadata"]["name"] == "disallow-host-network" for p in seen)


def test_no_report_within_the_time_limit_fails_with_that_reason_and_cleans_up(rest: Rest) -> None:
    scenario = _instance("ciso-kyverno-host-network", "compliant")
    _provision(rest, scenario)
    clock = FakeClock()
    evaluation = _evaluator(rest, lambda _s: None, clock, timeout=10.0).evaluate(
        scenario, _submission(HOST_NETWORK_POLICY)
    )
    scores = score_compliance(evaluation, scenario, ttp=1.0)
    assert not scores.passed
    assert "NoReport: Kyverno wrote no PolicyReport result" in scores.reason
    assert "within 10 s" in scores.reason and "not ready" in scores.reason
    assert clock.now >= 10.0
    assert not evaluation.platform_error
    assert _leftovers(rest) == []


def test_a_policy_kyverno_refuses_fails_with_kyvernos_message_and_nothing_stays(rest: Rest) -> None:
    scenario = _instance("ciso-kyverno-host-network", "compliant")
    _provision(rest, scenario)
    refusing = RefusingRest(rest.api)
    evaluation = _evaluator(refusing, lambda _s: None, FakeClock()).evaluate(
        scenario, _submission(HOST_NETWORK_POLICY)
    )
    scores = score_compliance(evaluation, scenario, ttp=1.0)
    assert not scores.passed
    assert "InvalidPolicy: the cluster refused ClusterPolicy/disallow-host-network" in scores.reason
    assert "validate-policy.kyverno.svc" in scores.reason
    assert _leftovers(rest) == []


def test_invalid_yaml_is_refused_before_anything_is_created(rest: Rest) -> None:
    scenario = _instance("ciso-kyverno-host-network", "compliant")
    _provision(rest, scenario)
    namespaces = len(rest.items("/api/v1/namespaces"))
    evaluation = _evaluator(rest, lambda _s: None, FakeClock()).evaluate(
        scenario, ComplianceSubmission(kyverno="a: [1, 2\nb: c")
    )
    assert evaluation.problem.startswith("InvalidYAML")
    assert len(rest.items("/api/v1/namespaces")) == namespaces


def test_an_unreachable_cluster_is_the_platforms_failure(tmp_path: Path, rest: Rest) -> None:
    scenario = _instance("ciso-kyverno-host-network", "compliant")
    config = kubernetes.client.Configuration()
    config.host = "http://127.0.0.1:9"
    down = Rest(kubernetes.client.ApiClient(config))
    evaluation = _evaluator(down, lambda _s: None, FakeClock()).evaluate(
        scenario, _submission(HOST_NETWORK_POLICY)
    )
    assert evaluation.platform_error
    assert evaluation.problem.startswith("ClusterFailed:")
    assert "unreachable" in evaluation.problem
    assert score_compliance(evaluation, scenario, ttp=1.0).reason.startswith("PlatformError:")


NEEDS_SANDBOX = pytest.mark.skipif(
    bool(sandbox.sandbox_problem()), reason=f"no evidence sandbox: {sandbox.sandbox_problem()}"
)
K8S_OPA = sorted(
    p.parent.name for p in (ROOT / "scenarios" / "ciso").glob("ciso-opa-*/scenario.yaml")
)


def _rego_submission(scenario: Scenario, rules: str | None = None) -> ComplianceSubmission:
    setting = next(str(f.args["setting"]) for f in scenario.spec.faults if f.id == "ciso.setting")
    return ComplianceSubmission(
        rego=solutions.rego_module(rules if rules is not None else solutions.REGO_K8S[setting]),
        collection=EvidenceCollection(
            kind=CollectionKind.SCRIPT, content=solutions.k8s_collection(NAMESPACE)
        ),
    )


@NEEDS_SANDBOX
@pytest.mark.parametrize("name", K8S_OPA)
def test_every_k8s_opa_reference_passes_on_evidence_from_the_live_objects(
    rest: Rest, name: str
) -> None:
    variants, problems = load_variants(ROOT / "scenarios" / "ciso" / name / "scenario.yaml")
    assert variants is not None, problems
    scenario = variants.instances[0].scenario
    _provision(rest, scenario)
    evaluation = _evaluator(rest, lambda _s: None, FakeClock()).evaluate(
        scenario, _rego_submission(scenario)
    )
    scores = score_compliance(evaluation, scenario, ttp=1.0)
    assert scores.passed, scores.reason
    assert _leftovers(rest) == []


@NEEDS_SANDBOX
def test_an_always_compliant_rego_answer_fails_on_the_live_cluster(rest: Rest) -> None:
    scenario = _instance("ciso-opa-role-wildcard", "compliant")
    _provision(rest, scenario)
    submission = _rego_submission(scenario, "violations := set()\n")
    evaluation = _evaluator(rest, lambda _s: None, FakeClock()).evaluate(scenario, submission)
    scores = score_compliance(evaluation, scenario, ttp=1.0)
    assert not scores.passed
    assert "WrongOnCounterpart" in scores.reason


@NEEDS_SANDBOX
def test_a_rego_that_does_not_compile_or_fails_and_a_failing_collection_are_named(
    rest: Rest,
) -> None:
    scenario = _instance("ciso-opa-role-wildcard", "noncompliant")
    _provision(rest, scenario)
    evaluator = _evaluator(rest, lambda _s: None, FakeClock())
    broken = _rego_submission(scenario, "violations contains x if {\n")
    evaluation = evaluator.evaluate(scenario, broken)
    assert evaluation.problem.startswith("RegoCompile:") and evaluation.variants == []
    assert not score_compliance(evaluation, scenario, ttp=1.0).passed
    # Compiles, fails when evaluated: a complete rule with two values.
    conflicting = _rego_submission(
        scenario, "compliant := true if { true }\ncompliant := false if { true }\n"
    )
    evaluation = _evaluator(rest, lambda _s: None, FakeClock()).evaluate(scenario, conflicting)
    assert [v.problem.split(":")[0] for v in evaluation.variants] == ["RegoFailed", "RegoFailed"]
    assert all(v.verdicts == [] for v in evaluation.variants)
    assert not score_compliance(evaluation, scenario, ttp=1.0).passed
    failing = _rego_submission(scenario).model_copy(
        update={"collection": EvidenceCollection(kind=CollectionKind.SCRIPT, content="exit 3\n")}
    )
    evaluation = _evaluator(rest, lambda _s: None, FakeClock()).evaluate(scenario, failing)
    assert [v.problem.split(":")[0] for v in evaluation.variants] == [
        "CollectionFailed",
        "CollectionFailed",
    ]
    assert not score_compliance(evaluation, scenario, ttp=1.0).passed
    assert _leftovers(rest) == []


@NEEDS_SANDBOX
def test_rego_is_evaluated_on_evidence_collected_from_the_live_objects(rest: Rest) -> None:
    scenario = _instance("ciso-opa-role-wildcard", "noncompliant")
    _provision(rest, scenario)
    submission = _rego_submission(scenario)
    evaluation: ComplianceEvaluation = _evaluator(rest, lambda _s: None, FakeClock()).evaluate(
        scenario, submission
    )
    scores = score_compliance(evaluation, scenario, ttp=1.0)
    assert scores.passed, scores.reason
    assert [v.engine for v in evaluation.variants] == ["regorus", "regorus"]
    assert all(v.evidence_bytes > 0 for v in evaluation.variants)
    assert _leftovers(rest) == []


def test_a_cluster_trials_artefacts_are_evaluated_live_and_a_twins_in_the_twin(
    cluster: Cluster, rest: Rest
) -> None:
    from itbench.ciso.cluster import cluster_of, evaluate_on
    from itbench.environments.kube.environment import ClusterEnvironment
    from itbench.environments.sim.twins import twin_for

    scenario = _instance("ciso-kyverno-host-network", "noncompliant")
    _provision(rest, scenario)
    env = ClusterEnvironment(kubeconfig=cluster.kubeconfig, namespace=NAMESPACE)
    twin = twin_for(scenario)
    try:
        assert cluster_of(env) == (cluster.kubeconfig, NAMESPACE)
        assert cluster_of(twin) is None
        clock = FakeClock()
        kyverno = ReportsController(rest)

        def wait(seconds: float) -> None:
            clock.now += seconds
            kyverno(seconds)

        live = evaluate_on(
            env, scenario, _submission(HOST_NETWORK_POLICY), sleep=wait, monotonic=clock
        )
        assert [v.engine for v in live.variants] == ["kyverno", "kyverno"]
        assert score_compliance(live, scenario, ttp=1.0).passed
        # The same pattern policy in the twin: live-only, as the twin reports it.
        in_twin = evaluate_on(twin, scenario, _submission(HOST_NETWORK_POLICY))
        assert in_twin.live_only
        assert _leftovers(rest) == []
    finally:
        env.close()


def test_an_evaluator_evaluates_once_so_its_names_never_repeat(rest: Rest) -> None:
    scenario = _instance("ciso-kyverno-host-network", "compliant")
    evaluator = _evaluator(rest, lambda _s: None, FakeClock())
    evaluator.evaluate(scenario, ComplianceSubmission(kyverno="a: [1, 2\nb: c"))
    with pytest.raises(RuntimeError, match="evaluates once"):
        evaluator.evaluate(scenario, ComplianceSubmission(kyverno="a: [1, 2\nb: c"))
    other = _evaluator(rest, lambda _s: None, FakeClock())
    assert LiveEvaluator(rest, NAMESPACE).token != LiveEvaluator(rest, NAMESPACE).token
    assert other.token == evaluator.token  # the tests' fixed salt


def test_a_validating_policy_is_scored_on_its_reports_once_kyverno_says_it_is_ready(
    rest: Rest,
) -> None:
    scenario = _instance("ciso-kyverno-host-network", "noncompliant")
    _provision(rest, scenario)
    policy = solutions.validating_policy("cis-host-network", solutions.CEL["host-network"], "no")
    kyverno = ReportsController(rest)
    evaluation = _evaluator(rest, kyverno, FakeClock()).evaluate(scenario, _submission(policy))
    scores = score_compliance(evaluation, scenario, ttp=1.0)
    assert scores.passed, scores.reason
    assert f"{NAMESPACE}/Deployment/cart" in kyverno.reported
    assert rest.items("/apis/policies.kyverno.io/v1/validatingpolicies") == []
