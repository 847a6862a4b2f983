"""A CISO trial on a live cluster runs in a workspace namespace of its own, against the loopback
API: the operator's cluster factory builds it with the instance's objects, the agent reads it
through the gateway, the live evaluation judges it, a restarted operator takes it over unchanged,
and it is deleted with the trial's injections (at the trial's end, Errored too, or when its Trial
is deleted; a refused deletion is reported and kept recorded). Running operators do the same end
to end. The shop's `otel-demo` namespace is never read or written. On the
operator's own cluster (a served twin enforcing the chart's RBAC, as in test_cluster_identities)
the workspace is built, read and deleted as the CISO evaluator.

Kyverno's part is played by `test_ciso_live`'s stand-in for its reports controller. Where the
loopback API differs from kube-apiserver: deleting a Namespace here removes the Namespace only
(no namespace controller deletes what it held), and no Deployment gets Pods.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import pytest_asyncio
from loopback import ApiError
from operator_lab import (
    FAST,
    NS,
    SCENARIOS,
    Cluster,
    Lab,
    agent,
    benchmark_run,
    ready_agent,
    ready_scenarios,
    status_of,
    trials_of,
    until,
)
from test_ciso_live import (
    HOST_NETWORK_POLICY,
    NEEDS_SANDBOX,
    FakeClock,
    ReportsController,
    _install_kyverno_crds,
    _submission,
)
from test_cluster_identities import CISO_EVALUATOR, kyverno_served, twin  # noqa: F401

from agents.ciso_reference import solutions
from itbench.catalog_files import load_catalog
from itbench.ciso.cluster import Rest, evaluate_on, host_image_of, variant_manifests
from itbench.ciso.evaluate import twin_of
from itbench.ciso.workspace import (
    TRIAL_ANNOTATION,
    WORKSPACE_LABEL,
    Workspace,
    WorkspaceEnvironment,
    is_workspace,
)
from itbench.core.ciso.posture import score_compliance
from itbench.core.models.compliance import (
    CollectionKind,
    ComplianceSubmission,
    EvidenceCollection,
)
from itbench.core.models.observations import ActionVerb, AgentAction
from itbench.core.models.scenario import Scenario
from itbench.core.models.trial import TrialSpec
from itbench.core.runner.context import RunnerConfig, TrialContext
from itbench.environments.port import EnvironmentFailure
from itbench.gateway.operations.calls import Origin
from itbench.gateway.operations.host import host_command, host_files, try_collection
from itbench.gateway.operations.objects import read_objects
from itbench.gateway.sessions import AgentState, TrialSession
from itbench.operator.clusters import (
    ClusterTargets,
    InjectionRecords,
    LeasedClusterEnvironment,
    LeasedWorkspaceEnvironment,
    holders,
)
from itbench.operator.runtime import EnvironmentRegistry, OperatorConfig, operator_environments
from itbench.operator.trials import _remove_faults
from tests.integration.ciso_sample import ciso_instance
from tests.integration.test_chart import NAMESPACE as CHART_NAMESPACE
from tests.integration.test_chart import helm  # noqa: F401

SHOP = "otel-demo"
SENTINEL = "shop-frontend"


@pytest.fixture
def requests(cluster: Cluster) -> Iterator[list[tuple[str, str]]]:
    """Every (method, path) the loopback API answers from now on; the shop's namespace holds a
    Deployment of its own that no CISO trial may see."""
    _install_kyverno_crds(cluster)
    cluster.api.core.create_namespace({"metadata": {"name": SHOP}})
    cluster.apply(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": SENTINEL, "namespace": SHOP},
            "spec": {
                "selector": {"matchLabels": {"app": SENTINEL}},
                "template": {
                    "metadata": {"labels": {"app": SENTINEL}},
                    "spec": {"containers": [{"name": "c", "image": "shop:1"}]},
                },
            },
        }
    )
    seen: list[tuple[str, str]] = []
    server = cluster.server
    route = server._route

    async def recording(request: Any) -> Any:
        seen.append((request.method, request.path))
        return await route(request)

    server._route = recording  # type: ignore[method-assign]
    yield seen


def trial(cluster: Cluster, name: str, scenario: Scenario) -> TrialContext:
    """A Trial of a cluster run on the operator's own cluster (two slots), and its context."""
    spec = {
        "runRef": {"name": "r"},
        "agentRef": {"name": "ciso"},
        "scenario": scenario.metadata.name,
        "attempt": 0,
        "seed": 1,
        "environment": {"type": "cluster", "capacity": 2},
    }
    if cluster.get("benchmarkruns", "r") is None:
        cluster.apply(benchmark_run("r", "ciso", [scenario.metadata.name]))
    cluster.apply(
        {
            "apiVersion": "itbench.io/v1alpha1",
            "kind": "Trial",
            "metadata": {"name": name, "namespace": NS},
            "spec": spec,
        }
    )
    body = cluster.get("trials", name)
    assert body is not None
    return TrialContext(
        uid=body["metadata"]["uid"],
        name=f"{NS}.{name}",
        spec=TrialSpec.model_validate(spec),
        scenario=scenario,
        agent_name="ciso",
    )


