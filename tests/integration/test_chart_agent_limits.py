"""What an agent may do on a cluster the chart is installed on, proved on the rendered chart.

The RBAC objects `helm template` renders are evaluated as the API server's RBAC authorizer does
(bindings by subject, Roles only in their namespace, ClusterRoles through either binding; verbs,
API groups, resources with subresources and resource names, with wildcards), and can-i questions
are asked of the agents' ServiceAccounts. The NetworkPolicies are read the same way for the
pods the operator actually creates (`itbench.operator.workloads.agent_job`).
"""

from __future__ import annotations

import ipaddress
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from itbench.core.models.agent_submission import ImageRuntime
from itbench.operator.workloads import agent_job
from tests.integration.test_chart import CHART, NAMESPACE, helm, one, render  # noqa: F401

SCENARIO_NS = "otel-demo"
CLUSTER_AGENT = "itbench-cluster-agent"
SIM_AGENT = "itbench-agent"
PLATFORM_NS = (NAMESPACE, "monitoring", "chaos-mesh", "opencost", "kyverno", "gatekeeper-system")
PLATFORM_NS += ("kube-system", "default")
"""Namespaces an agent must not touch: the platform's, the observability stack's, Chaos Mesh's,
OpenCost's, the policy engines' and the cluster's own."""


@dataclass(frozen=True)
class Request:
    """One API request, as the authorizer sees it."""

    verb: str
    resource: str  # plural, with /subresource
    group: str = ""
    namespace: str | None = None  # None: cluster-scoped
    name: str = ""


class Authorizer:
    """RBAC over a set of rendered objects (no aggregated ClusterRoles: the chart has none)."""

    def __init__(self, docs: list[dict[str, Any]]) -> None:
        self.docs = docs
        assert not [d for d in docs if d.get("aggregationRule")], "aggregation is not modelled"

    def _role(self, ref: dict[str, Any], namespace: str | None) -> list[dict[str, Any]]:
        for doc in self.docs:
            if doc["kind"] != ref["kind"] or doc["metadata"]["name"] != ref["name"]:
                continue
            if ref["kind"] == "Role" and doc["metadata"]["namespace"] != namespace:
                continue
            rules: list[dict[str, Any]] = doc.get("rules") or []
            return rules
        return []  # a binding to a missing role grants nothing

    @staticmethod
    def _subject_matches(subject: dict[str, Any], account: tuple[str, str]) -> bool:
        namespace, name = account
        kind = subject["kind"]
        if kind == "ServiceAccount":
            return bool(subject["name"] == name and subject.get("namespace") == namespace)
        if kind == "User":
            return bool(subject["name"] == f"system:serviceaccount:{namespace}:{name}")
        groups = {"system:serviceaccounts", f"system:serviceaccounts:{namespace}"}
        return kind == "Group" and subject["name"] in groups | {"system:authenticated"}

    @staticmethod
    def _rule_matches(rule: dict[str, Any], request: Request) -> bool:
        def has(values: list[str], value: str) -> bool:
            return "*" in values or value in values

        _, _, sub = request.resource.partition("/")
        resources = rule.get("resources") or []
        resource_ok = (
            "*" in resources
            or request.resource in resources
            or (bool(sub) and f"*/{sub}" in resources)
        )
        names = rule.get("resourceNames") or []
        return (
            has(rule.get("verbs") or [], request.verb)
            and has(rule.get("apiGroups") or [], request.group)
            and resource_ok
            and (not names or request.name in names)
        )

    def rules_for(self, account: tuple[str, str], namespace: str | None) -> list[dict[str, Any]]:
        """Every rule that applies to the account for requests in `namespace`."""
        rules = []
        for doc in self.docs:
            if doc["kind"] not in ("ClusterRoleBinding", "RoleBinding"):
                continue
            if doc["kind"] == "RoleBinding" and doc["metadata"]["namespace"] != namespace:
                continue
            if not any(self._subject_matches(s, account) for s in doc.get("subjects") or []):
                continue
            where = doc["metadata"].get("namespace")
            rules += self._role(doc["roleRef"], where)
        return rules

    def can(self, account: tuple[str, str], request: Request) -> bool:
        return any(
            self._rule_matches(r, request) for r in self.rules_for(account, request.namespace)
        )


def authorizer(helm: Path, *values: str) -> Authorizer:  # noqa: F811
    return Authorizer(render(helm, *values))


