"""The policy set installed in the update scenarios: Kyverno ValidatingPolicies (CEL) that the
hardened namespace passes, each written the way a team would have before a requirement changed.

An update scenario names one of them (the one its new requirement concerns); the agent must
update that one and leave every other exactly as it is.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

POLICY_API_VERSION = "policies.kyverno.io/v1"
POLICY_KIND = "ValidatingPolicy"

_CONTAINER_OK = (
    "!has(c.securityContext) || !has(c.securityContext.{field}) || "
    "c.securityContext.{field} == {value}"
)


def validating_policy(name: str, description: str, expression: str, message: str) -> Obj:
    """A Kyverno ValidatingPolicy over Pods with one CEL validation, in audit mode."""
    return {
        "apiVersion": POLICY_API_VERSION,
        "kind": POLICY_KIND,
        "metadata": {
            "name": name,
            "annotations": {
                "policies.kyverno.io/title": description,
                "policies.kyverno.io/category": "Pod Security",
            },
        },
        "spec": {
            "validationActions": ["Audit"],
            "evaluation": {"background": {"enabled": True}},
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["pods"],
                    }
                ]
            },
            "validations": [{"expression": expression, "message": message}],
        },
    }


BASELINE_SET: tuple[Obj, ...] = (
    validating_policy(
        "disallow-host-namespaces",
        "Disallow host namespaces",
        "!(has(object.spec.hostNetwork) && object.spec.hostNetwork) && "
        "!(has(object.spec.hostPID) && object.spec.hostPID)",
        "Pods must not share the host's network or process namespace.",
    ),
    validating_policy(
        "disallow-privileged-containers",
        "Disallow privileged containers",
        "object.spec.containers.all(c, "
        + _CONTAINER_OK.format(field="privileged", value="false")
        + ")",
        "Containers must not run privileged.",
    ),
    validating_policy(
        "restrict-capabilities",
        "Restrict added capabilities",
        "object.spec.containers.all(c, !has(c.securityContext) || "
        "!has(c.securityContext.capabilities) || !has(c.securityContext.capabilities.add) || "
        "c.securityContext.capabilities.add.all(a, a in ['NET_BIND_SERVICE', 'NET_RAW']))",
        "Containers may add only NET_BIND_SERVICE and NET_RAW.",
    ),
    validating_policy(
        "require-run-as-non-root",
        "Require running as non-root",
        "has(object.spec.securityContext) && has(object.spec.securityContext.runAsNonRoot) && "
        "object.spec.securityContext.runAsNonRoot == true",
        "Pods must set securityContext.runAsNonRoot: true.",
    ),
    validating_policy(
        "restrict-seccomp",
        "Restrict seccomp profiles",
        "has(object.spec.securityContext) && has(object.spec.securityContext.seccompProfile) && "
        "object.spec.securityContext.seccompProfile.type in ['RuntimeDefault', 'Localhost']",
        "Pods must use the RuntimeDefault or a Localhost seccomp profile.",
    ),
    validating_policy(
        "disallow-privilege-escalation",
        "Disallow privilege escalation",
        "object.spec.containers.all(c, has(c.securityContext) && "
        "has(c.securityContext.allowPrivilegeEscalation) && "
        "c.securityContext.allowPrivilegeEscalation == false)",
        "Containers must set allowPrivilegeEscalation: false.",
    ),
)
"""The installed policy set of every update scenario."""

POLICY_SETS: dict[str, tuple[Obj, ...]] = {"pod-security-baseline": BASELINE_SET}
"""Installed policy sets by id (a fault argument)."""


def policy_names(set_id: str) -> list[str]:
    """The names of a set's policies.

    Raises:
        KeyError: No such set.
    """
    return [str(p["metadata"]["name"]) for p in POLICY_SETS[set_id]]