def targets(cluster: Cluster, workdir: Path) -> ClusterTargets:
    """The operator's cluster factory, as a fresh operator process builds it."""
    workdir.mkdir(parents=True, exist_ok=True)
    return ClusterTargets(cluster.api, own_kubeconfig=str(cluster.kubeconfig), workdir=workdir)


def start(env: LeasedClusterEnvironment, ctx: TrialContext) -> None:
    """What the runner does first: provision, then inject the trial's faults."""
    env.provision()
    for action in ctx.injections():
        assert env.inject(action.key, list(action.changes))


def stored(cluster: Cluster, namespace: str) -> dict[tuple[str, str], Any]:
    """The objects the API holds in a namespace, by (kind, name), with their resourceVersion."""
    out: dict[tuple[str, str], Any] = {}
    for group, plural, kind in (
        ("", "serviceaccounts", "ServiceAccount"),
        ("", "services", "Service"),
        ("", "configmaps", "ConfigMap"),
        ("", "secrets", "Secret"),
        ("apps", "deployments", "Deployment"),
        ("networking.k8s.io", "networkpolicies", "NetworkPolicy"),
        ("rbac.authorization.k8s.io", "roles", "Role"),
        ("rbac.authorization.k8s.io", "rolebindings", "RoleBinding"),
    ):
        for obj in cluster.server.objects(group, plural, namespace):
            out[(kind, obj["metadata"]["name"])] = obj["metadata"]["resourceVersion"]
    return out


def namespace_of(cluster: Cluster, name: str) -> Any:
    return cluster.server.get("", "namespaces", None, name)