ALLOWED = [
    Request("patch", "deployments", "apps", SCENARIO_NS, "checkout"),
    Request("update", "deployments", "apps", SCENARIO_NS, "checkout"),
    Request("patch", "deployments/scale", "apps", SCENARIO_NS, "ad"),
    Request("list", "pods", "", SCENARIO_NS),
    Request("get", "pods/log", "", SCENARIO_NS, "frontend-1"),
    Request("delete", "pods", "", SCENARIO_NS, "ad-1"),
    Request("patch", "configmaps", "", SCENARIO_NS, "flagd-config"),
    Request("patch", "services", "", SCENARIO_NS, "product-catalog"),
    Request("delete", "resourcequotas", "", SCENARIO_NS, "memory"),
    Request("delete", "networkpolicies", "networking.k8s.io", SCENARIO_NS, "deny"),
    Request("patch", "horizontalpodautoscalers", "autoscaling", SCENARIO_NS, "frontend"),
    Request("watch", "events", "", SCENARIO_NS),
]
"""What a mitigation needs in the scenario's namespace."""

DENIED = [
    # Platform Secrets, and Secrets at all (also the shop's: none of a mitigation needs them).
    *(Request(v, "secrets", "", ns) for v in ("get", "list", "watch") for ns in PLATFORM_NS),
    Request("get", "secrets", "", SCENARIO_NS, "valkey"),
    Request("list", "secrets", "", SCENARIO_NS),
    # itbench.io objects anywhere: runs, Trials (their status), Scenarios (the ground truth).
    *(
        Request(v, plural, "itbench.io", ns)
        for v in ("get", "list", "watch")
        for plural in ("trials", "benchmarkruns", "agentsubmissions")
        for ns in (None, NAMESPACE, SCENARIO_NS)
    ),
    Request("get", "scenarios", "itbench.io", None, "checkout-memory-limit"),
    Request("list", "scenarios", "itbench.io"),
    Request("patch", "trials/status", "itbench.io", SCENARIO_NS, "t"),
    # The observability stack's and Chaos Mesh's namespaces and objects.
    *(
        Request(v, r, "", ns)
        for v in ("get", "list", "patch", "delete")
        for r in ("pods", "configmaps", "services")
        for ns in ("monitoring", "chaos-mesh")
    ),
    Request("patch", "prometheusrules", "monitoring.coreos.com", SCENARIO_NS, "otel-demo"),
    Request("get", "prometheusrules", "monitoring.coreos.com", "monitoring"),
    *(
        Request(v, kind, "chaos-mesh.org", ns)
        for v in ("get", "list", "delete")
        for kind in ("podchaos", "networkchaos", "stresschaos", "schedules")
        for ns in (SCENARIO_NS, "chaos-mesh")
    ),
    # The platform's own workloads and anything cluster-wide.
    Request("patch", "deployments", "apps", NAMESPACE, "bench-itbench"),
    Request("get", "configmaps", "", NAMESPACE, "run-report"),
    Request("patch", "deployments", "apps", "kube-system", "coredns"),
    Request("patch", "nodes", "", None, "worker"),
    Request("list", "namespaces"),
    Request("delete", "namespaces", "", None, SCENARIO_NS),
    # No way around the Role: no new pods or exec (which could mount or read anything the
    # namespace holds), no tokens, no RBAC, no impersonation.
    Request("create", "pods", "", SCENARIO_NS),
    Request("create", "pods/exec", "", SCENARIO_NS, "frontend-1"),
    Request("create", "deployments", "apps", SCENARIO_NS),
    Request("create", "serviceaccounts/token", "", SCENARIO_NS, "otel-demo"),
    Request("create", "rolebindings", "rbac.authorization.k8s.io", SCENARIO_NS),
    Request("bind", "roles", "rbac.authorization.k8s.io", SCENARIO_NS),
    Request("escalate", "roles", "rbac.authorization.k8s.io", SCENARIO_NS),
    Request("impersonate", "serviceaccounts", "", NAMESPACE, "bench-itbench"),
]


@pytest.mark.parametrize("request_", ALLOWED, ids=lambda r: f"{r.verb}-{r.resource}")
def test_the_cluster_agent_may_repair_its_scenarios_namespace(
    helm: Path,  # noqa: F811
    request_: Request,
) -> None:
    assert authorizer(helm).can((NAMESPACE, CLUSTER_AGENT), request_)


