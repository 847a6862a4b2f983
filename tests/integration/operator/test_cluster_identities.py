"""Who does what on the operator's own cluster, against a served twin enforcing RBAC: the
chart's ServiceAccounts, Roles and bindings are applied to it as `helm template` renders them,
and the cluster environment runs as the operator's account, exactly as the operator pod does.

The fault playbooks run as the injector (a token from the TokenRequest API per playbook run),
agent actions as the cluster agents' account, live CISO evaluations as the CISO evaluator's
account (a token per evaluation); the operator's own identity can do none of them. Kyverno's
part in a CISO evaluation is played by `test_ciso_live`'s stand-in for its reports controller.
The twin enforces RBAC, not admission: the chart's admission policy confining the evaluator's
writes is proved in `test_chart_ciso_evaluator_limits`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml
from operator_lab import SCENARIOS
from test_ciso_live import (
    HOST_NETWORK_POLICY,
    FakeClock,
    ReportsController,
    _instance,
    _submission,
    kyverno_crds,
)

import itbench.core.fault_library  # noqa: F401 (registers the faults)
from itbench.catalog_files import load_catalog
from itbench.ciso.cluster import COUNTERPART_PREFIX, Rest, evaluate_on
from itbench.core.faults import get_fault
from itbench.core.models.observations import ActionVerb, AgentAction
from itbench.core.models.trial import TrialSpec
from itbench.core.runner.context import TrialContext
from itbench.environments.kube.environment import ClusterEnvironment, account_kubeconfig
from itbench.environments.port import EnvironmentFailure
from itbench.environments.served.server import ServedCluster
from itbench.environments.sim.environment import SimEnvironment
from itbench.operator import kubeapi
from itbench.operator.clusters import OWN_CLUSTER, ClusterTargets, Lease, Target, kubeconfig_server
from tests.integration.test_chart import NAMESPACE, OPERATOR, helm, render  # noqa: F401
from tests.kube_collection import kubernetes_core

APP = "otel-demo"
INJECTOR = "itbench-injector"
CLUSTER_AGENT = "itbench-cluster-agent"
CISO_EVALUATOR = "itbench-ciso-evaluator"
RBAC_KINDS = ("ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")


def apply(api: Any, doc: dict[str, Any]) -> None:
    dynamic = kubernetes.dynamic.DynamicClient(api)
    resource = dynamic.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
    resource.create(body=doc, namespace=doc["metadata"].get("namespace"))


@pytest.fixture(scope="module")
def twin(
    tmp_path_factory: pytest.TempPathFactory,
    helm: Path,  # noqa: F811
) -> Iterator[tuple[ServedCluster, Path, Path]]:
    """A served twin with the chart's accounts and RBAC; (twin, admin and operator kubeconfigs)."""
    workdir = tmp_path_factory.mktemp("identities")
    served = ServedCluster(SimEnvironment(seed=3, namespace=APP), speed=10.0).start()
    admin = workdir / "admin"
    served.kubeconfig(admin)
    api = kubernetes.config.new_client_from_config(config_file=str(admin))
    core = kubernetes.client.CoreV1Api(api)
    try:
        docs = [d for d in render(helm) if d["kind"] in RBAC_KINDS]
        namespaces = {d["metadata"].get("namespace") for d in docs} - {None}
        existing = {n.metadata.name for n in core.list_namespace().items}
        for ns in sorted(namespaces - existing):
            core.create_namespace({"metadata": {"name": ns}})
        for doc in docs:
            apply(api, doc)
        token = core.create_namespaced_service_account_token(
            OPERATOR, NAMESPACE, {"spec": {"expirationSeconds": 36000}}
        ).status.token
        operator = workdir / "operator"
        config = account_kubeconfig(admin, "operator", token)
        operator.write_text(yaml.safe_dump(config), encoding="utf-8")
        yield served, admin, operator
    finally:
        api.close()
        served.stop()


def environment(kubeconfig: Path, **identities: Any) -> ClusterEnvironment:
    env = ClusterEnvironment(
        kubeconfig, namespace=APP, collections_path=kubernetes_core(), **identities
    )
    env.provision()
    return env


@pytest.fixture
def as_the_chart_wires_it(twin: tuple[ServedCluster, Path, Path]) -> Iterator[ClusterEnvironment]:
    env = environment(
        twin[2], injector=(NAMESPACE, INJECTOR), agent_account=(NAMESPACE, CLUSTER_AGENT)
    )
    try:
        yield env
    finally:
        env.close()