def touched_shop(requests: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [r for r in requests if f"/namespaces/{SHOP}" in r[1]]


def kyverno_evaluation(
    env: LeasedClusterEnvironment,
    scenario: Scenario,
    policy: Any,
    kyverno: ReportsController | None = None,
) -> Any:
    """The live evaluation of a policy, Kyverno's part played by the stand-in."""
    kyverno = kyverno or ReportsController(Rest(env._api))
    clock = FakeClock()

    def wait(seconds: float) -> None:
        clock.now += seconds
        kyverno(seconds)

    evaluation = evaluate_on(env, scenario, _submission(policy), sleep=wait, monotonic=clock)
    return evaluation, kyverno


def test_a_ciso_trial_builds_its_workspace_reads_and_is_judged_there_never_in_the_shop(
    cluster: Cluster, requests: list[tuple[str, str]], tmp_path: Path
) -> None:
    scenario = ciso_instance("ciso-kyverno-host-network", "noncompliant")
    ctx = trial(cluster, "t1", scenario)
    env = targets(cluster, tmp_path / "op")(ctx)
    try:
        start(env, ctx)
        workspace = env.namespace
        assert is_workspace(workspace) and workspace.startswith("itbench-ciso-w")
        ns = namespace_of(cluster, workspace)
        assert ns["metadata"]["labels"][WORKSPACE_LABEL] == workspace.removeprefix("itbench-ciso-w")
        assert ns["metadata"]["annotations"][TRIAL_ANNOTATION] == f"{NS}/t1"
        # Exactly the instance's objects, the setting already in them.
        expected = {
            (o["kind"], o["metadata"]["name"])
            for o in variant_manifests(scenario, workspace)
            if o["kind"] != "Namespace"
        }
        assert set(stored(cluster, workspace)) == expected
        deployments = cluster.server.objects("apps", "deployments", workspace)
        assert any(d["spec"]["template"]["spec"].get("hostNetwork") for d in deployments)
        # The agent's reads, through the gateway, are the workspace's, shown in the scenario's
        # namespace as in the twin: no platform name, label or annotation.
        session = TrialSession(
            trial_id="t1",
            token="x",
            scenario=scenario,
            env=env,
            telemetry=ctx.agent_telemetry(),
            agent_name="ciso",
        )
        _, found = read_objects(session, "Deployment", None, None)
        listed = {d["metadata"]["name"] for d in found}
        assert listed == {name for kind, name in expected if kind == "Deployment"}
        assert SENTINEL not in listed
        assert {d["metadata"]["namespace"] for d in found} == {SHOP}
        _, [shown] = read_objects(session, "Namespace", SHOP, None)
        assert WORKSPACE_LABEL not in shown["metadata"]["labels"]
        assert TRIAL_ANNOTATION not in (shown["metadata"].get("annotations") or {})
        assert "itbench" not in json.dumps([*found, shown])
        assert env.events() == [] and env.alerts() == []
        refused = env.act(
            AgentAction(verb=ActionVerb.SCALE, kind="Deployment", name="cart", replicas=2)
        )
        assert not refused.ok and refused.outcome == "refused"
        # The ciso.* faults were recorded, not played: no playbook ran.
        keys = [a.key for a in ctx.injections()]
        records = InjectionRecords.of(cluster.get("trials", "t1") or {})
        assert set(records.records) == {*keys, f"{ctx.uid}/ciso-workspace"}
        assert all(records.records[k] == [] for k in keys)
        # The live evaluation judges the workspace (and its counterpart) and passes.
        policy = solutions.validating_policy(
            "cis-host-network", solutions.CEL["host-network"], "no"
        )
        evaluation, kyverno = kyverno_evaluation(env, scenario, policy)
        scores = score_compliance(evaluation, scenario, ttp=1.0)
        assert scores.passed, scores.reason
        assert f"{workspace}/Deployment/frontend" in kyverno.reported
        assert not any(r.startswith(f"{SHOP}/") for r in kyverno.reported)
        assert touched_shop(requests) == [], "nothing of the shop's namespace is read or written"
    finally:
        env.close()


@NEEDS_SANDBOX
def test_the_reference_rego_answer_passes_on_evidence_from_the_workspace(
    cluster: Cluster, requests: list[tuple[str, str]], tmp_path: Path
) -> None:
    scenario = ciso_instance("ciso-opa-role-wildcard", "noncompliant")
    ctx = trial(cluster, "rego", scenario)
    env = targets(cluster, tmp_path / "op")(ctx)
    try:
        start(env, ctx)
        setting = next(str(f.args["setting"]) for f in scenario.spec.faults)
        submission = ComplianceSubmission(
            rego=solutions.rego_module(solutions.REGO_K8S[setting]),
            collection=EvidenceCollection(
                kind=CollectionKind.SCRIPT,
                content=solutions.k8s_collection(scenario.spec.environment.namespace),
            ),
        )
        evaluation = evaluate_on(env, scenario, submission)
        scores = score_compliance(evaluation, scenario, ttp=1.0)
        assert scores.passed, scores.reason
        assert [v.engine for v in evaluation.variants] == ["regorus", "regorus"]
        assert touched_shop(requests) == []
    finally:
        env.close()


def _essence(evidence: Any) -> Any:
    """Evidence as the objects' content decides it: what the API server alone sets (uid,
    resourceVersion, creationTimestamp, status) differs between a live cluster and the twin."""
    if isinstance(evidence, list):
        return sorted(json.dumps(_essence(i), sort_keys=True) for i in evidence)
    if isinstance(evidence, dict) and "metadata" in evidence:
        meta = evidence["metadata"]
        kept = {k: meta.get(k) for k in ("name", "labels", "annotations") if meta.get(k)}
        body = {k: v for k, v in evidence.items() if k not in ("metadata", "status")}
        return {**body, "metadata": kept}
    return evidence


@NEEDS_SANDBOX
def test_the_host_and_a_tried_collection_answer_on_a_cluster_trial_as_in_the_twin(
    cluster: Cluster, tmp_path: Path
) -> None:
    # The host calls and POST /collections of a cluster CISO trial read the workspace (and the
    # instance's modelled host), exactly what the twin of the same instance answers.
    scenario = ciso_instance("ciso-opa-role-wildcard", "noncompliant")
    ctx = trial(cluster, "tried", scenario)
    env = targets(cluster, tmp_path / "op")(ctx)
    modelled = twin_of(scenario)
    try:
        start(env, ctx)
        session = TrialSession(
            trial_id="tried",
            token="x",
            scenario=scenario,
            env=env,
            telemetry=ctx.agent_telemetry(),
            agent_name="ciso",
        )
        in_twin = TrialSession(
            trial_id="twin",
            token="y",
            scenario=scenario,
            env=modelled,
            telemetry=ctx.agent_telemetry(),
            agent_name="ciso",
        )
        modelled.provision()
        for s in (session, in_twin):
            s.state = AgentState.READY
        origin = Origin("POST", "/test")
        files = host_files(session, origin)
        assert files == host_files(in_twin, origin)
        assert "/etc/ssh/sshd_config" in {f.path for f in files.files}
        argv = {"argv": ["sshd", "-T"]}
        answer = host_command(session, origin, argv)
        assert answer.status == 0 and answer == host_command(in_twin, origin, argv)
        collection = {
            "kind": "script",
            "content": solutions.k8s_collection(scenario.spec.environment.namespace),
        }
        tried = try_collection(session, origin, collection)
        assert tried.ok, tried.problem
        expected = try_collection(in_twin, origin, collection).evidence
        assert set(tried.evidence) == set(expected)
        for key, value in tried.evidence.items():
            assert _essence(value) == _essence(expected[key]), key

    finally:
        env.close()


def test_the_installed_policy_set_is_shown_as_the_twin_shows_it_never_created(
    cluster: Cluster, requests: list[tuple[str, str]], tmp_path: Path
) -> None:
    scenario = ciso_instance("ciso-update-net-raw", "noncompliant")
    ctx = trial(cluster, "update", scenario)
    env = targets(cluster, tmp_path / "op")(ctx)
    try:
        start(env, ctx)
        twin = twin_of(scenario)
        for kind in ("ClusterPolicy", "ValidatingPolicy"):
            assert env.get_objects(kind) == twin.get_objects(kind)
        assert env.get_objects("ClusterPolicy") or env.get_objects("ValidatingPolicy")
        assert cluster.server.objects("kyverno.io", "clusterpolicies") == []
        assert cluster.server.objects("policies.kyverno.io", "validatingpolicies") == []
        assert not [r for r in requests if r[0] != "GET" and "kyverno" in r[1]]
    finally:
        env.close()


def test_a_restarted_operator_takes_the_workspace_over_unchanged_and_removal_deletes_it(
    cluster: Cluster, requests: list[tuple[str, str]], tmp_path: Path
) -> None:
    scenario = ciso_instance("ciso-kyverno-host-network", "compliant")
    ctx = trial(cluster, "t1", scenario)
    first = targets(cluster, tmp_path / "first")(ctx)
    start(first, ctx)
    workspace = first.namespace
    before = stored(cluster, workspace)
    first.close()  # the operator process ends
    writes = len([r for r in requests if r[0] != "GET"])
    again = targets(cluster, tmp_path / "second")(ctx)
    try:
        assert again.namespace == workspace, "the same workspace, named from the Trial"
        assert again.injections() == first.injections()
        again.provision()
        for action in ctx.injections():
            assert not again.inject(action.key, list(action.changes)), "never injected twice"
        assert stored(cluster, workspace) == before, "nothing rebuilt, nothing changed"
        assert len([r for r in requests if r[0] != "GET"]) == writes
        assert [d["metadata"]["name"] for d in again.get_objects("Deployment")] == [
            name for kind, name in sorted(before) if kind == "Deployment"
        ]
        # The end of the trial: its injections removed, last first, the workspace with them.
        _remove_faults(again)
        assert namespace_of(cluster, workspace) is None
        body = cluster.get("trials", "t1") or {}
        assert not InjectionRecords.of(body).outstanding
        assert touched_shop(requests) == []
    finally:
        again.close()


def test_two_ciso_trials_at_once_get_two_workspaces(
    cluster: Cluster, requests: list[tuple[str, str]], tmp_path: Path
) -> None:
    compliant = ciso_instance("ciso-kyverno-host-network", "compliant")
    noncompliant = ciso_instance("ciso-kyverno-host-network", "noncompliant")
    factory = targets(cluster, tmp_path / "op")
    a_ctx, b_ctx = trial(cluster, "a", compliant), trial(cluster, "b", noncompliant)
    a, b = factory(a_ctx), factory(b_ctx)
    try:
        start(a, a_ctx)
        start(b, b_ctx)
        assert a.namespace != b.namespace
        assert is_workspace(a.namespace) and is_workspace(b.namespace)
        host = {
            env.namespace: [
                bool(d["spec"]["template"]["spec"].get("hostNetwork"))
                for d in cluster.server.objects("apps", "deployments", env.namespace)
            ]
            for env in (a, b)
        }
        assert not any(host[a.namespace]) and any(host[b.namespace]), "each its own variant"
        _remove_faults(a)
        assert namespace_of(cluster, a.namespace) is None
        assert namespace_of(cluster, b.namespace) is not None, "the other trial's is kept"
        _remove_faults(b)
        assert namespace_of(cluster, b.namespace) is None
        assert touched_shop(requests) == []
    finally:
        a.close()
        b.close()


def test_a_failed_deletion_is_kept_recorded_and_keeps_the_cluster_dirty_until_done(
    cluster: Cluster, requests: list[tuple[str, str]], tmp_path: Path
) -> None:
    scenario = ciso_instance("ciso-kyverno-host-network", "compliant")
    ctx = trial(cluster, "t1", scenario)
    env = targets(cluster, tmp_path / "op")(ctx)
    workspace = env.namespace
    server = cluster.server
    route = server._route
    refuse = [True]

    async def refusing(request: Any) -> Any:
        if refuse[0] and request.method == "DELETE" and request.path.endswith(workspace):
            raise ApiError(500, "InternalError", "etcd is unavailable")
        return await route(request)

    try:
        start(env, ctx)
        server._route = refusing  # type: ignore[method-assign]
        with pytest.raises(EnvironmentFailure, match=f"kubectl delete namespace {workspace}"):
            _remove_faults(env)
        assert namespace_of(cluster, workspace) is not None
        body = cluster.get("trials", "t1") or {}
        assert InjectionRecords.of(body).records == {f"{ctx.uid}/ciso-workspace": []}
        ended = {**body, "status": {"phase": "Errored"}}
        assert holders([ended], env.lease.cluster if env.lease else "", "other")[1] == [
            f"{NS}/t1"
        ], "the cluster counts as dirty while the workspace may be there"
        refuse[0] = False
        _remove_faults(env)  # what deleting the Trial does, once the cluster answers
        assert namespace_of(cluster, workspace) is None
        assert not InjectionRecords.of(cluster.get("trials", "t1") or {}).outstanding
    finally:
        env.close()


def test_a_workspace_recorded_before_an_interrupted_build_is_deleted_with_the_trial(
    cluster: Cluster, requests: list[tuple[str, str]], tmp_path: Path
) -> None:
    scenario = ciso_instance("ciso-kyverno-host-network", "compliant")
    ctx = trial(cluster, "t1", scenario)
    env = targets(cluster, tmp_path / "first")(ctx)
    server = cluster.server
    route = server._route

    async def failing(request: Any) -> Any:
        if request.method == "POST" and "/deployments" in request.path:
            raise ApiError(500, "InternalError", "etcd is unavailable")
        return await route(request)

    server._route = failing  # type: ignore[method-assign]
    with pytest.raises(EnvironmentFailure, match="building the CISO workspace"):
        env.provision()
    env.close()
    server._route = route  # type: ignore[method-assign]
    assert namespace_of(cluster, env.namespace) is not None, "partly built"
    # A restarted operator releasing the deleted Trial finds the record and deletes it.
    body = cluster.get("trials", "t1") or {}
    assert InjectionRecords.of(body).outstanding
    again = targets(cluster, tmp_path / "second")(ctx)
    try:
        _remove_faults(again)
        assert namespace_of(cluster, env.namespace) is None
    finally:
        again.close()


def test_an_sre_trial_on_the_cluster_keeps_its_scenario_namespace(
    cluster: Cluster, requests: list[tuple[str, str]], tmp_path: Path
) -> None:
    catalog, _ = load_catalog(SCENARIOS)
    scenario = catalog.get("checkout-memory-limit")
    ctx = trial(cluster, "sre", scenario)
    env = targets(cluster, tmp_path / "op")(ctx)
    try:
        assert env.namespace == SHOP and not isinstance(env, WorkspaceEnvironment)
        env.provision()  # the shop's Deployments are there: the check passes
        assert env.injections() == []
    finally:
        env.close()


def test_the_operators_rhel9_host_image_reaches_every_cluster_trials_environment(
    cluster: Cluster, tmp_path: Path
) -> None:
    # `--ciso-host-image` (the chart's ownCluster.cisoEvaluator.hostImage) is the image the
    # trial's evidence Pods take, in the evaluation and in POST /collections alike.
    image = "registry.example/rhel9-host:lab"
    config = replace(operator_config(cluster), ciso_host_image=image)
    factory = operator_environments(cluster.api, config)
    catalog, _ = load_catalog(SCENARIOS)
    for name in ("ciso-rhel9-sshd-root-login", "checkout-memory-limit"):
        env = factory(trial(cluster, name.split("-")[0], catalog.get(name)))
        try:
            assert isinstance(env, LeasedClusterEnvironment)
            assert host_image_of(env) == image
        finally:
            env.close()
    # A factory without the option (the same Trial, its lease taken over).
    default = targets(cluster, tmp_path / "op")(trial(cluster, "checkout", catalog.get(name)))
    try:
        assert host_image_of(default) == ""  # the evaluation's default image then
    finally:
        default.close()


def operator_config(cluster: Cluster) -> OperatorConfig:
    """The lab's timings, with cluster runs on the operator's own cluster (the loopback API);
    a cluster's clock is the wall's, so the runner's waits are cut short."""
    runner = RunnerConfig(settle_seconds=0.1, poll_seconds=0.1, agent_poll_seconds=0.1)
    return replace(
        FAST, trial_tick_seconds=0.1, own_kubeconfig=str(cluster.kubeconfig), runner=runner
    )


async def ready_oracle(lab: Lab, scenario: str) -> None:
    """The scenario and the oracle agent, both Ready."""
    await ready_scenarios(lab, scenario)
    await ready_agent(lab, agent("oracle", {"builtin": {"name": "oracle"}}, domain="CISO"))


def start_oracle_run(lab: Lab, scenario: str) -> None:
    """The cluster run `live`: the oracle, one trial of the scenario on the operator's own
    cluster."""
    lab.cluster.apply(
        benchmark_run(
            "live",
            "oracle",
            [scenario],
            environment={"type": "cluster"},
            allowOracle=True,
            trialsPerScenario=1,
        )
    )


@pytest_asyncio.fixture
async def operator_lab(cluster: Cluster) -> AsyncIterator[Lab]:
    """A lab whose environments are the operator's own (a leased slot of the cluster)."""
    lab = Lab(
        cluster=cluster,
        environments=EnvironmentRegistry(
            operator_environments(cluster.api, operator_config(cluster))
        ),
    )
    try:
        yield lab
    finally:
        for handle in lab.operators:
            await handle.kill()


@NEEDS_SANDBOX
@pytest.mark.asyncio
async def test_the_operator_runs_a_ciso_trial_in_its_workspace_and_deletes_it_at_the_end(
    operator_lab: Lab, requests: list[tuple[str, str]]
) -> None:
    lab = operator_lab
    await lab.start(operator_config(lab.cluster))
    name = "ciso-opa-role-wildcard"
    await ready_oracle(lab, name)
    workspaces: set[str] = set()

    def seen() -> None:
        workspaces.update(
            n["metadata"]["name"]
            for n in lab.cluster.server.objects("", "namespaces")
            if is_workspace(n["metadata"]["name"])
        )

    start_oracle_run(lab, name)

    def ended() -> bool:
        seen()
        return status_of(lab, "benchmarkruns", "live").get("phase") in (
            "Succeeded",
            "Failed",
            "Errored",
        )

    await until(ended, within=45, what="the run ended")
    [trial_body] = trials_of(lab, "live")
    status = trial_body["status"]
    assert status["phase"] == "Succeeded", status.get("message")
    assert len(workspaces) == 1, "the trial ran in a workspace"
    [workspace] = workspaces
    assert namespace_of(lab.cluster, workspace) is None, "deleted at the end of the trial"
    assert not InjectionRecords.of(trial_body).outstanding
    assert touched_shop(requests) == []


@pytest.mark.asyncio
async def test_a_restarted_operator_resumes_the_workspace_and_deleting_the_trial_deletes_it(
    operator_lab: Lab, requests: list[tuple[str, str]]
) -> None:
    lab = operator_lab
    first = await lab.start(operator_config(lab.cluster))
    name = "ciso-kyverno-host-network"
    await ready_scenarios(lab, name)
    await ready_agent(
        lab, agent("outside", {"external": {"pollIntervalSeconds": 5}}, domain="CISO")
    )
    lab.cluster.apply(
        benchmark_run(
            "live",
            "outside",
            [name],
            environment={"type": "cluster"},
            trialsPerScenario=1,
            timeouts={"agentSeconds": 3600},
        )
    )

    def running() -> Any:
        phases = ("Ready", "AgentRunning")
        return next(
            (t for t in trials_of(lab, "live") if t.get("status", {}).get("phase") in phases),
            None,
        )

    body = await until(running, what="the trial waiting for its agent")
    [workspace] = [
        n["metadata"]["name"]
        for n in lab.cluster.server.objects("", "namespaces")
        if is_workspace(n["metadata"]["name"])
    ]
    before = stored(lab.cluster, workspace)
    records = InjectionRecords.of(body)
    # The operator process ends; a new one, with nothing in memory, takes the trial over.
    await first.kill()
    mark = len(requests)
    lab.environments = EnvironmentRegistry(
        operator_environments(lab.cluster.api, operator_config(lab.cluster))
    )
    await lab.start(operator_config(lab.cluster))
    uid = body["metadata"]["uid"]
    await until(lambda: lab.environments.get(uid) is not None, what="the trial taken over")
    resumed = lab.environments.get(uid)
    assert isinstance(resumed, LeasedClusterEnvironment) and resumed.namespace == workspace
    assert stored(lab.cluster, workspace) == before, "nothing rebuilt, nothing re-injected"
    assert [r for r in requests[mark:] if r[0] != "GET" and workspace in r[1]] == []
    now = lab.cluster.get("trials", body["metadata"]["name"]) or {}
    assert InjectionRecords.of(now).records == records.records
    lab.cluster.kubectl("delete", "trial", body["metadata"]["name"], "--wait=false")

    def gone() -> bool:
        # The run may make its missing Trial again under the same name: a new object (uid).
        again = lab.cluster.get("trials", body["metadata"]["name"])
        return again is None or again["metadata"]["uid"] != uid

    await until(gone, what="the Trial released and gone")
    assert namespace_of(lab.cluster, workspace) is None, "its workspace deleted with it"
    assert touched_shop(requests) == []


# ---- on the operator's own cluster, with the chart's RBAC ---------------------------------------


def test_on_the_operators_own_cluster_the_workspace_is_built_read_and_deleted_as_the_evaluator(
    twin: tuple[Any, Path, Path],  # noqa: F811
    kyverno_served: Any,  # noqa: F811
) -> None:
    """The served twin enforces the chart's RBAC: the operator's own identity holds no right in
    a workspace, the CISO evaluator's covers building, reading and deleting it."""
    scenario = ciso_instance("ciso-kyverno-host-network", "noncompliant")
    uid = "uid-own-cluster"
    keys = [f"{uid}/inject/{i}" for i in range(len(scenario.spec.faults))]
    workspace = Workspace.of_trial(scenario, NS, "own", uid, keys)
    env = LeasedWorkspaceEnvironment(
        kubeconfig=twin[2],  # the operator's account
        namespace=workspace.namespace,
        workspace=workspace,
        ciso_evaluator=(CHART_NAMESPACE, CISO_EVALUATOR),
    )
    try:
        env.provision()
        for key in keys:
            assert env.inject(key, [])
        assert {d["metadata"]["name"] for d in env.get_objects("Deployment")} >= {"frontend"}
        assert env.get_objects("Namespace")[0]["metadata"]["name"] == SHOP
        operator = kubernetes.config.new_client_from_config(config_file=str(twin[2]))
        try:
            with pytest.raises(kubernetes.client.ApiException) as refused:
                kubernetes.client.AppsV1Api(operator).list_namespaced_deployment(
                    workspace.namespace
                )
            assert refused.value.status == 403, "the operator's own identity reads nothing there"
        finally:
            operator.close()
        evaluation, _ = kyverno_evaluation(env, scenario, HOST_NETWORK_POLICY, kyverno_served)
        assert score_compliance(evaluation, scenario, ttp=1.0).passed, evaluation
        _remove_faults(env)
        admin = Rest(kyverno_served.rest.api)
        gone = admin.call("GET", f"/api/v1/namespaces/{workspace.namespace}")
        assert gone is None or gone["metadata"].get("deletionTimestamp")
    finally:
        env.close()


@pytest.mark.asyncio
async def test_a_trial_errored_while_building_its_workspace_deletes_what_was_built(
    operator_lab: Lab, requests: list[tuple[str, str]]
) -> None:
    lab = operator_lab
    server = lab.cluster.server
    route = server._route
    built: set[str] = set()

    async def failing(request: Any) -> Any:
        parts = request.path.split("/")
        if request.method == "POST" and parts[-1] == "deployments" and is_workspace(parts[-2]):
            built.add(parts[-2])
            raise ApiError(500, "InternalError", "etcd is unavailable")
        return await route(request)

    server._route = failing  # type: ignore[method-assign]
    await lab.start(operator_config(lab.cluster))
    name = "ciso-kyverno-host-network"
    await ready_oracle(lab, name)
    start_oracle_run(lab, name)
    await until(
        lambda: status_of(lab, "benchmarkruns", "live").get("phase") == "Errored",
        what="the run errored",
    )
    [trial_body] = trials_of(lab, "live")
    assert trial_body["status"]["reason"] == "EnvironmentFailure"
    assert "building the CISO workspace" in trial_body["status"]["message"]
    [workspace] = built
    assert namespace_of(lab.cluster, workspace) is None, "what was built is deleted"
    assert not InjectionRecords.of(trial_body).outstanding
    assert touched_shop(requests) == []


@NEEDS_SANDBOX
@pytest.mark.asyncio
async def test_a_workspace_the_cluster_refuses_to_delete_is_reported_and_deleted_with_the_trial(
    operator_lab: Lab, requests: list[tuple[str, str]]
) -> None:
    lab = operator_lab
    server = lab.cluster.server
    route = server._route
    refuse = [True]

    async def refusing(request: Any) -> Any:
        parts = request.path.split("/")
        if refuse[0] and request.method == "DELETE" and is_workspace(parts[-1]):
            raise ApiError(500, "InternalError", "etcd is unavailable")
        return await route(request)

    server._route = refusing  # type: ignore[method-assign]
    await lab.start(operator_config(lab.cluster))
    name = "ciso-opa-role-wildcard"
    await ready_oracle(lab, name)
    start_oracle_run(lab, name)

    def reported() -> Any:
        for t in trials_of(lab, "live"):
            found = lab.cluster.events(t["metadata"]["name"])
            if any(e["reason"] == "RemovalFailed" for e in found):
                return t, found
        return None

    body, events = await until(reported, what="the failed deletion reported on the Trial")
    [event] = [e for e in events if e["reason"] == "RemovalFailed"]
    [workspace] = [
        n["metadata"]["name"]
        for n in server.objects("", "namespaces")
        if is_workspace(n["metadata"]["name"])
    ]
    assert f"kubectl delete namespace {workspace}" in event["message"]
    trial_name = body["metadata"]["name"]
    await until(
        lambda: InjectionRecords.of(lab.cluster.get("trials", trial_name) or {}).outstanding,
        what="the workspace still recorded",
    )
    # Once the cluster answers, deleting the Trial deletes the workspace.
    refuse[0] = False
    lab.cluster.kubectl("delete", "trial", trial_name, "--wait=false")
    await until(lambda: lab.cluster.get("trials", trial_name) is None, what="the Trial gone")
    assert namespace_of(lab.cluster, workspace) is None
    assert touched_shop(requests) == []