def test_the_cluster_agent_cannot_reach_anything_else(helm: Path) -> None:  # noqa: F811
    rbac = authorizer(helm)
    granted = [r for r in DENIED if rbac.can((NAMESPACE, CLUSTER_AGENT), r)]
    assert granted == []
    assert len(DENIED) > 100


def test_every_right_of_the_cluster_agent_is_in_a_scenario_namespace(
    helm: Path,  # noqa: F811
) -> None:
    docs = render(helm, "ownCluster.namespaces={otel-demo,shop-b}")
    rbac = Authorizer(docs)
    account = (NAMESPACE, CLUSTER_AGENT)
    namespaces = {d["metadata"].get("namespace") for d in docs} | {None, *PLATFORM_NS}
    with_rights = {ns for ns in namespaces if rbac.rules_for(account, ns)}
    assert with_rights == {"otel-demo", "shop-b"}
    for ns in with_rights:
        for rule in rbac.rules_for(account, ns):
            assert "*" not in rule["verbs"] + rule["apiGroups"] + rule["resources"], rule
            assert "secrets" not in rule["resources"] and "itbench.io" not in rule["apiGroups"]
            assert not {"create", "deletecollection", "escalate", "bind"} & set(rule["verbs"])


def test_the_simulator_agents_account_can_do_nothing(helm: Path) -> None:  # noqa: F811
    rbac = authorizer(helm)
    for request in ALLOWED + DENIED:
        assert not rbac.can((NAMESPACE, SIM_AGENT), request), request


def test_with_watched_namespaces_each_agent_namespace_is_bound_and_no_other(
    helm: Path,  # noqa: F811
) -> None:
    rbac = authorizer(helm, "watchNamespaces={team-a,team-b}")
    patch = Request("patch", "deployments", "apps", SCENARIO_NS, "checkout")
    assert rbac.can(("team-a", CLUSTER_AGENT), patch)
    assert rbac.can(("team-b", CLUSTER_AGENT), patch)
    assert not rbac.can(("team-c", CLUSTER_AGENT), patch), "an unwatched namespace's account"
    assert not rbac.can((NAMESPACE, CLUSTER_AGENT), patch), "the release namespace is not watched"
    assert not rbac.can(("team-a", SIM_AGENT), patch)
    none = authorizer(helm, "ownCluster.enabled=false")
    assert not none.can((NAMESPACE, CLUSTER_AGENT), patch)
    agent_roles = [  # the trial Jobs' Role (templates/trial-jobs.yaml) is not an agent's
        d
        for d in none.docs
        if d["kind"] == "Role"
        and d["metadata"]["labels"].get("app.kubernetes.io/component") != "trial"
    ]
    assert agent_roles == []


def test_the_operator_runs_cluster_agents_as_the_account_the_chart_binds(
    helm: Path,  # noqa: F811
) -> None:
    docs = render(helm)
    container = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert f"--cluster-agent-service-account={CLUSTER_AGENT}" in container["args"]
    off = one(render(helm, "ownCluster.enabled=false"), "Deployment")["spec"]["template"]
    assert not [a for a in off["spec"]["containers"][0]["args"] if "cluster-agent" in a], (
        "without the Role no agent gets a token"
    )
    account = one(docs, "ServiceAccount", CLUSTER_AGENT)
    assert account["metadata"]["namespace"] == NAMESPACE
    assert account["automountServiceAccountToken"] is False, "only its agents' pods mount it"
    for doc in docs:
        if doc["kind"] in ("Role", "RoleBinding", "NetworkPolicy", "ServiceAccount"):
            assert kubernetes_validate.validate(doc, "1.32", strict=True) == "1.32"


# ---- NetworkPolicies ---------------------------------------------------------------------------


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A label selector (matchLabels and matchExpressions) against a pod's labels."""
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for expr in selector.get("matchExpressions", []):
        key, op, values = expr["key"], expr["operator"], expr.get("values", [])
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def agent_pod_labels() -> dict[str, str]:
    trial = {"metadata": {"name": "run-a-0", "namespace": NAMESPACE, "uid": "u-1"}}
    job = agent_job(
        trial,
        ImageRuntime.model_validate({"image": "example.org/agent:1"}),
        gateway_url="http://bench-itbench.itbench-system.svc:8080",
        service_account_name=CLUSTER_AGENT,
        deadline_seconds=60,
        api_token=True,
    )
    labels: dict[str, str] = job["spec"]["template"]["metadata"]["labels"]
    return labels