@pytest.mark.slow
def test_the_operator_takes_the_baseline_and_the_injector_injects_and_removes_faults(
    as_the_chart_wires_it: ClusterEnvironment,
) -> None:
    env = as_the_chart_wires_it
    memory = get_fault("kubernetes.memory-limit").changes({"workload": "ad", "memory": "20Mi"}, APP)
    block = get_fault("kubernetes.block-ingress").changes({"workload": "cart", "port": 8080}, APP)
    assert env.inject("memory", memory) and env.inject("block", block)
    dirty = {(k[1], k[3]) for k in env.dirty()}
    assert ("Deployment", "ad") in dirty and "NetworkPolicy" in {kind for kind, _ in dirty}
    assert env.remove("block") and env.remove("memory")
    assert env.dirty() == [], "the injector put back what it changed"


def test_the_operators_own_identity_cannot_run_the_playbooks(
    twin: tuple[ServedCluster, Path, Path],
) -> None:
    env = environment(twin[2])  # no injector: the playbooks would run as the operator
    try:
        changes = get_fault("kubernetes.scale-to-zero").changes({"workload": "ad"}, APP)
        with pytest.raises(EnvironmentFailure, match=r"[Ff]orbidden") as failed:
            env.inject("zero", changes)
        assert f"system:serviceaccount:{NAMESPACE}:{OPERATOR}" in str(failed.value)
        assert env.dirty() == []
    finally:
        env.close()


def test_an_injector_without_its_binding_fails_the_injection_as_the_environments_failure(
    twin: tuple[ServedCluster, Path, Path],
) -> None:
    env = environment(twin[2], injector=(NAMESPACE, "no-such-injector"))
    try:
        changes = get_fault("kubernetes.scale-to-zero").changes({"workload": "ad"}, APP)
        with pytest.raises(EnvironmentFailure, match="no-such-injector"):
            env.inject("zero", changes)
        assert env.dirty() == []
    finally:
        env.close()


def test_agent_actions_are_carried_out_as_the_cluster_agents_account(
    as_the_chart_wires_it: ClusterEnvironment, twin: tuple[ServedCluster, Path, Path]
) -> None:
    env = as_the_chart_wires_it
    scaled = env.act(AgentAction(verb=ActionVerb.SCALE, kind="Deployment", name="cart", replicas=2))
    assert scaled.ok, scaled.message
    # What the gateway's action code allows but the agents' Role does not: creating objects,
    # and reading Secrets.
    created = env.act(
        AgentAction(
            verb=ActionVerb.APPLY,
            kind="ConfigMap",
            name="new-settings",
            manifest={
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "new-settings"},
                "data": {"a": "1"},
            },
        )
    )
    assert not created.ok and "Forbidden" in created.message
    assert f"system:serviceaccount:{NAMESPACE}:{CLUSTER_AGENT}" in created.message
    restored = env.act(
        AgentAction(verb=ActionVerb.SCALE, kind="Deployment", name="cart", replicas=1)
    )
    assert restored.ok
    assert env.dirty() == []
    # The same action with the operator's identity is refused: it holds no write rights there.
    plain = environment(twin[2])
    try:
        refused = plain.act(
            AgentAction(verb=ActionVerb.SCALE, kind="Deployment", name="cart", replicas=2)
        )
        assert not refused.ok and f"system:serviceaccount:{NAMESPACE}:{OPERATOR}" in refused.message
    finally:
        plain.close()


def test_the_operator_lends_the_identities_on_its_own_cluster_only(
    twin: tuple[ServedCluster, Path, Path], tmp_path: Path
) -> None:
    _, admin, operator = twin
    catalog, _ = load_catalog(SCENARIOS)
    scenario = catalog.get("checkout-memory-limit")
    spec = {
        "runRef": {"name": "r"},
        "agentRef": {"name": "null"},
        "scenario": scenario.metadata.name,
        "attempt": 0,
        "seed": 1,
        "environment": {"type": "cluster"},
    }
    ctx = TrialContext(
        uid="u-1",
        name="team-x.t",
        spec=TrialSpec.model_validate(spec),
        scenario=scenario,
        agent_name="null",
    )
    api = kubeapi.connect(str(admin))
    api.core.create_namespace({"metadata": {"name": "team-x"}})
    targets = ClusterTargets(
        api,
        workdir=tmp_path,
        injector=(NAMESPACE, INJECTOR),
        agent_account=CLUSTER_AGENT,
        ciso_evaluator=(NAMESPACE, CISO_EVALUATOR),
    )
    text = operator.read_text(encoding="utf-8")
    server = kubeconfig_server(text)
    lease = Lease(cluster=server, slot=0, secret=OWN_CLUSTER)
    own = targets._connect(Target(OWN_CLUSTER, text, server), ctx, "team-x", "t", lease)
    registered = targets._connect(Target("team-x/lab", text, server), ctx, "team-x", "t", lease)
    try:
        assert own.injector == (NAMESPACE, INJECTOR)
        assert own.ciso_evaluator == (NAMESPACE, CISO_EVALUATOR)
        assert own.agent_account == ("team-x", CLUSTER_AGENT), "the Trial's namespace's account"
        account = api.core.read_namespaced_service_account(CLUSTER_AGENT, "team-x")
        assert account.automount_service_account_token is False
        # A registered cluster has none of the accounts: its kubeconfig's identity does it all.
        assert registered.injector is None and registered.agent_account is None
        assert registered.ciso_evaluator is None
    finally:
        own.close()
        registered.close()
        api.api_client.close()


