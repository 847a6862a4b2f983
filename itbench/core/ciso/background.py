"""The other CIS weaknesses of a CISO trial's environment: settings other than the assessed one,
configured non-compliantly on other objects, so that a policy flagging every weakness it knows
over-reports.

A scenario's `background` parameter (drawn like any parameter: from the run's seed on the dev
split, from the secret on the test split) picks them; the draw depends on the assessed setting,
its Deployment and the parameter, never on the variant, so an instance and its counterpart carry
the same weaknesses. A weakness is never of a setting that overlaps the assessed one (a
privileged container also escalates and holds every capability; `hostNetwork` exposes host
ports; a wildcard verb includes `escalate`), never on the assessed Deployment, and in an update
scenario never one the installed policy set already refuses, so the assessed control's expected
posture is what the assessed setting decides and nothing else.
"""

from __future__ import annotations

import hashlib
import random

from itbench.core.ciso.namespace import WORKLOAD_NAMES
from itbench.core.ciso.settings import SETTINGS, Scope

BACKGROUND_DRAWS = 8
"""How many background draws a scenario's `background` parameter ranges over."""

RELATED: tuple[frozenset[str], ...] = (
    frozenset(
        {
            "privileged",
            "privileged-init",
            "privilege-escalation",
            "privilege-escalation-init",
            "added-capabilities",
            "net-raw",
            "drop-capabilities",
        }
    ),
    frozenset({"host-network", "host-port"}),
    frozenset({"seccomp", "seccomp-container"}),
    frozenset({"automount-token", "default-service-account", "default-sa-automount"}),
    frozenset({"role-wildcard", "role-escalate"}),
    frozenset({"sshd-root-login", "sshd-root-login-dropin"}),
)
"""Settings whose non-compliant states overlap: one may fail the other's control."""

POLICY_SET_COVERS = frozenset(
    {
        "host-network",
        "host-pid",
        "host-ipc",
        "privileged",
        "privileged-init",
        "added-capabilities",
        "net-raw",
        "run-as-root",
        "seccomp",
        "seccomp-container",
        "privilege-escalation",
        "privilege-escalation-init",
    }
)
"""Settings whose non-compliant state the installed policy set (or its update) refuses."""

POD_SETTINGS = (
    "host-network",
    "host-pid",
    "host-ipc",
    "privileged",
    "privilege-escalation",
    "run-as-root",
    "net-raw",
    "added-capabilities",
    "host-path",
    "host-port",
    "seccomp",
    "automount-token",
)
"""Workload settings a policy over Pods checks (the Kyverno class's)."""
TEMPLATE_SETTINGS = (
    "privileged-init",
    "privilege-escalation-init",
    "drop-capabilities",
    "seccomp-container",
    "default-service-account",
    "secret-env",
)
"""Workload settings checked on a Deployment's pod template (the K8sOPA class's)."""
ROLE_SETTINGS = ("role-wildcard", "role-secrets", "role-create-pods", "role-escalate")
"""Settings of Roles."""
NAMESPACE_SETTINGS = (
    *ROLE_SETTINGS,
    "cluster-admin-binding",
    "default-sa-automount",
    "network-policies",
)
"""Settings of the namespace's RBAC objects and the namespace itself."""
HOST_SETTINGS = tuple(s.id for s in SETTINGS.values() if s.scope == Scope.HOST)
"""Settings of the RHEL9 host."""


def related(setting: str) -> frozenset[str]:
    """The settings that overlap `setting`, itself included."""
    out = {setting}
    for group in RELATED:
        if setting in group:
            out |= group
    return frozenset(out)


def _pool(candidates: tuple[str, ...], excluded: frozenset[str]) -> list[str]:
    return [s for s in candidates if s not in excluded]


def background_weaknesses(
    setting: str, workload: str, draw: int, *, update: bool = False
) -> list[tuple[str, str]]:
    """The weaknesses a background draw adds around an assessed setting.

    A Kubernetes control gets one Pod-level weakness and one pod-template weakness on two other
    Deployments, and one weakness of the namespace's RBAC objects (a Role's when the assessed
    targets are Roles); a host control gets two other host settings. Pure and deterministic.

    Args:
        setting: The assessed setting.
        workload: Its Deployment ('' when it is not a workload setting).
        draw: The background parameter's value.
        update: An update scenario (its installed policy set refuses some settings already).

    Returns:
        (setting, Deployment or '') of each weakness, in a stable order.

    Raises:
        KeyError: An unknown setting.
    """
    assessed = SETTINGS[setting]
    digest = hashlib.sha256(f"itbench.io/ciso-background/{setting}/{workload}/{draw}".encode())
    rng = random.Random(int.from_bytes(digest.digest()[:8], "big"))
    excluded = related(setting) | (POLICY_SET_COVERS if update else frozenset())
    if assessed.scope == Scope.HOST:
        return [(s, "") for s in sorted(rng.sample(_pool(HOST_SETTINGS, excluded), 2))]
    deployments = rng.sample([w for w in WORKLOAD_NAMES if w != workload], 2)
    rbac = ROLE_SETTINGS if assessed.target_kind == "Role" else NAMESPACE_SETTINGS
    return [
        (rng.choice(_pool(POD_SETTINGS, excluded)), deployments[0]),
        (rng.choice(_pool(TEMPLATE_SETTINGS, excluded)), deployments[1]),
        (rng.choice(_pool(rbac, excluded)), ""),
    ]