def policies_for(docs: list[dict[str, Any]], ns: str, labels: dict[str, str]) -> list[Any]:
    return [
        d
        for d in docs
        if d["kind"] == "NetworkPolicy"
        and d["metadata"]["namespace"] == ns
        and selects(d["spec"]["podSelector"], labels)
    ]


def egress_allowed(
    policies: list[dict[str, Any]], ns: str, labels: dict[str, str], port: int, protocol: str
) -> bool:
    """Whether a selected pod may open a connection to a pod (namespace, labels) on a port."""
    ns_labels = {"kubernetes.io/metadata.name": ns}
    for policy in policies:
        for rule in policy["spec"].get("egress", []):
            ports = rule.get("ports")
            port_ok = ports is None or any(
                p.get("port") == port and p.get("protocol", "TCP") == protocol for p in ports
            )
            peers = rule.get("to")
            peer_ok = peers is None or any(
                ("ipBlock" not in peer)
                and selects(peer.get("namespaceSelector", {}), ns_labels)
                and selects(peer.get("podSelector", {}), labels)
                for peer in peers
            )
            if port_ok and peer_ok:
                return True
    return False


def test_agent_pods_reach_only_the_gateway_and_dns(helm: Path) -> None:  # noqa: F811
    docs = render(helm)
    operator_pod = one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    agent = agent_pod_labels()
    policies = policies_for(docs, NAMESPACE, agent)
    assert [p["metadata"]["name"] for p in policies] == ["bench-itbench-agents"]
    [policy] = policies
    assert set(policy["spec"]["policyTypes"]) == {"Ingress", "Egress"}
    assert policy["spec"]["ingress"] == [], "nothing connects to an agent"
    assert egress_allowed(policies, NAMESPACE, operator_pod, 8080, "TCP"), "the gateway"
    dns = {"k8s-app": "kube-dns"}
    assert egress_allowed(policies, "kube-system", dns, 53, "UDP")
    assert egress_allowed(policies, "kube-system", dns, 53, "TCP")
    for ns, labels, port in [
        (NAMESPACE, operator_pod, 9090),  # the operator's metrics
        (NAMESPACE, operator_pod, 8081),  # its health port
        ("monitoring", {"app.kubernetes.io/name": "prometheus"}, 9090),
        ("monitoring", {"app.kubernetes.io/name": "loki"}, 3100),
        ("chaos-mesh", {"app.kubernetes.io/component": "controller-manager"}, 10081),
        (SCENARIO_NS, {"app.kubernetes.io/name": "frontend"}, 8080),
        ("kube-system", dns, 8080),
    ]:
        assert not egress_allowed(policies, ns, labels, port, "TCP"), (ns, labels, port)
    assert all(not (r.get("to") or [{}])[0].get("ipBlock") for r in policy["spec"]["egress"])


def test_agent_egress_takes_more_rules_from_the_values(helm: Path) -> None:  # noqa: F811
    docs = render(
        helm,
        "networkPolicy.agentEgress[0].to[0].ipBlock.cidr=10.96.0.1/32",
        "networkPolicy.agentEgress[0].ports[0].port=443",
    )
    [policy] = policies_for(docs, NAMESPACE, agent_pod_labels())
    assert policy["spec"]["egress"][-1] == {
        "to": [{"ipBlock": {"cidr": "10.96.0.1/32"}}],
        "ports": [{"port": 443}],
    }
    assert kubernetes_validate.validate(policy, "1.32", strict=True) == "1.32"


def egress_to_address(policies: list[dict[str, Any]], address: str, port: int) -> bool:
    """Whether a selected pod may open a TCP connection to an address outside the cluster's
    pods (an ipBlock peer) on a port."""
    for policy in policies:
        for rule in policy["spec"].get("egress", []):
            ports = rule.get("ports")
            port_ok = ports is None or any(
                p.get("port") == port and p.get("protocol", "TCP") == "TCP" for p in ports
            )
            peers = rule.get("to")
            peer_ok = peers is None or any(
                "ipBlock" in peer
                and ipaddress.ip_address(address) in ipaddress.ip_network(peer["ipBlock"]["cidr"])
                and not any(
                    ipaddress.ip_address(address) in ipaddress.ip_network(c)
                    for c in peer["ipBlock"].get("except", [])
                )
                for peer in peers
            )
            if port_ok and peer_ok:
                return True
    return False


