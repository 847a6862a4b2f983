"""Escapes fail with their own named reason: the twin makes the change, the grader judges it.

Each test runs a scenario's fault in the twin, lets an "agent" escape the symptom instead of
removing the cause, and checks what the whole-environment comparison says.
"""

from __future__ import annotations

from pathlib import Path

from itbench.catalog_files import load_catalog
from itbench.core.inventory import STATE_KINDS, object_states
from itbench.core.models.observations import ActionVerb, AgentAction
from itbench.core.models.scenario import Scenario
from itbench.core.models.trial import CollateralKind
from itbench.core.runner.context import topology_kinds
from itbench.core.scoring.collateral import (
    EnvironmentStates,
    cause_reasons,
    collateral_changes,
    fault_scope,
)
from itbench.core.scoring.trial import fault_change_groups, fault_changes
from itbench.environments.sim import SimEnvironment

ROOT = Path(__file__).parents[3] / "scenarios"
NS = "otel-demo"


def _scenario(name: str) -> Scenario:
    catalog, problems = load_catalog(ROOT)
    assert not problems
    return catalog.get(name)


def _escape(
    name: str, actions: list[AgentAction], *, scope_roots: tuple[str, ...] = ()
) -> tuple[list[str], list[str]]:
    """Inject the scenario's fault, act, and return (cause reasons, collateral summaries)."""
    scenario = _scenario(name)
    env = SimEnvironment.for_scenario(scenario, seed=11)
    env.provision()
    env.advance(120)
    baseline = env.snapshot()
    changes = fault_changes(scenario)
    assert env.inject("fault", changes)
    env.advance(300)
    seen = [
        o for kind in topology_kinds(scenario) if kind in STATE_KINDS for o in env.get_objects(kind)
    ]
    reference = {**baseline.objects, **object_states(seen)}
    for action in actions:
        result = env.act(action)
        assert result.ok, result.message
    env.advance(300)
    final = env.snapshot()
    states = EnvironmentStates(
        baseline=baseline.objects,
        reference=reference,
        final=final.objects,
        baseline_flags=baseline.flags,
        final_flags=final.flags,
    )
    roots = [f"{e.kind.value}/{e.name}" for e in scenario.spec.ground_truth.root_causes()]
    scope = fault_scope(changes, [*roots, *scope_roots], [])
    reasons = cause_reasons(states, fault_change_groups(scenario), scope)
    collateral = [
        f"{c.object} {c.change.value}{' !' if c.disqualifying else ''}"
        for c in collateral_changes(states, scope)
    ]
    return reasons, collateral


def test_relabelling_pods_out_of_a_blocking_policy_is_an_escape() -> None:
    labels = {"opentelemetry.io/name": "product-catalog-v2"}
    reasons, _ = _escape(
        "product-catalog-ingress-blocked",
        [
            AgentAction(
                verb=ActionVerb.PATCH,
                kind="Deployment",
                name="product-catalog",
                patch={"spec": {"template": {"metadata": {"labels": labels}}}},
            ),
            AgentAction(
                verb=ActionVerb.PATCH,
                kind="Service",
                name="product-catalog",
                patch={"spec": {"selector": labels}},
            ),
        ],
    )
    assert any(r.startswith("SelectorEscaped: Deployment/product-catalog") for r in reasons)
    assert any(
        r.startswith("FaultNotUndone: NetworkPolicy/product-catalog-ingress") for r in reasons
    )


def test_deleting_the_flag_configuration_is_not_switching_the_flag_off() -> None:
    reasons, _ = _escape(
        "cart-flagd-failure",
        [AgentAction(verb=ActionVerb.DELETE, kind="ConfigMap", name="flagd-config")],
    )
    assert any(r.startswith("FlagConfigDeleted: ConfigMap/flagd-config") for r in reasons)


def test_switching_the_flag_off_undoes_the_cause() -> None:
    reasons, collateral = _escape(
        "cart-flagd-failure",
        [
            AgentAction(
                verb=ActionVerb.SET_FLAG,
                kind="ConfigMap",
                name="flagd-config",
                flag="cartFailure",
                variant="off",
            )
        ],
    )
    assert reasons == []
    assert collateral == []