# ---- the live CISO evaluator ------------------------------------------------------------------


@pytest.fixture(scope="module")
def kyverno_served(twin: tuple[ServedCluster, Path, Path]) -> Iterator[Any]:
    """The twin serving Kyverno's CRDs; the stand-in for Kyverno's reports controller runs as
    the admin, as Kyverno runs with its own rights."""
    api = kubernetes.config.new_client_from_config(config_file=str(twin[1]))
    try:
        for crd in kyverno_crds():
            apply(api, crd)
        yield ReportsController(Rest(api))
    finally:
        api.close()


def _ciso_evaluation(env: ClusterEnvironment, kyverno: Any, installed: list[str]) -> Any:
    clock = FakeClock()

    def wait(seconds: float) -> None:
        clock.now += seconds
        installed.extend(
            p["metadata"]["name"] for p in kyverno.rest.items("/apis/kyverno.io/v1/clusterpolicies")
        )
        kyverno(seconds)

    scenario = _instance("ciso-kyverno-host-network", "noncompliant")
    assert scenario.spec.environment.namespace == APP
    return evaluate_on(env, scenario, _submission(HOST_NETWORK_POLICY), sleep=wait, monotonic=clock)


def _ciso_leftovers(kyverno: Any) -> list[str]:
    policies = kyverno.rest.items("/apis/kyverno.io/v1/clusterpolicies")
    namespaces = [
        n
        for n in kyverno.rest.items("/api/v1/namespaces")
        if n["metadata"]["name"].startswith(COUNTERPART_PREFIX)
        and not n["metadata"].get("deletionTimestamp")
    ]
    return [o["metadata"]["name"] for o in policies + namespaces]


def test_a_live_ciso_evaluation_as_the_operator_is_forbidden(
    twin: tuple[ServedCluster, Path, Path], kyverno_served: Any
) -> None:
    env = ClusterEnvironment(twin[2], namespace=APP)  # no evaluator: the operator's identity
    try:
        installed: list[str] = []
        evaluation = _ciso_evaluation(env, kyverno_served, installed)
        assert evaluation.platform_error, evaluation
        assert "403" in evaluation.problem and "forbidden" in evaluation.problem.lower()
        assert f"system:serviceaccount:{NAMESPACE}:{OPERATOR}" in evaluation.problem
        assert installed == [] and _ciso_leftovers(kyverno_served) == []
    finally:
        env.close()


def test_the_ciso_evaluator_installs_and_removes_its_policy_copies_and_counterpart(
    twin: tuple[ServedCluster, Path, Path], kyverno_served: Any
) -> None:
    env = ClusterEnvironment(twin[2], namespace=APP, ciso_evaluator=(NAMESPACE, CISO_EVALUATOR))
    try:
        installed: list[str] = []
        evaluation = _ciso_evaluation(env, kyverno_served, installed)
        assert not evaluation.platform_error, evaluation.problem
        assert [v.engine for v in evaluation.variants] == ["kyverno", "kyverno"]
        assert all(v.verdicts and not v.problem for v in evaluation.variants), evaluation
        assert installed and all(n.startswith("itbench-ciso-") for n in installed)
        reported = {r.split("/", 1)[0] for r in kyverno_served.reported}
        assert APP in reported and any(n.startswith("itbench-ciso-") for n in reported)
        assert _ciso_leftovers(kyverno_served) == [], "its policy copies and namespace are gone"
    finally:
        env.close()


def test_a_ciso_evaluator_without_its_token_right_is_the_platforms_failure(
    twin: tuple[ServedCluster, Path, Path], kyverno_served: Any
) -> None:
    # The chart lets the operator request tokens of the evaluator it binds, of no other account.
    env = ClusterEnvironment(twin[2], namespace=APP, ciso_evaluator=(NAMESPACE, "itbench-agent"))
    try:
        evaluation = _ciso_evaluation(env, kyverno_served, [])
        assert evaluation.platform_error and "itbench-agent" in evaluation.problem
        assert _ciso_leftovers(kyverno_served) == []
    finally:
        env.close()