def test_agent_pods_reach_the_api_server_only_when_asked_and_only_its_addresses(
    helm: Path,  # noqa: F811
) -> None:
    agent = agent_pod_labels()
    off = policies_for(render(helm), NAMESPACE, agent)
    for port in (443, 6443):
        assert not egress_to_address(off, "172.18.0.2", port), "off by default"
    docs = render(
        helm,
        "networkPolicy.apiServer.enabled=true",
        "networkPolicy.apiServer.cidrs={172.18.0.2/32}",
    )
    on = policies_for(docs, NAMESPACE, agent)
    assert egress_to_address(on, "172.18.0.2", 6443) and egress_to_address(on, "172.18.0.2", 443)
    assert not egress_to_address(on, "172.18.0.3", 6443), "another address"
    assert not egress_to_address(on, "172.18.0.2", 10250), "the kubelet's port"
    assert not egress_to_address(on, "203.0.113.10", 443), "the internet"
    # Pods in the cluster stay out of reach as before.
    assert not egress_allowed(
        on, "monitoring", {"app.kubernetes.io/name": "prometheus"}, 9090, "TCP"
    )
    assert kubernetes_validate.validate(on[0], "1.32", strict=True) == "1.32"
    watched = render(
        helm,
        "watchNamespaces={team-a}",
        "networkPolicy.apiServer.enabled=true",
        "networkPolicy.apiServer.cidrs={10.0.0.1/32}",
        "networkPolicy.apiServer.ports={6443}",
    )
    team = policies_for(watched, "team-a", agent)
    assert egress_to_address(team, "10.0.0.1", 6443)
    assert not egress_to_address(team, "10.0.0.1", 443)


