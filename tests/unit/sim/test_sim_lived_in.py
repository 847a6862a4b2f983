"""The twin an agent meets: a lived-in past, and no trace of the fault injector."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from waiting import wait_for_alert

from itbench.catalog_files import load_catalog
from itbench.core.faults import get_fault
from itbench.core.models.observations import ActionVerb, AgentAction
from itbench.core.models.scenario import Scenario
from itbench.environments.sim import SimEnvironment
from itbench.environments.sim.history import Protected

ROOT = Path(__file__).parents[3] / "scenarios"
INJECTOR_KINDS = ("networkchaos", "PodChaos", "stresschaos.chaos-mesh.org", "HTTPChaos", "jvmchaos")


def _scenario(name: str) -> Scenario:
    catalog, problems = load_catalog(ROOT)
    assert not problems
    return catalog.get(name)


def _lived_in(seed: int, protected: Protected | None = None) -> SimEnvironment:
    env = SimEnvironment(seed=seed, history=protected or Protected())
    env.provision()
    env.advance(60)
    return env


def _revisions(env: SimEnvironment) -> dict[str, int]:
    return {
        d["metadata"]["name"]: int(
            d["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
        )
        for d in env.get_objects("Deployment")
    }


@pytest.mark.parametrize("kind", INJECTOR_KINDS)
def test_injector_kinds_answer_the_same_whether_or_not_an_object_exists(kind: str) -> None:
    quiet = _lived_in(1)
    faulty = _lived_in(1)
    faulty.inject("f", get_fault("chaos.network-delay").changes({"workload": "cart"}, "otel-demo"))
    faulty.inject("g", get_fault("chaos.pod-failure").changes({"workload": "ad"}, "otel-demo"))
    answers = []
    for env in (quiet, faulty):
        with pytest.raises(ValueError) as err:
            env.get_objects(kind)
        answers.append(str(err.value))
        deleted = env.act(AgentAction(verb=ActionVerb.DELETE, kind=kind, name="cart-network-delay"))
        answers.append(deleted.message)
        assert not deleted.ok
    assert answers[0] == answers[2] and answers[1] == answers[3]
    assert "doesn't have a resource type" in answers[0]


def test_an_agent_cannot_create_injector_objects() -> None:
    env = _lived_in(2)
    manifest = {
        "apiVersion": "chaos-mesh.org/v1alpha1",
        "kind": "NetworkChaos",
        "metadata": {"name": "x"},
        "spec": {"action": "delay"},
    }
    result = env.act(AgentAction(verb=ActionVerb.APPLY, kind="NetworkChaos", manifest=manifest))
    assert not result.ok and "doesn't have a resource type" in result.message


def test_the_fault_still_works_while_hidden() -> None:
    env = _lived_in(3)
    env.inject("f", get_fault("chaos.pod-failure").changes({"workload": "currency"}, "otel-demo"))
    # The pods run the pause image and stay Ready (no readiness probe): their callers fail.
    assert wait_for_alert(env, "RequestErrorRate", {"service_name": "frontend"}, 300) is not None


def test_history_gives_deployments_varied_revisions_with_earlier_replicasets() -> None:
    env = _lived_in(4)
    revisions = _revisions(env)
    assert len(set(revisions.values())) >= 2
    assert max(revisions.values()) >= 3
    old = [
        rs
        for rs in env.get_objects("ReplicaSet")
        if rs["spec"]["replicas"] == 0
        and int(rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"])
        < revisions[rs["metadata"]["ownerReferences"][0]["name"]]
    ]
    assert len(old) == sum(r - 1 for r in revisions.values())


def test_history_is_healthy_and_quiet() -> None:
    env = _lived_in(5)
    env.advance(600)
    assert env.alerts() == []
    snapshot = env.snapshot()
    assert all(w.ready_replicas == w.desired_replicas for w in snapshot.workloads)
    assert set(snapshot.flags.values()) == {"off"}


def test_history_has_policies_and_paused_flag_rollouts_that_change_nothing() -> None:
    env = _lived_in(6)
    assert env.get_objects("NetworkPolicy")
    text = env.get_objects("ConfigMap", "flagd-config")[0]["data"]["demo.flagd.json"]
    flags = json.loads(text)["flags"]
    paused = {k: v for k, v in flags.items() if v["defaultVariant"] != "off"}
    assert paused
    assert all(v["targeting"]["fractional"][0][1] == 0 for v in paused.values())


def test_a_flag_served_to_a_few_percent_of_the_users_acts_on_that_share_of_requests() -> None:
    env = _lived_in(21, Protected(flags=frozenset({"paymentFailure"})))
    cm = env.get_objects("ConfigMap", "flagd-config")[0]
    doc = json.loads(cm["data"]["demo.flagd.json"])
    doc["flags"]["paymentFailure"]["defaultVariant"] = "100%"
    doc["flags"]["paymentFailure"]["targeting"] = {"fractional": [["100%", 1], ["off", 99]]}
    cm["data"]["demo.flagd.json"] = json.dumps(doc)
    assert env.act(AgentAction(verb=ActionVerb.APPLY, kind="ConfigMap", manifest=cm)).ok
    restart = AgentAction(verb=ActionVerb.ROLLOUT_RESTART, kind="Deployment", name="flagd")
    assert env.act(restart).ok
    env.advance(600)
    payment = next(w for w in env.snapshot().workloads if w.name == "payment")
    assert 0.005 < payment.error_ratio < 0.015
    assert [a.alertname for a in env.alerts()] == []
    assert env.snapshot().flags["paymentFailure"] == "off"


def test_undo_goes_to_the_previous_healthy_revision() -> None:
    env = _lived_in(7)
    name, revision = max(_revisions(env).items(), key=lambda kv: kv[1])
    assert env.act(AgentAction(verb=ActionVerb.ROLLOUT_UNDO, kind="Deployment", name=name)).ok
    env.advance(300)
    assert env.alerts() == []
    assert _revisions(env)[name] == revision + 1


def test_same_seed_same_history_other_seed_other_history() -> None:
    def fingerprint(seed: int) -> str:
        env = _lived_in(seed)
        objects = [
            (o["metadata"]["name"], o.get("spec"))
            for kind in ("ReplicaSet", "NetworkPolicy", "ConfigMap")
            for o in env.get_objects(kind)
            if kind != "ReplicaSet" or o["spec"]["replicas"] == 0
        ]
        return json.dumps(objects, sort_keys=True, default=str)

    assert fingerprint(8) == fingerprint(8)
    assert fingerprint(8) != fingerprint(9)


def test_history_leaves_alone_what_the_scenario_faults_need() -> None:
    blocked = _scenario("product-catalog-ingress-blocked")
    flagged = _scenario("cart-flagd-failure")
    for seed in range(12):
        env = SimEnvironment.for_scenario(blocked, seed=seed)
        env.provision()
        names = [p["metadata"]["name"] for p in env.get_objects("NetworkPolicy")]
        assert "product-catalog-ingress" not in names
        env = SimEnvironment.for_scenario(flagged, seed=seed)
        env.provision()
        text = env.get_objects("ConfigMap", "flagd-config")[0]["data"]["demo.flagd.json"]
        assert json.loads(text)["flags"]["cartFailure"]["defaultVariant"] == "off"
