"""The CISO scenarios' Kubernetes side as data: the shop's namespace, hardened to a CIS-compliant
baseline (Section 5 of the CIS Kubernetes Benchmark).

Every workload runs as non-root with the RuntimeDefault seccomp profile, drops every capability,
mounts no service-account token, uses its own ServiceAccount and no host namespace, host path or
host port; Roles grant read access to named resources only; a default-deny NetworkPolicy covers
the namespace. The baseline is deliberately uneven in how it says so (some workloads spell
`privileged: false` or `hostNetwork: false` out, most leave the default), as real manifests are,
so that a policy must handle an absent field as well as a present one. A scenario's
misconfiguration (`itbench.core.ciso.settings`) is the only thing that can make it fail a control.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]

NAMESPACE = "otel-demo"
"""The namespace of every Kubernetes CISO scenario."""
PART_OF = "opentelemetry-demo"
IMAGE_TAG = "2.0.2"


@dataclass(frozen=True)
class Workload:
    """One Deployment of the hardened namespace.

    Attributes:
        name: Deployment, container, ServiceAccount and Service name.
        port: The container port (and the Service's).
        explicit: Spell the secure defaults out (`privileged: false`, `hostNetwork: false`).
        init: Give the pod a (hardened) init container.
        user: The UID the containers run as.
    """

    name: str
    port: int
    explicit: bool = False
    init: bool = False
    user: int = 10001


WORKLOADS: tuple[Workload, ...] = (
    Workload("frontend", 8080, explicit=True),
    Workload("cart", 7070),
    Workload("checkout", 5050, init=True),
    Workload("payment", 50051, explicit=True, user=1000),
    Workload("shipping", 50050),
    Workload("ad", 9555, explicit=True),
    Workload("recommendation", 9001),
    Workload("product-catalog", 3550, init=True),
    Workload("currency", 7001, user=1000),
    Workload("email", 6060, explicit=True),
)
"""The namespace's Deployments (the shop's components)."""

WORKLOAD_NAMES = tuple(w.name for w in WORKLOADS)

ROLES: tuple[tuple[str, list[Obj]], ...] = (
    (
        "config-reader",
        [
            {
                "apiGroups": [""],
                "resources": ["configmaps"],
                "resourceNames": ["app-settings"],
                "verbs": ["get", "watch"],
            }
        ],
    ),
    (
        "deploy-viewer",
        [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list", "watch"]}],
    ),
)
"""Baseline Roles and their rules: read access to named resources."""

ROLE_BINDINGS: tuple[tuple[str, str, str, str], ...] = (
    ("config-reader", "Role", "config-reader", "checkout"),
    ("deploy-viewer", "Role", "deploy-viewer", "frontend"),
    ("ops-view", "ClusterRole", "view", "frontend"),
)
"""Baseline RoleBindings: (name, roleRef kind, roleRef name, ServiceAccount subject)."""


def labels(name: str) -> dict[str, str]:
    """The labels of a component's objects."""
    return {
        "app.kubernetes.io/name": name,
        "app.kubernetes.io/component": name,
        "app.kubernetes.io/part-of": PART_OF,
    }


def image(name: str) -> str:
    """The component's image."""
    return f"ghcr.io/open-telemetry/demo:{IMAGE_TAG}-{name}"


def _meta(name: str, kind_labels: dict[str, str] | None = None) -> Obj:
    meta: Obj = {"name": name, "namespace": NAMESPACE}
    if kind_labels:
        meta["labels"] = dict(kind_labels)
    return meta