def test_the_api_server_egress_without_addresses_is_refused(helm: Path) -> None:  # noqa: F811
    result = subprocess.run(
        [
            str(helm),
            "template",
            "bench",
            str(CHART),
            "--set",
            "networkPolicy.apiServer.enabled=true",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode != 0
    assert "networkPolicy.apiServer.cidrs" in result.stderr
    assert "kubectl get endpoints kubernetes" in result.stderr


def test_the_operator_pod_accepts_only_its_own_ports_and_policies_can_be_off(
    helm: Path,  # noqa: F811
) -> None:
    docs = render(helm)
    pod = one(docs, "Deployment")["spec"]["template"]
    [policy] = policies_for(docs, NAMESPACE, pod["metadata"]["labels"])
    assert policy["spec"]["policyTypes"] == ["Ingress"], "it dials API servers and telemetry"
    [rule] = policy["spec"]["ingress"]
    assert "from" not in rule, "agents in any namespace, Prometheus and external agents"
    ports = {p["containerPort"] for p in pod["spec"]["containers"][0]["ports"]}
    assert {p["port"] for p in rule["ports"]} == ports
    assert not selects(policy["spec"]["podSelector"], agent_pod_labels())
    agents = policies_for(
        render(helm, "watchNamespaces={team-a,team-b}"), "team-a", agent_pod_labels()
    )
    assert [p["metadata"]["name"] for p in agents] == ["bench-itbench-agents"]
    assert "NetworkPolicy" not in {d["kind"] for d in render(helm, "networkPolicy.enabled=false")}


# ---- the operator on its own cluster: what provisioning, the baseline and telemetry need ------
OPERATOR = (NAMESPACE, "bench-itbench")
POLICY_READS = [
    Request("list", "clusterpolicies", "kyverno.io", None),
    Request("get", "clusterpolicies", "kyverno.io", None, "disallow-privileged-containers"),
    Request("list", "policies", "kyverno.io", SCENARIO_NS),
    Request("get", "validatingpolicies", "policies.kyverno.io", None, "itbench-audit"),
    Request("list", "policyreports", "wgpolicyk8s.io", SCENARIO_NS),
    Request("watch", "clusterpolicyreports", "wgpolicyk8s.io", None),
    Request("list", "constrainttemplates", "templates.gatekeeper.sh", None),
    Request("get", "k8srequiredlabels", "constraints.gatekeeper.sh", None, "must-have-owner"),
]
"""What CISO evaluation on a cluster reads of Kyverno's and Gatekeeper's verdicts."""
ENVIRONMENT = [
    Request("list", "secrets", "", SCENARIO_NS),  # the baseline holds every object
    Request("list", "deployments", "apps", SCENARIO_NS),
    Request("get", "deployments", "apps", SCENARIO_NS, "checkout"),  # a fault's before-state
    Request("list", "configmaps", "", SCENARIO_NS),
    Request("get", "pods/log", "", SCENARIO_NS, "frontend-1"),
    *(
        Request("list", plural, "chaos-mesh.org", SCENARIO_NS)  # a leftover experiment
        for plural in ("podchaos", "networkchaos", "stresschaos", "httpchaos", "jvmchaos")
    ),
    Request("get", "nodes", "", None, "itbench-worker"),
    Request("list", "priorityclasses", "scheduling.k8s.io", None),
    Request("list", "clusterroles", "rbac.authorization.k8s.io", None),
    Request("create", "services/proxy", "", SCENARIO_NS, "flagd:8016"),  # OFREP is a POST
    Request("get", "services/proxy", "", "monitoring", "kube-prometheus-stack-prometheus:9090"),
    Request("get", "services/proxy", "", "monitoring", "loki:3100"),
    Request("create", "serviceaccounts/token", "", NAMESPACE, "itbench-injector"),
    Request("create", "serviceaccounts/token", "", NAMESPACE, CLUSTER_AGENT),
    *POLICY_READS,
]
"""What a cluster trial on the operator's own cluster asks of the API as the operator; what
faults change is the injector's (test_chart_injector_limits.py), what agents change the cluster
agents' account's."""


@pytest.mark.parametrize("request_", ENVIRONMENT, ids=lambda r: f"{r.verb}-{r.resource}")
def test_the_operator_may_run_cluster_trials_on_its_own_cluster(
    helm: Path,  # noqa: F811
    request_: Request,
) -> None:
    assert authorizer(helm).can(OPERATOR, request_)
    if request_.name == CLUSTER_AGENT:
        return  # the cluster agents live in the watched namespaces (checked below)
    watched = "watchNamespaces={team-a}"  # the operator's own objects only in team-a
    assert authorizer(helm, watched).can(OPERATOR, request_)
    assert not authorizer(helm, watched, "ownCluster.enabled=false").can(OPERATOR, request_)


def test_the_operators_cluster_rights_stop_at_reading(helm: Path) -> None:  # noqa: F811
    # With watched namespaces what remains outside them is the environment's rights alone.
    rbac = authorizer(helm, "watchNamespaces={team-a}")
    for request in [
        Request("get", "secrets", "", "monitoring"),
        Request("list", "secrets", "", "kube-system"),
        Request("get", "pods", "", "chaos-mesh"),
        Request("delete", "nodes", "", None, "itbench-worker"),
        Request("patch", "nodes", "", None, "itbench-worker"),
        Request("create", "priorityclasses", "scheduling.k8s.io", None),
        Request("delete", "namespaces", "", None, SCENARIO_NS),
        Request("create", "clusterrolebindings", "rbac.authorization.k8s.io", None),
        Request("create", "rolebindings", "rbac.authorization.k8s.io", SCENARIO_NS),
        Request("patch", "deployments", "apps", "monitoring", "kube-prometheus-stack-operator"),
        Request("get", "services/proxy", "", "kube-system", "kube-dns:53"),
        # In the scenario namespace it changes nothing: faults are the injector's, repairs the
        # agents' (the gateway carries out their actions as the cluster agents' account).
        Request("patch", "deployments", "apps", SCENARIO_NS, "checkout"),
        Request("update", "configmaps", "", SCENARIO_NS, "flagd-config"),
        Request("delete", "pods", "", SCENARIO_NS, "ad-1"),
        Request("create", "podchaos", "chaos-mesh.org", SCENARIO_NS),
        Request("create", "serviceaccounts/token", "", SCENARIO_NS, "default"),
        Request("create", "serviceaccounts/token", "", "team-a", "itbench-agent"),
    ]:
        assert not rbac.can(OPERATOR, request), request


def test_the_policy_engines_objects_are_read_by_the_operator_alone(helm: Path) -> None:  # noqa: F811
    rbac = authorizer(helm)
    for request in POLICY_READS:
        assert rbac.can(OPERATOR, request), request
        assert not rbac.can((NAMESPACE, CLUSTER_AGENT), request), request
        assert not rbac.can((NAMESPACE, "itbench-injector"), request), request
        for verb in ("create", "patch", "update", "delete"):
            write = Request(verb, request.resource, request.group, request.namespace, request.name)
            assert not rbac.can(OPERATOR, write), write
    off = authorizer(helm, "ownCluster.enabled=false")
    assert not [r for r in POLICY_READS if off.can(OPERATOR, r)]
