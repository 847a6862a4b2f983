"""What the fault injector and the operator may do on a cluster the chart is installed on, proved
on the rendered chart (the RBAC evaluation of `test_chart_agent_limits`).

The requests the fault playbooks make are derived from the catalog: every change of every
live-cluster scenario's faults, injected and removed, maps to the API requests its playbook
sends (`fault_requests`). The injector's account may make each of them; the operator's may make
none of the writes; neither reaches anything else.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import kubernetes_validate
import pytest

import itbench.core.fault_library  # noqa: F401 (registers the faults)
from itbench.catalog_files import load_catalog
from itbench.core.faults import ObjectChange, get_fault
from itbench.core.models.base import Domain
from itbench.core.shop import FLAGD_CONFIGMAP
from itbench.environments.sim.objects import INJECTOR_KINDS, KIND_INFO
from tests.integration.test_chart import NAMESPACE, ROOT, helm, one, render  # noqa: F401
from tests.integration.test_chart_agent_limits import (
    CLUSTER_AGENT,
    OPERATOR,
    PLATFORM_NS,
    SCENARIO_NS,
    Authorizer,
    Request,
)

INJECTOR = (NAMESPACE, "itbench-injector")
WRITES = frozenset({"create", "update", "patch", "delete", "deletecollection"})


def _resource(kind: str) -> tuple[str, str, bool]:
    """(plural, API group, namespaced) of a kind, as RBAC names it."""
    api_version, name, namespaced = KIND_INFO[kind]
    plural, _, group = name.partition(".")
    assert group == (api_version.split("/")[0] if "/" in api_version else ""), kind
    return plural, group, namespaced


def change_requests(change: ObjectChange) -> Iterator[Request]:
    """The requests a change's playbook makes to inject it and to remove it again."""
    plural, group, namespaced = _resource(change.kind)
    ns = change.namespace if namespaced else None

    def on(*verbs: str, name: str = change.name) -> Iterator[Request]:
        yield from (Request(v, plural, group, ns, name) for v in verbs)

    if change.op == "merge-patch":  # object-patch.yaml; removal: restore.yaml (a replace)
        yield from on("get", "patch", "update")
    elif change.op == "create":  # object-create.yaml; removal deletes it (and waits)
        yield from on("get", "create", "patch", "delete")
    elif change.op == "delete" and change.selector:  # pods by label; controllers bring them back
        yield Request("list", plural, group, ns)
        yield from on("delete", name="")
    elif change.op == "delete":  # removal: object-create.yaml creates it again
        yield from on("get", "delete", "create")
    elif change.op == "set-flag":  # flagd.yaml reads flagd; removal: restore.yaml
        yield Request("get", "deployments", "apps", ns, "flagd")
        yield from on("get", "patch", "update")
    elif change.op == "rollout":  # rollout.yaml stamps the template (and again on removal)
        yield from on("get", "patch")
    else:
        raise AssertionError(f"no requests known for op {change.op}")


def fault_requests() -> list[Request]:
    """Every request the catalog's live-cluster faults make, in their scenarios' namespace."""
    catalog, problems = load_catalog(ROOT / "scenarios")
    assert not problems
    found: set[Request] = set()
    for scenario in (s for s in catalog if s.spec.domain != Domain.CISO):
        for spec in scenario.spec.faults:
            for change in get_fault(spec.id).changes(spec.args, SCENARIO_NS):
                found |= set(change_requests(change))
    return sorted(found, key=lambda r: (r.group, r.resource, r.verb, r.namespace or "", r.name))


FAULT_REQUESTS = fault_requests()


def test_the_catalog_exercises_every_kind_of_change() -> None:
    kinds = {(r.group, r.resource) for r in FAULT_REQUESTS}
    assert ("chaos-mesh.org", "schedules") in kinds and ("", "nodes") in kinds
    assert ("scheduling.k8s.io", "priorityclasses") in kinds
    assert ("", "configmaps") in kinds and ("apps", "deployments") in kinds
    assert len(FAULT_REQUESTS) > 40


@pytest.fixture(scope="module")
def rbac(helm: Path) -> Authorizer:  # noqa: F811
    return Authorizer(render(helm))


