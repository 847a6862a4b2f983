"""Alert evaluation on the virtual clock: pending, `for:`, firing, resolution, history, rules."""

from __future__ import annotations

import pytest
from waiting import inject, wait_until_clear

from itbench.core.alert_rules import EVALUATION_INTERVAL_SECONDS, RULE_NAME
from itbench.core.models.observations import ActionVerb, AgentAction, AlertState
from itbench.environments.port import Environment, EnvironmentFailure
from itbench.environments.sim import SimEnvironment


def test_simulator_implements_the_environment_port(env: SimEnvironment) -> None:
    assert isinstance(env, Environment)


def test_alert_is_pending_for_its_for_duration_then_fires(env: SimEnvironment) -> None:
    inject(env, "kubernetes.nonexistent-image", workload="checkout")
    states: list[tuple[float, AlertState]] = []
    start = env.now()
    for _ in range(20):
        env.advance(15)
        for a in env.alerts():
            if a.alertname == "PodNotReady":
                states.append(((env.now() - start).total_seconds(), a.state))
    first_pending = next(t for t, s in states if s == AlertState.PENDING)
    first_firing = next(t for t, s in states if s == AlertState.FIRING)
    (interval,) = [i for i in env.alert_history() if i.alertname == "PodNotReady"]
    (active,) = [a for a in env.alerts() if a.alertname == "PodNotReady"]
    assert (interval.start - active.active_at).total_seconds() == 60
    assert first_firing - first_pending >= 60 - EVALUATION_INTERVAL_SECONDS
    # The labels of kube-state-metrics' series, its scrape's included (as kube-prometheus-stack
    # writes them: honorLabels keeps the object's namespace, the target adds the rest).
    assert active.labels == {
        "alertname": "PodNotReady",
        "container": "kube-state-metrics",
        "deployment": "checkout",
        "endpoint": "http",
        "instance": "10.244.0.12:8080",
        "job": "kube-state-metrics",
        "namespace": "otel-demo",
        "pod": "kube-prometheus-stack-kube-state-metrics-6c5d7b9f4d-lmx2k",
        "service": "kube-prometheus-stack-kube-state-metrics",
        "severity": "warning",
    }
    assert "checkout" in active.annotations["summary"]


def test_alert_without_for_fires_at_once(env: SimEnvironment) -> None:
    inject(env, "kubernetes.memory-limit", workload="ad", memory="16Mi")
    seen = set()
    for _ in range(8):
        env.advance(15)
        seen |= {a.state for a in env.alerts() if a.alertname == "ContainerOOMKilled"}
    assert seen == {AlertState.FIRING}


def test_history_closes_intervals_when_alerts_resolve(env: SimEnvironment) -> None:
    inject(env, "flagd.payment-failure", key="flag")
    env.advance(300)
    env.remove("flag")
    assert wait_until_clear(env, 900) is not None
    history = [i for i in env.alert_history() if i.alertname == "RequestErrorRate"]
    assert {i.labels["service_name"] for i in history} >= {"payment", "checkout"}
    assert all(i.end is not None and i.end > i.start for i in history)


def test_healthy_shop_raises_nothing_for_an_hour() -> None:
    env = SimEnvironment(seed=3)
    env.provision()
    env.advance(3600)
    assert env.alerts() == []
    assert env.alert_history() == []


def test_alert_rules_live_in_a_prometheusrule_that_changes_the_fingerprint(
    env: SimEnvironment,
) -> None:
    before = env.snapshot().alert_rules_fingerprint
    inject(env, "flagd.cart-failure")
    env.advance(300)
    assert env.alerts()
    result = env.act(AgentAction(verb=ActionVerb.DELETE, kind="PrometheusRule", name=RULE_NAME))
    assert result.ok
    env.advance(30)
    assert env.alerts() == []
    assert env.snapshot().alert_rules_fingerprint != before


def test_the_fingerprint_follows_every_edit_of_the_rules_and_only_their_content(
    env: SimEnvironment,
) -> None:
    from itbench.core.alert_rules import rules_fingerprint

    def rule() -> dict[str, object]:
        return env.get_objects("PrometheusRule", RULE_NAME)[0]

    original = env.snapshot().alert_rules_fingerprint
    assert original == rules_fingerprint(rule())
    env.advance(60)
    assert env.snapshot().alert_rules_fingerprint == original
    spec = rule()["spec"]
    assert isinstance(spec, dict)
    first = spec["groups"][0]["rules"][0]
    edited = {**first, "expr": first["expr"] + " * 2"}
    groups = [{**spec["groups"][0], "rules": [edited, *spec["groups"][0]["rules"][1:]]}]
    patch = {"spec": {**spec, "groups": groups + spec["groups"][1:]}}
    result = env.act(
        AgentAction(verb=ActionVerb.PATCH, kind="PrometheusRule", name=RULE_NAME, patch=patch)
    )
    assert result.ok, result.message
    changed = env.snapshot().alert_rules_fingerprint
    assert changed != original and changed == rules_fingerprint(rule())
    restore = {"spec": spec}
    assert env.act(
        AgentAction(verb=ActionVerb.PATCH, kind="PrometheusRule", name=RULE_NAME, patch=restore)
    ).ok
    assert env.snapshot().alert_rules_fingerprint == original  # the same rules again


def test_inject_is_idempotent_per_key(env: SimEnvironment) -> None:
    from itbench.core.faults import get_fault

    changes = get_fault("flagd.ad-failure").changes({}, "otel-demo")
    assert env.inject("a", changes) is True
    assert env.inject("a", changes) is False
    assert env.injections() == ["a"]


def test_injection_of_a_missing_object_fails_and_leaves_nothing(env: SimEnvironment) -> None:
    from itbench.core.faults import get_fault

    changes = get_fault("kubernetes.scale-to-zero").changes({"workload": "nope"}, "otel-demo")
    with pytest.raises(EnvironmentFailure, match="nope"):
        env.inject("bad", changes)
    assert env.injections() == []


def test_observing_before_provisioning_is_an_environment_failure() -> None:
    with pytest.raises(EnvironmentFailure):
        SimEnvironment(seed=1).alerts()
