"""Who does what on the operator's own cluster, against a served twin enforcing RBAC: the
chart's ServiceAccounts, Roles and bindings are applied to it as `helm template` renders them,
and the cluster environment runs as the operator's account, exactly as the operator pod does.

The fault playbooks run as the injector (a token from the TokenRequest API per playbook run),
agent actions as the cluster agents' account; the operator's own identity can do neither.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml
from operator_lab import SCENARIOS

import itbench.core.fault_library  # noqa: F401 (registers the faults)
from itbench.catalog_files import load_catalog
from itbench.core.faults import get_fault
from itbench.core.models.observations import ActionVerb, AgentAction
from itbench.core.models.trial import TrialSpec
from itbench.core.runner import TrialContext
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
        api, workdir=tmp_path, injector=(NAMESPACE, INJECTOR), agent_account=CLUSTER_AGENT
    )
    text = operator.read_text(encoding="utf-8")
    server = kubeconfig_server(text)
    lease = Lease(cluster=server, slot=0, secret=OWN_CLUSTER)
    own = targets._connect(Target(OWN_CLUSTER, text, server), ctx, "team-x", "t", lease)
    registered = targets._connect(Target("team-x/lab", text, server), ctx, "team-x", "t", lease)
    try:
        assert own.injector == (NAMESPACE, INJECTOR)
        assert own.agent_account == ("team-x", CLUSTER_AGENT), "the Trial's namespace's account"
        account = api.core.read_namespaced_service_account(CLUSTER_AGENT, "team-x")
        assert account.automount_service_account_token is False
        # A registered cluster has neither account: its kubeconfig's identity does both.
        assert registered.injector is None and registered.agent_account is None
    finally:
        own.close()
        registered.close()
        api.api_client.close()