def test_the_injector_may_make_and_undo_every_catalog_fault(rbac: Authorizer) -> None:
    assert [r for r in FAULT_REQUESTS if not rbac.can(INJECTOR, r)] == []


OWN_OBJECTS = {("", "configmaps"), ("", "secrets")}
"""Kinds the operator writes for its own objects (reports, trajectories, agents' token Secrets):
in every namespace when it watches all of them, only in the watched ones otherwise."""


def test_the_operator_changes_nothing_a_fault_changes(helm: Path) -> None:  # noqa: F811
    for values in ((), ("watchNamespaces={team-a}",)):
        rbac = Authorizer(render(helm, *values))
        granted = {
            (r.group, r.resource)
            for r in FAULT_REQUESTS
            if r.verb in WRITES and rbac.can(OPERATOR, r)
        }
        assert granted == (set() if values else OWN_OBJECTS), values
        # It still reads what a fault touches: the baseline and a dirty cluster's check.
        reads = [r for r in FAULT_REQUESTS if r.verb == "get"]
        assert reads and all(rbac.can(OPERATOR, r) for r in reads)


def test_every_right_of_the_injector_is_in_a_scenario_namespace_or_a_faults_cluster_kind(
    helm: Path,  # noqa: F811
) -> None:
    docs = render(helm, "ownCluster.namespaces={otel-demo,shop-b}")
    rbac = Authorizer(docs)
    namespaces = {d["metadata"].get("namespace") for d in docs} | {*PLATFORM_NS, "chaos-mesh"}
    everywhere = rbac.rules_for(INJECTOR, None)  # its ClusterRole: cluster-scoped kinds only
    with_rights = {
        ns
        for ns in namespaces - {None}
        if [r for r in rbac.rules_for(INJECTOR, ns) if r not in everywhere]
    }
    assert with_rights == {"otel-demo", "shop-b"}
    cluster_wide = {
        (g, r)
        for rule in rbac.rules_for(INJECTOR, None)
        for g in rule["apiGroups"]
        for r in rule["resources"]
    }
    assert cluster_wide == {("", "nodes"), ("scheduling.k8s.io", "priorityclasses")}
    for ns in (None, *with_rights):
        for rule in rbac.rules_for(INJECTOR, ns):
            assert "*" not in rule["verbs"] + rule["apiGroups"] + rule["resources"], rule
            assert not {"escalate", "bind", "impersonate", "deletecollection"} & set(rule["verbs"])
            assert "itbench.io" not in rule["apiGroups"]
            assert "rbac.authorization.k8s.io" not in rule["apiGroups"]
    # Without ownCluster there is no injector at all.
    off = Authorizer(render(helm, "ownCluster.enabled=false"))
    assert not [r for r in FAULT_REQUESTS if off.can(INJECTOR, r)]


INJECTOR_DENIED = [
    *(Request(v, "secrets", "", ns) for v in ("get", "list") for ns in PLATFORM_NS),
    *(
        Request(v, plural, "itbench.io", ns)
        for v in ("get", "list", "patch")
        for plural in ("trials", "benchmarkruns", "agentsubmissions")
        for ns in (None, NAMESPACE, SCENARIO_NS)
    ),
    Request("get", "scenarios", "itbench.io", None, "checkout-memory-limit"),
    Request("patch", "trials/status", "itbench.io", NAMESPACE, "t"),
    Request("create", "pods", "", SCENARIO_NS),
    Request("create", "pods/exec", "", SCENARIO_NS, "frontend-1"),
    Request("create", "serviceaccounts/token", "", SCENARIO_NS, "otel-demo"),
    Request("create", "serviceaccounts/token", "", NAMESPACE, "bench-itbench"),
    Request("create", "rolebindings", "rbac.authorization.k8s.io", SCENARIO_NS),
    Request("delete", "nodes", "", None, "itbench-worker"),
    Request("delete", "namespaces", "", None, SCENARIO_NS),
    Request("patch", "deployments", "apps", NAMESPACE, "bench-itbench"),
    Request("patch", "deployments", "apps", "chaos-mesh", "chaos-controller-manager"),
    Request("create", "podchaos", "chaos-mesh.org", "monitoring"),
    Request("patch", "prometheusrules", "monitoring.coreos.com", "monitoring", "otel-demo"),
    Request("impersonate", "serviceaccounts", "", NAMESPACE, "bench-itbench"),
]


