"""What the live CISO evaluator may do on a cluster the chart is installed on, proved on the
rendered chart (the RBAC evaluation of `test_chart_agent_limits`, and the chart's admission
policy on the evaluator's writes evaluated with a CEL engine).

The requests the evaluator makes are derived from `itbench.ciso.cluster`: the counterpart's
kinds, created (or merged) in an `itbench-ciso-` namespace, read in both namespaces; the
platform's policy copies, created, read and deleted; Kyverno's reports, read; and from
`itbench.ciso.host_pod`: the RHEL9 class's evidence objects (ConfigMap, NetworkPolicy, Pod),
created and deleted in that namespace, the Pod read and its log read. Its account may
make each of them, and no write outside the `itbench-ciso-` names; the agent and the injector
may make none of its writes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import celpy
import kubernetes_validate
import pytest

from itbench.ciso import host_pod
from itbench.ciso import reports as rp
from itbench.ciso.cluster import COUNTERPART_PREFIX, DERIVED_KINDS, KINDS
from itbench.core.ciso import host as host_model
from itbench.core.models.compliance import CollectionKind, EvidenceCollection
from tests.integration.test_chart import NAMESPACE, helm, one, render  # noqa: F401
from tests.integration.test_chart_agent_limits import (
    CLUSTER_AGENT,
    OPERATOR,
    PLATFORM_NS,
    SCENARIO_NS,
    Authorizer,
    Request,
)
from tests.integration.test_chart_injector_limits import INJECTOR, WRITES

EVALUATOR = (NAMESPACE, "itbench-ciso-evaluator")
COUNTERPART = f"{COUNTERPART_PREFIX}0123abcd"
POLICY = f"{COUNTERPART}-0"
POLICY_RESOURCES = [
    ("kyverno.io", "clusterpolicies"),
    ("policies.kyverno.io", "validatingpolicies"),
    ("admissionregistration.k8s.io", "validatingadmissionpolicies"),
    ("admissionregistration.k8s.io", "validatingadmissionpolicybindings"),
]


def evaluator_requests() -> list[Request]:
    """Every request a live evaluation makes (`LiveEvaluator`, `apply_manifests`,
    `read_objects`)."""
    out: list[Request] = []
    for kind, (group, _version, plural, namespaced) in KINDS.items():
        if not namespaced:
            continue
        for ns in (SCENARIO_NS, COUNTERPART):  # read_objects, _owners
            out.append(Request("list", plural, group, ns))
        if kind not in DERIVED_KINDS:  # apply_manifests: create, or merge onto what exists
            out += [Request(v, plural, group, COUNTERPART) for v in ("create", "patch")]
    out += [
        Request("create", "namespaces", "", None, COUNTERPART),
        Request("patch", "namespaces", "", None, COUNTERPART),
        Request("get", "namespaces", "", None, COUNTERPART),
        Request("get", "namespaces", "", None, SCENARIO_NS),
        Request("delete", "namespaces", "", None, COUNTERPART),
    ]
    for group, plural in POLICY_RESOURCES:
        out += [Request("create", plural, group, None)]
        out += [Request(v, plural, group, None, POLICY) for v in ("get", "delete")]
    for ns in (SCENARIO_NS, COUNTERPART):
        out.append(Request("list", "policyreports", rp.REPORT_GROUP, ns))
    out.append(Request("list", "clusterpolicyreports", rp.REPORT_GROUP, None))
    evidence = host_pod.evidence_manifests(
        EvidenceCollection(kind=CollectionKind.SCRIPT, content="true\n"),
        host_model.baseline_state(),
        namespace=COUNTERPART,
        name=f"{COUNTERPART}-trial",
        token="t",
    )
    for body in evidence:  # run_on_cluster: create, then delete
        group, _version, plural = host_pod._kinds(body)
        name = body["metadata"]["name"]
        out += [Request("create", plural, group, COUNTERPART)]
        out += [Request("delete", plural, group, COUNTERPART, name)]
    pod = evidence[-1]["metadata"]["name"]
    out += [
        Request("get", "pods", "", COUNTERPART, pod),
        Request("get", "pods/log", "", COUNTERPART, pod),
    ]
    return out


EVIDENCE_POD = host_pod.evidence_manifests(
    EvidenceCollection(kind=CollectionKind.SCRIPT, content="true\n"),
    host_model.baseline_state(),
    namespace=COUNTERPART,
    name=f"{COUNTERPART}-trial",
    token="t",
)[-1]
"""The evidence Pod the evaluator creates."""
EVALUATOR_REQUESTS = evaluator_requests()
EVALUATOR_WRITES = [r for r in EVALUATOR_REQUESTS if r.verb in WRITES]


@pytest.fixture(scope="module")
def docs(helm: Path) -> list[dict[str, Any]]:  # noqa: F811
    return render(helm)


@pytest.fixture(scope="module")
def rbac(docs: list[dict[str, Any]]) -> Authorizer:
    return Authorizer(docs)


def admitted(
    docs: list[dict[str, Any]],
    account: tuple[str, str],
    request: Request,
    obj: dict[str, Any] | None = None,
) -> bool:
    """Whether the chart's ValidatingAdmissionPolicy on the evaluator lets a write through (a
    Pod created is the evidence Pod unless `obj` says otherwise)."""
    policy = one(docs, "ValidatingAdmissionPolicy")
    binding = one(docs, "ValidatingAdmissionPolicyBinding")
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    assert policy["spec"]["failurePolicy"] == "Fail"
    rules = policy["spec"]["matchConstraints"]["resourceRules"]
    assert rules == [
        {
            "apiGroups": ["*"],
            "apiVersions": ["*"],
            "resources": ["*"],
            "operations": ["CREATE", "UPDATE", "DELETE"],
        }
    ]
    env = celpy.Environment()
    name = request.name or (POLICY if request.namespace is None else "x")
    activation = {
        "request": celpy.json_to_cel(
            {
                "userInfo": {"username": f"system:serviceaccount:{account[0]}:{account[1]}"},
                "namespace": request.namespace or "",
                "name": name,
                "operation": {"create": "CREATE", "delete": "DELETE"}.get(request.verb, "UPDATE"),
                "resource": {"resource": request.resource.split("/")[0]},
            }
        ),
        "object": celpy.json_to_cel(obj if obj is not None else EVIDENCE_POD),
    }

    def holds(expression: str) -> bool:
        return bool(env.program(env.compile(expression)).evaluate(activation))

    if not all(holds(c["expression"]) for c in policy["spec"]["matchConditions"]):
        return True
    return all(holds(v["expression"]) for v in policy["spec"]["validations"])


def test_the_evaluator_may_make_every_request_of_a_live_evaluation(
    rbac: Authorizer, docs: list[dict[str, Any]]
) -> None:
    assert len(EVALUATOR_REQUESTS) > 40
    assert [r for r in EVALUATOR_REQUESTS if not rbac.can(EVALUATOR, r)] == []
    assert [r for r in EVALUATOR_WRITES if not admitted(docs, EVALUATOR, r)] == []


EVALUATOR_DENIED = [
    *(
        Request(v, plural, "itbench.io", ns)
        for v in ("get", "list", "create", "patch", "delete")
        for plural in ("trials", "benchmarkruns", "agentsubmissions")
        for ns in (None, NAMESPACE, SCENARIO_NS)
    ),
    Request("get", "scenarios", "itbench.io", None, "checkout-memory-limit"),
    Request("patch", "trials/status", "itbench.io", NAMESPACE, "t"),
    Request("create", "pods/exec", "", SCENARIO_NS, "frontend-1"),
    Request("create", "pods/exec", "", COUNTERPART, f"{COUNTERPART}-trial"),
    Request("create", "pods/attach", "", COUNTERPART, f"{COUNTERPART}-trial"),
    Request("create", "pods/portforward", "", COUNTERPART, f"{COUNTERPART}-trial"),
    Request("patch", "pods/ephemeralcontainers", "", COUNTERPART, f"{COUNTERPART}-trial"),
    Request("patch", "pods", "", COUNTERPART, f"{COUNTERPART}-trial"),
    Request("create", "serviceaccounts/token", "", NAMESPACE, "bench-itbench"),
    Request("create", "serviceaccounts/token", "", COUNTERPART, "default"),
    Request("create", "clusterrolebindings", "rbac.authorization.k8s.io", None),
    Request("impersonate", "serviceaccounts", "", NAMESPACE, "bench-itbench"),
    Request("escalate", "roles", "rbac.authorization.k8s.io", COUNTERPART),
    Request("bind", "clusterroles", "rbac.authorization.k8s.io", None, "cluster-admin"),
    Request("deletecollection", "namespaces", "", None),
]
"""What RBAC alone refuses the evaluator."""

CONFINED = [
    *(Request(v, "secrets", "", ns) for v in ("create", "patch", "delete") for ns in PLATFORM_NS),
    *(
        Request(v, "deployments", "apps", SCENARIO_NS, "checkout")
        for v in ("create", "patch", "delete")
    ),
    Request("patch", "configmaps", "", SCENARIO_NS, "flagd-config"),
    *(Request(v, "pods", "", ns) for v in ("create", "delete") for ns in (SCENARIO_NS, NAMESPACE)),
    Request("create", "rolebindings", "rbac.authorization.k8s.io", NAMESPACE),
    Request("delete", "namespaces", "", None, SCENARIO_NS),
    Request("delete", "namespaces", "", None, NAMESPACE),
    Request("delete", "clusterpolicies", "kyverno.io", None, "disallow-privileged-containers"),
]
"""Writes RBAC grants cluster-wide (it cannot name the counterpart's namespace or the policies
before they exist) that the chart's admission policy refuses. Not among them: writes of
ValidatingAdmissionPolicies and their bindings, which the API server exempts from admission
(docs/install.md)."""


def test_the_evaluator_reaches_no_platform_object_or_scenario_workload(
    rbac: Authorizer, docs: list[dict[str, Any]]
) -> None:
    assert [r for r in EVALUATOR_DENIED if rbac.can(EVALUATOR, r)] == []
    assert [r for r in CONFINED if admitted(docs, EVALUATOR, r)] == []
    for rule in rbac.rules_for(EVALUATOR, None):
        assert "*" not in rule["verbs"] + rule["apiGroups"] + rule["resources"], rule
        assert "itbench.io" not in rule["apiGroups"]
    # The admission policy binds the evaluator alone: others' writes are not its business.
    assert admitted(docs, INJECTOR, Request("patch", "deployments", "apps", SCENARIO_NS, "ad"))


def test_the_agent_and_the_injector_cannot_make_the_evaluators_writes(rbac: Authorizer) -> None:
    for account in ((NAMESPACE, CLUSTER_AGENT), (SCENARIO_NS, CLUSTER_AGENT), INJECTOR):
        granted = [r for r in EVALUATOR_WRITES if rbac.can(account, r)]
        assert granted == [], account
    # The operator watching every namespace writes its own ConfigMaps, Secrets and agents'
    # ServiceAccounts anywhere; none of the evaluation's policies or its namespace.
    own = {"configmaps", "secrets", "serviceaccounts"}
    granted = [r for r in EVALUATOR_WRITES if rbac.can(OPERATOR, r) and r.resource not in own]
    assert granted == []
    token = "serviceaccounts/token"
    for account in ((NAMESPACE, CLUSTER_AGENT), (SCENARIO_NS, CLUSTER_AGENT), INJECTOR):
        assert not rbac.can(account, Request("create", token, "", *EVALUATOR)), account


def test_the_operator_requests_tokens_of_the_evaluator_the_chart_binds(
    helm: Path,  # noqa: F811
) -> None:
    docs = render(helm, "ownCluster.cisoEvaluator.serviceAccountName=ciso")
    args = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert f"--ciso-evaluator-service-account={NAMESPACE}/ciso" in args
    account = one(docs, "ServiceAccount", "ciso")
    assert account["automountServiceAccountToken"] is False, "tokens are requested per run"
    rbac = Authorizer(docs)
    token = "serviceaccounts/token"
    assert rbac.can(OPERATOR, Request("create", token, "", NAMESPACE, "ciso"))
    assert not rbac.can(OPERATOR, Request("create", token, "", *EVALUATOR))
    create = Request("create", "clusterpolicies", "kyverno.io", None)
    assert rbac.can((NAMESPACE, "ciso"), create)
    assert not rbac.can(EVALUATOR, create), "the renamed account alone is bound"
    assert admitted(docs, (NAMESPACE, "ciso"), Request("create", "namespaces", "", None, "x")) is (
        False
    )
    off = render(helm, "ownCluster.enabled=false")
    assert not [d for d in off if "ciso-evaluator" in d["metadata"]["name"]]
    deployment = one(off, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert not [a for a in deployment if "ciso-evaluator" in a]
    for doc in docs:
        if "ciso-evaluator" in doc["metadata"]["name"] or doc["metadata"]["name"] == "ciso":
            assert kubernetes_validate.validate(doc, "1.32", strict=True) == "1.32", doc["kind"]


def test_the_evidence_image_is_a_chart_value_the_operator_reads(
    helm: Path,  # noqa: F811
) -> None:
    from itbench.settings import Settings

    def image(docs: list[dict[str, Any]]) -> str:
        env = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["env"]
        return str(
            next(e["value"] for e in env if e["name"] == "ITBENCH_OPERATOR__CISO_HOST_IMAGE")
        )

    assert image(render(helm)) == host_pod.DEFAULT_IMAGE == Settings().operator.ciso_host_image
    chosen = "registry.example/rhel9-host:1"
    assert image(render(helm, f"ownCluster.cisoEvaluator.hostImage={chosen}")) == chosen


def _pod(**changes: Any) -> dict[str, Any]:
    import copy

    pod = copy.deepcopy(EVIDENCE_POD)
    spec, container = pod["spec"], pod["spec"]["containers"][0]
    for key, value in changes.items():
        where, _, field = key.partition("__")
        (container["securityContext"] if where == "container" else spec)[field] = value
    return pod


@pytest.mark.parametrize(
    "pod",
    [
        _pod(spec__automountServiceAccountToken=True),
        _pod(spec__hostNetwork=True),
        _pod(spec__hostPID=True),
        _pod(spec__volumes=[{"name": "root", "hostPath": {"path": "/"}}]),
        _pod(spec__initContainers=[{"name": "i", "image": "busybox"}]),
        _pod(container__readOnlyRootFilesystem=False),
        _pod(container__allowPrivilegeEscalation=True),
        _pod(container__privileged=True),
    ],
    ids=[
        "token",
        "host-network",
        "host-pid",
        "host-path",
        "init-container",
        "writable-root",
        "escalation",
        "privileged",
    ],
)
def test_the_evaluator_creates_no_pod_but_a_confined_evidence_pod(
    docs: list[dict[str, Any]], pod: dict[str, Any]
) -> None:
    create = Request("create", "pods", "", COUNTERPART)
    assert admitted(docs, EVALUATOR, create)
    assert not admitted(docs, EVALUATOR, create, pod)
