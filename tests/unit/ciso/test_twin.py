"""The compliance twin: the hardened namespace and the RHEL9 host, misconfigured by faults and
restored on removal; it refuses every change an agent asks for."""

from __future__ import annotations

import pytest

from itbench.core.ciso.faults import POLICY_SET_FAULT, SETTING_FAULT
from itbench.core.faults import get_fault
from itbench.core.models.observations import ActionVerb, AgentAction
from itbench.environments.port import EnvironmentFailure
from itbench.environments.sim.compliance import ComplianceEnvironment


def _env() -> ComplianceEnvironment:
    env = ComplianceEnvironment(seed=3)
    env.provision()
    return env


def _changes(fault: str, **args: str) -> list:  # type: ignore[type-arg]
    return get_fault(fault).changes(args, "otel-demo")


def test_pods_are_derived_from_the_misconfigured_template() -> None:
    env = _env()
    env.inject(
        "f0",
        _changes(SETTING_FAULT, setting="privileged", state="noncompliant", workload="cart"),
    )
    (pod,) = [p for p in env.get_objects("pods") if p["metadata"]["name"].startswith("cart-")]
    (container,) = pod["spec"]["containers"]
    assert container["securityContext"]["privileged"] is True
    assert container["image"].endswith("-cart"), "the patch merges into the container by name"
    assert env.owners()[f"Pod/{pod['metadata']['name']}"] == "Deployment/cart"
    assert env.remove("f0")
    (pod,) = [p for p in env.get_objects("pods") if p["metadata"]["name"].startswith("cart-")]
    assert "privileged" not in pod["spec"]["containers"][0]["securityContext"]


def test_host_settings_patch_the_host_and_rbac_settings_create_objects() -> None:
    env = _env()
    env.inject("h", _changes(SETTING_FAULT, setting="sshd-root-login", state="noncompliant"))
    assert env.host_state()["sshd"]["PermitRootLogin"] == "yes"
    env.inject("r", _changes(SETTING_FAULT, setting="role-wildcard", state="compliant"))
    (role,) = env.get_objects("roles", "release-manager")
    assert role["rules"][0]["verbs"] == ["get", "list", "watch", "patch"]
    env.inject(
        "p", _changes(POLICY_SET_FAULT, set="pod-security-baseline", update="restrict-seccomp")
    )
    assert len(env.get_objects("validatingpolicies")) == 6


def test_an_injection_that_fails_half_way_is_undone() -> None:
    env = _env()
    with pytest.raises(EnvironmentFailure, match="already exists"):
        env.inject(
            "x",
            [
                *_changes(SETTING_FAULT, setting="default-sa-automount", state="noncompliant"),
                *_changes(SETTING_FAULT, setting="role-wildcard", state="compliant"),
                *_changes(SETTING_FAULT, setting="role-wildcard", state="compliant"),
            ],
        )
    assert env.get_objects("serviceaccounts", "default")[0]["automountServiceAccountToken"] is False


def test_the_twin_refuses_agent_changes() -> None:
    env = _env()
    result = env.act(AgentAction(verb=ActionVerb.DELETE, kind="Deployment", name="cart"))
    assert not result.ok
    assert "read-only" in result.message
    assert env.get_objects("deployments", "cart")