def test_the_injector_reaches_no_platform_object(rbac: Authorizer) -> None:
    assert [r for r in INJECTOR_DENIED if rbac.can(INJECTOR, r)] == []


def test_the_operator_may_request_tokens_of_the_injector_and_the_cluster_agents_only(
    helm: Path,  # noqa: F811
) -> None:
    rbac = Authorizer(render(helm))
    token = "serviceaccounts/token"
    assert rbac.can(OPERATOR, Request("create", token, "", NAMESPACE, "itbench-injector"))
    assert rbac.can(OPERATOR, Request("create", token, "", NAMESPACE, CLUSTER_AGENT))
    for ns, name in [
        (NAMESPACE, "itbench-agent"),
        (NAMESPACE, "itbench-trial"),
        (NAMESPACE, "bench-itbench"),
        (NAMESPACE, "default"),
        (SCENARIO_NS, "default"),
        ("kube-system", "default"),
    ]:
        assert not rbac.can(OPERATOR, Request("create", token, "", ns, name)), (ns, name)
    watched = Authorizer(render(helm, "watchNamespaces={team-a,team-b}"))
    assert watched.can(OPERATOR, Request("create", token, "", "team-b", CLUSTER_AGENT))
    assert watched.can(OPERATOR, Request("create", token, "", NAMESPACE, "itbench-injector"))
    assert not watched.can(OPERATOR, Request("create", token, "", NAMESPACE, CLUSTER_AGENT))


def test_the_agent_cannot_read_the_injectors_objects_or_borrow_its_identity(
    rbac: Authorizer,
) -> None:
    chaos = [k for k in sorted(INJECTOR_KINDS) if KIND_INFO[k][0].startswith("chaos-mesh.org")]
    assert len(chaos) >= 6
    for kind in chaos:
        plural, group, _ = _resource(kind)
        for verb in ("get", "list", "watch"):
            for ns in (SCENARIO_NS, "chaos-mesh"):
                assert not rbac.can((NAMESPACE, CLUSTER_AGENT), Request(verb, plural, group, ns))
    for request in [
        Request("create", "serviceaccounts/token", "", NAMESPACE, "itbench-injector"),
        Request("get", "serviceaccounts", "", NAMESPACE, "itbench-injector"),
        Request("impersonate", "serviceaccounts", "", NAMESPACE, "itbench-injector"),
        Request("get", "roles", "rbac.authorization.k8s.io", SCENARIO_NS, "bench-itbench-injector"),
    ]:
        assert not rbac.can((NAMESPACE, CLUSTER_AGENT), request), request


def test_the_operator_runs_the_playbooks_as_the_injector_the_chart_binds(
    helm: Path,  # noqa: F811
) -> None:
    docs = render(helm, "ownCluster.injector.serviceAccountName=faults")
    args = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert f"--injector-service-account={NAMESPACE}/faults" in args
    account = one(docs, "ServiceAccount", "faults")
    assert account["metadata"]["namespace"] == NAMESPACE
    assert account["automountServiceAccountToken"] is False, "tokens are requested per run"
    rbac = Authorizer(docs)
    patch = Request("patch", "deployments", "apps", SCENARIO_NS, "checkout")
    assert rbac.can((NAMESPACE, "faults"), patch)
    assert not rbac.can(INJECTOR, patch), "the renamed account alone is bound"
    off = one(render(helm, "ownCluster.enabled=false"), "Deployment")["spec"]["template"]
    assert not [a for a in off["spec"]["containers"][0]["args"] if "injector" in a]
    for doc in docs:
        if doc["kind"] in ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"):
            assert kubernetes_validate.validate(doc, "1.32", strict=True) == "1.32"


def test_flagd_is_the_config_map_flag_faults_change() -> None:
    # The set-flag requests above name flagd's ConfigMap (a Role may not be narrower).
    names = {r.name for r in FAULT_REQUESTS if r.resource == "configmaps" and r.verb == "patch"}
    assert FLAGD_CONFIGMAP in names
