"""Accepted mitigations become gateway actions, and those actions resolve faults in the twin."""

from __future__ import annotations

import pytest
from waiting import inject, wait_for_alert, wait_until_clear

from itbench.core.mitigations import MitigationError, mitigation_to_actions
from itbench.core.models.observations import ActionVerb
from itbench.core.models.scenario import EntityKind, Mitigation, MitigationStep
from itbench.environments.sim import SimEnvironment


def test_flag_step_becomes_a_set_flag_on_flagd_config() -> None:
    m = Mitigation(
        description="flag off",
        steps=[MitigationStep(action="set-flag", kind=EntityKind.FLAG, name="cartFailure")],
    )
    (action,) = mitigation_to_actions(m, "otel-demo")
    assert (action.verb, action.kind, action.name, action.flag, action.variant) == (
        ActionVerb.SET_FLAG,
        "ConfigMap",
        "flagd-config",
        "cartFailure",
        "off",
    )


def test_steps_keep_order_and_parameters() -> None:
    m = Mitigation(
        description="fix",
        steps=[
            MitigationStep(
                action="set-resources",
                kind=EntityKind.DEPLOYMENT,
                name="ad",
                params={"limits.memory": "300Mi", "requests.cpu": "100m", "cpu": "1"},
            ),
            MitigationStep(
                action="scale", kind=EntityKind.DEPLOYMENT, name="ad", params={"replicas": 2}
            ),
            MitigationStep(
                action="patch",
                kind=EntityKind.SERVICE,
                name="cart",
                patch='{"spec": {"selector": {"opentelemetry.io/name": "cart"}}}',
            ),
            MitigationStep(action="rollout-undo", kind=EntityKind.DEPLOYMENT, name="ad"),
            MitigationStep(action="delete", kind=EntityKind.NETWORK_POLICY, name="np"),
        ],
    )
    actions = mitigation_to_actions(m, "ns")
    assert [a.verb for a in actions] == [
        ActionVerb.SET_RESOURCES,
        ActionVerb.SCALE,
        ActionVerb.PATCH,
        ActionVerb.ROLLOUT_UNDO,
        ActionVerb.DELETE,
    ]
    assert actions[0].limits == {"memory": "300Mi", "cpu": "1"}
    assert actions[0].requests == {"cpu": "100m"}
    assert actions[1].replicas == 2
    assert actions[2].patch == {"spec": {"selector": {"opentelemetry.io/name": "cart"}}}
    assert {a.namespace for a in actions} == {"ns"}
    assert actions[4].kind == "NetworkPolicy"


def test_missing_parameters_name_the_step() -> None:
    m = Mitigation(
        description="x",
        steps=[MitigationStep(action="set-image", kind=EntityKind.DEPLOYMENT, name="cart")],
    )
    with pytest.raises(MitigationError, match=r"steps\[0\].*params.image"):
        mitigation_to_actions(m, "ns")
    bad = Mitigation(
        description="x",
        steps=[MitigationStep(action="patch", kind=EntityKind.SERVICE, name="s", patch="{oops")],
    )
    with pytest.raises(MitigationError, match="not JSON"):
        mitigation_to_actions(bad, "ns")


def test_converted_mitigation_resolves_the_fault_in_the_twin(env: SimEnvironment) -> None:
    inject(env, "kubernetes.memory-limit", workload="cart", memory="16Mi")
    assert wait_for_alert(env, "PodCrashLooping", {"deployment": "cart"}, 300) is not None
    m = Mitigation(
        description="raise the limit back",
        steps=[
            MitigationStep(
                action="set-resources",
                kind=EntityKind.DEPLOYMENT,
                name="cart",
                params={"limits.memory": "160Mi", "requests.memory": "160Mi"},
            )
        ],
    )
    for action in mitigation_to_actions(m, env.namespace):
        assert env.act(action).ok
    assert wait_until_clear(env, 900) is not None