def test_deleting_the_maxed_out_autoscaler_is_a_deletion_not_a_fix() -> None:
    reasons, _ = _escape(
        "finops-frontend-hpa-misconfiguration",
        [AgentAction(verb=ActionVerb.DELETE, kind="HorizontalPodAutoscaler", name="frontend")],
    )
    assert any(
        r.startswith("ObjectDeleted: HorizontalPodAutoscaler/frontend existed") for r in reasons
    )


def test_raising_the_cost_rule_instead_of_fixing_the_autoscaler_is_refused() -> None:
    """The pinned stack's budget is a constant of the cost rule, which agents may not edit."""
    from itbench.gateway.guardrails import check_action

    raise_budget = AgentAction(
        verb=ActionVerb.PATCH,
        kind="PrometheusRule",
        name="astronomy-shop-alerts",
        patch={"spec": {"groups": []}},
    )
    refusal = check_action(raise_budget, NS)
    assert refusal is not None, "an agent cannot silence the cost alert by editing its rule"
    assert "PrometheusRule" in refusal.reason or "alert" in refusal.reason.lower()
    # A budget ConfigMap (other stacks have one) is still judged as alert configuration.
    reasons = cause_reasons(
        EnvironmentStates(
            baseline={"ConfigMap/cost-alert-config": {"data": {"budgetPerHour": "0.085"}}},
            reference={"ConfigMap/cost-alert-config": {"data": {"budgetPerHour": "0.085"}}},
            final={"ConfigMap/cost-alert-config": {"data": {"budgetPerHour": "5"}}},
            baseline_flags={},
            final_flags={},
        ),
        [],
        fault_scope([], ["HorizontalPodAutoscaler/frontend"], ["HorizontalPodAutoscaler/frontend"]),
    )
    assert any(r.startswith("ThresholdRaised: ConfigMap/cost-alert-config") for r in reasons)


def test_restarting_and_rolling_back_healthy_workloads_is_collateral() -> None:
    _, collateral = _escape(
        "cart-flagd-failure",
        [
            AgentAction(
                verb=ActionVerb.SET_FLAG,
                kind="ConfigMap",
                name="flagd-config",
                flag="cartFailure",
                variant="off",
            ),
            AgentAction(verb=ActionVerb.ROLLOUT_RESTART, kind="Deployment", name="currency"),
            AgentAction(
                verb=ActionVerb.SET_RESOURCES,
                kind="Deployment",
                name="quote",
                limits={"memory": "512Mi"},
            ),
        ],
    )
    assert f"Deployment/currency {CollateralKind.RESTARTED.value}" in collateral
    assert f"Deployment/quote {CollateralKind.RESOURCES_CHANGED.value}" in collateral


def test_rolling_back_the_patch_undoes_a_fault_that_also_created_a_secret() -> None:
    """The rotated password lives in a Secret the fault creates; once valkey-cart no longer
    reads it, the Secret left behind is inert."""
    reasons, collateral = _escape(
        "cart-valkey-auth",
        [AgentAction(verb=ActionVerb.ROLLOUT_UNDO, kind="Deployment", name="valkey-cart")],
    )
    assert reasons == []
    assert collateral == []


def test_fixing_the_file_an_init_container_parses_undoes_the_fault() -> None:
    reasons, _ = _escape(
        "recommendation-crashing-init-container",
        [
            AgentAction(
                verb=ActionVerb.PATCH,
                kind="ConfigMap",
                name="recommendation-config",
                patch={"data": {"config.json": '{"cache": {"size": 512, "ttlSeconds": 30}}\n'}},
            )
        ],
    )
    assert reasons == []


def test_a_fault_none_of_whose_changes_is_undone_names_each_one_still_in_place() -> None:
    reasons, _ = _escape(
        "cart-valkey-auth",
        [AgentAction(verb=ActionVerb.ROLLOUT_RESTART, kind="Deployment", name="cart")],
    )
    assert "FaultNotUndone: Secret/valkey-credentials is still in place" in reasons
    assert any(r.startswith("FaultNotUndone: Deployment/valkey-cart still has") for r in reasons)


def test_each_fault_of_a_scenario_must_be_undone() -> None:
    reasons, _ = _escape(
        "payment-and-ad-failure",
        [
            AgentAction(
                verb=ActionVerb.SET_FLAG,
                kind="ConfigMap",
                name="flagd-config",
                flag="paymentFailure",
                variant="off",
            )
        ],
    )
    assert [r for r in reasons if r.startswith("FaultNotUndone")] == [
        "FaultNotUndone: Flag/adFailure serves 'on', not 'off' as before the incident"
    ]