def _container_security(w: Workload) -> Obj:
    security: Obj = {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    if w.explicit:
        security["privileged"] = False
    if w.user != 10001:
        security["runAsUser"] = w.user
    return security


def deployment(w: Workload) -> Obj:
    """The hardened Deployment of a workload."""
    container: Obj = {
        "name": w.name,
        "image": image(w.name),
        "imagePullPolicy": "IfNotPresent",
        "ports": [{"name": "service", "containerPort": w.port, "protocol": "TCP"}],
        "resources": {
            "requests": {"cpu": "50m", "memory": "64Mi"},
            "limits": {"cpu": "500m", "memory": "256Mi"},
        },
        "securityContext": _container_security(w),
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    }
    pod: Obj = {
        "serviceAccountName": w.name,
        "automountServiceAccountToken": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 10001,
            "runAsGroup": 10001,
            "fsGroup": 10001,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [container],
        "volumes": [{"name": "tmp", "emptyDir": {}}],
    }
    if w.explicit:
        pod["hostNetwork"] = False
    if w.init:
        pod["initContainers"] = [
            {
                "name": "wait-for-dependencies",
                "image": "busybox:1.36.1",
                "command": ["sh", "-c", "until nc -z kafka 9092; do sleep 2; done"],
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "readOnlyRootFilesystem": True,
                    "capabilities": {"drop": ["ALL"]},
                },
            }
        ]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(w.name, labels(w.name)),
        "spec": {
            "replicas": 1,
            "revisionHistoryLimit": 10,
            "selector": {"matchLabels": {"app.kubernetes.io/name": w.name}},
            "template": {"metadata": {"labels": labels(w.name)}, "spec": pod},
        },
    }


def service(w: Workload) -> Obj:
    """The Service in front of a workload."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(w.name, labels(w.name)),
        "spec": {
            "type": "ClusterIP",
            "selector": {"app.kubernetes.io/name": w.name},
            "ports": [{"name": "tcp-service", "port": w.port, "targetPort": w.port}],
        },
    }


def service_account(name: str) -> Obj:
    """A ServiceAccount that mounts no token by default."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": _meta(name, labels(name) if name != "default" else None),
        "automountServiceAccountToken": False,
    }


def role(name: str, rules: list[Obj]) -> Obj:
    """A namespaced Role."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": _meta(name),
        "rules": rules,
    }


def role_binding(name: str, ref_kind: str, ref_name: str, account: str) -> Obj:
    """A RoleBinding of a Role or ClusterRole to one ServiceAccount of the namespace."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": _meta(name),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": ref_kind, "name": ref_name},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}],
    }


def baseline_objects() -> list[Obj]:
    """Every object of the hardened namespace (ReplicaSets and Pods are derived by the
    environment's controller from the Deployments)."""
    out: list[Obj] = [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": NAMESPACE,
                "labels": {
                    "kubernetes.io/metadata.name": NAMESPACE,
                    "pod-security.kubernetes.io/audit": "restricted",
                },
            },
        },
        service_account("default"),
    ]
    for w in WORKLOADS:
        out += [service_account(w.name), deployment(w), service(w)]
    out += [role(name, rules) for name, rules in ROLES]
    out += [role_binding(*binding) for binding in ROLE_BINDINGS]
    out.append(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": _meta("app-settings", {"app.kubernetes.io/part-of": PART_OF}),
            "data": {"currency": "USD", "featureFlags": "flagd:8013"},
        }
    )
    out.append(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": _meta("payment-credentials", {"app.kubernetes.io/part-of": PART_OF}),
            "type": "Opaque",
            "data": {"api-key": "cmVkYWN0ZWQ="},
        }
    )
    out.append(
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": _meta("default-deny-ingress"),
            "spec": {"podSelector": {}, "policyTypes": ["Ingress"]},
        }
    )
    out.append(
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": _meta("frontend-ingress"),
            "spec": {
                "podSelector": {"matchLabels": {"app.kubernetes.io/name": "frontend"}},
                "policyTypes": ["Ingress"],
                "ingress": [{"ports": [{"port": 8080, "protocol": "TCP"}]}],
            },
        }
    )
    return out


TARGET_KINDS = ("Deployment", "Role", "RoleBinding", "ServiceAccount", "Namespace")
"""Kinds a Kubernetes control's targets are of."""


def baseline_targets(kind: str) -> list[str]:
    """The targets of a kind in the baseline namespace, as `Kind/name`, sorted."""
    names = [
        str(o["metadata"]["name"])
        for o in baseline_objects()
        if o["kind"] == kind and o["kind"] in TARGET_KINDS
    ]
    return sorted(f"{kind}/{n}" for n in names)
