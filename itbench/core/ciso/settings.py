"""The settings CISO scenarios vary: each one a compliant and a non-compliant way to configure
one thing, as object changes of the namespace or merge patches of the RHEL9 host.

Both states change the same objects in the same way (the compliant one spells a secure value
out, or chooses a near miss such as NET_BIND_SERVICE instead of NET_RAW), so that nothing but the
real state tells the variants apart.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from itbench.core.ciso.host import HOST_TARGET, HOSTNAME
from itbench.core.ciso.namespace import NAMESPACE, role, role_binding
from itbench.core.faults import ObjectChange

Obj = dict[str, Any]


class State(StrEnum):
    """Which way a setting is configured."""

    COMPLIANT = "compliant"
    NONCOMPLIANT = "noncompliant"

    def flipped(self) -> State:
        """The other state."""
        return State.NONCOMPLIANT if self == State.COMPLIANT else State.COMPLIANT


class Scope(StrEnum):
    """What a setting changes."""

    WORKLOAD = "workload"
    RBAC = "rbac"
    NAMESPACE = "namespace"
    HOST = "host"


@dataclass(frozen=True)
class Setting:
    """One thing a scenario configures one way or the other.

    Attributes:
        id: The setting's id (a fault argument).
        scope: workload (a Deployment's pod template), rbac (a Role or RoleBinding the setting
            creates), namespace (namespace-wide objects) or host.
        description: What the two states are.
        patch: For workload settings: (state, container) -> the pod-template patch.
        objects: For rbac and namespace settings: state -> the changes.
        host: For host settings: state -> the host-state merge patch.
        target_kind: The kind of the targets this setting's controls assess.
        fixed_target: The target when it does not depend on a workload argument.
    """

    id: str
    scope: Scope
    description: str
    target_kind: str
    patch: Callable[[State, str], Obj] | None = None
    objects: Callable[[State], list[ObjectChange]] | None = None
    host: Callable[[State], Obj] | None = None
    fixed_target: str = ""


def _pick(state: State, compliant: Any, noncompliant: Any) -> Any:
    return compliant if state == State.COMPLIANT else noncompliant


def _pod(spec: Obj) -> Obj:
    return {"spec": {"template": {"spec": spec}}}


def _container(container: str, fields: Obj) -> Obj:
    return _pod({"containers": [{"name": container, **fields}]})


def _security(container: str, security: Obj) -> Obj:
    return _container(container, {"securityContext": security})


def _init(state: State, security: Obj) -> Obj:
    return _pod(
        {
            "initContainers": [
                {
                    "name": "prepare-config",
                    "image": "busybox:1.36.1",
                    "command": ["sh", "-c", "cp /defaults/* /config/"],
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]},
                        **security,
                    },
                }
            ]
        }
    )


def _workload_settings() -> list[Setting]:
    w = Scope.WORKLOAD
    return [
        Setting(
            "host-network",
            w,
            "hostNetwork: false, or true",
            "Deployment",
            patch=lambda s, _c: _pod({"hostNetwork": _pick(s, False, True)}),
        ),
        Setting(
            "host-pid",
            w,
            "hostPID: false, or true",
            "Deployment",
            patch=lambda s, _c: _pod({"hostPID": _pick(s, False, True)}),
        ),
        Setting(
            "host-ipc",
            w,
            "hostIPC: false, or true",
            "Deployment",
            patch=lambda s, _c: _pod({"hostIPC": _pick(s, False, True)}),
        ),
        Setting(
            "privileged",
            w,
            "the container's privileged: false, or true",
            "Deployment",
            patch=lambda s, c: _security(c, {"privileged": _pick(s, False, True)}),
        ),
        Setting(
            "privileged-init",
            w,
            "an init container with privileged: false, or true",
            "Deployment",
            patch=lambda s, _c: _init(s, {"privileged": _pick(s, False, True)}),
        ),
        Setting(
            "privilege-escalation",
            w,
            "the container's allowPrivilegeEscalation: false, or true",
            "Deployment",
            patch=lambda s, c: _security(c, {"allowPrivilegeEscalation": _pick(s, False, True)}),
        ),
        Setting(
            "privilege-escalation-init",
            w,
            "an init container with allowPrivilegeEscalation: false, or true",
            "Deployment",
            patch=lambda s, _c: _init(s, {"allowPrivilegeEscalation": _pick(s, False, True)}),
        ),
        Setting(
            "run-as-root",
            w,
            "the container runs as UID 10002 (non-root), or as UID 0 with runAsNonRoot: false",
            "Deployment",
            patch=lambda s, c: _security(
                c, _pick(s, {"runAsUser": 10002}, {"runAsUser": 0, "runAsNonRoot": False})
            ),
        ),
        Setting(
            "net-raw",
            w,
            "the container adds NET_BIND_SERVICE, or NET_RAW",
            "Deployment",
            patch=lambda s, c: _security(
                c,
                {
                    "capabilities": {
                        "drop": ["ALL"],
                        "add": [_pick(s, "NET_BIND_SERVICE", "NET_RAW")],
                    }
                },
            ),
        ),
        Setting(
            "added-capabilities",
            w,
            "the container adds no capability, or SYS_ADMIN",
            "Deployment",
            patch=lambda s, c: _security(
                c,
                {
                    "capabilities": _pick(
                        s, {"drop": ["ALL"]}, {"drop": ["ALL"], "add": ["SYS_ADMIN"]}
                    )
                },
            ),
        ),
        Setting(
            "drop-capabilities",
            w,
            "the container drops ALL capabilities, or only NET_RAW",
            "Deployment",
            patch=lambda s, c: _security(
                c, {"capabilities": {"drop": [_pick(s, "ALL", "NET_RAW")]}}
            ),
        ),
        Setting(
            "host-path",
            w,
            "a data volume as an emptyDir, or as a hostPath of /var/lib/app-data",
            "Deployment",
            patch=lambda s, c: _pod(
                {
                    "volumes": [
                        {
                            "name": "data",
                            **_pick(
                                s,
                                {"emptyDir": {"sizeLimit": "1Gi"}},
                                {
                                    "hostPath": {
                                        "path": "/var/lib/app-data",
                                        "type": "DirectoryOrCreate",
                                    }
                                },
                            ),
                        }
                    ],
                    "containers": [
                        {"name": c, "volumeMounts": [{"name": "data", "mountPath": "/data"}]}
                    ],
                }
            ),
        ),
        Setting(
            "host-port",
            w,
            "a metrics port without a hostPort, or with hostPort 9464",
            "Deployment",
            patch=lambda s, c: _container(
                c,
                {
                    "ports": [
                        {
                            "name": "metrics",
                            "containerPort": 9464,
                            "protocol": "TCP",
                            **_pick(s, {}, {"hostPort": 9464}),
                        }
                    ]
                },
            ),
        ),
        Setting(
            "seccomp",
            w,
            "the pod's seccomp profile RuntimeDefault, or Unconfined",
            "Deployment",
            patch=lambda s, _c: _pod(
                {
                    "securityContext": {
                        "seccompProfile": {"type": _pick(s, "RuntimeDefault", "Unconfined")}
                    }
                }
            ),
        ),
        Setting(
            "seccomp-container",
            w,
            "the container's seccomp profile RuntimeDefault, or Unconfined",
            "Deployment",
            patch=lambda s, c: _security(
                c, {"seccompProfile": {"type": _pick(s, "RuntimeDefault", "Unconfined")}}
            ),
        ),
        Setting(
            "automount-token",
            w,
            "the pod's automountServiceAccountToken: false, or true",
            "Deployment",
            patch=lambda s, _c: _pod({"automountServiceAccountToken": _pick(s, False, True)}),
        ),
        Setting(
            "default-service-account",
            w,
            "the pod runs as its own ServiceAccount, or as default",
            "Deployment",
            patch=lambda s, c: _pod({"serviceAccountName": _pick(s, c, "default")}),
        ),
        Setting(
            "secret-env",
            w,
            "payment-credentials mounted as a file, or read into an environment variable",
            "Deployment",
            patch=lambda s, c: _pick(
                s,
                _pod(
                    {
                        "volumes": [
                            {"name": "credentials", "secret": {"secretName": "payment-credentials"}}
                        ],
                        "containers": [
                            {
                                "name": c,
                                "volumeMounts": [
                                    {
                                        "name": "credentials",
                                        "mountPath": "/var/run/secrets/app",
                                        "readOnly": True,
                                    }
                                ],
                            }
                        ],
                    }
                ),
                _container(
                    c,
                    {
                        "env": [
                            {
                                "name": "PAYMENT_API_KEY",
                                "valueFrom": {
                                    "secretKeyRef": {
                                        "name": "payment-credentials",
                                        "key": "api-key",
                                    }
                                },
                            }
                        ]
                    },
                ),
            ),
        ),
    ]


def _create(obj: Obj) -> ObjectChange:
    return ObjectChange(
        op="create",
        api_version=str(obj["apiVersion"]),
        kind=str(obj["kind"]),
        name=str(obj["metadata"]["name"]),
        namespace=NAMESPACE,
        body=obj,
    )


def _rbac_settings() -> list[Setting]:
    r = Scope.RBAC
    return [
        Setting(
            "role-wildcard",
            r,
            "Role release-manager grants named verbs on Deployments, or every verb ('*')",
            "Role",
            objects=lambda s: [
                _create(
                    role(
                        "release-manager",
                        [
                            {
                                "apiGroups": ["apps"],
                                "resources": ["deployments"],
                                "verbs": _pick(s, ["get", "list", "watch", "patch"], ["*"]),
                            }
                        ],
                    )
                )
            ],
            fixed_target="Role/release-manager",
        ),
        Setting(
            "role-secrets",
            r,
            "Role settings-reader reads ConfigMaps, or Secrets",
            "Role",
            objects=lambda s: [
                _create(
                    role(
                        "settings-reader",
                        [
                            {
                                "apiGroups": [""],
                                "resources": [_pick(s, "configmaps", "secrets")],
                                "verbs": ["get", "list", "watch"],
                            }
                        ],
                    )
                )
            ],
            fixed_target="Role/settings-reader",
        ),
        Setting(
            "role-create-pods",
            r,
            "Role batch-runner creates Jobs, or Pods",
            "Role",
            objects=lambda s: [
                _create(
                    role(
                        "batch-runner",
                        [
                            _pick(
                                s,
                                {
                                    "apiGroups": ["batch"],
                                    "resources": ["jobs"],
                                    "verbs": ["create"],
                                },
                                {"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]},
                            )
                        ],
                    )
                )
            ],
            fixed_target="Role/batch-runner",
        ),
        Setting(
            "role-escalate",
            r,
            "Role access-auditor reads Roles, or may bind and escalate them",
            "Role",
            objects=lambda s: [
                _create(
                    role(
                        "access-auditor",
                        [
                            {
                                "apiGroups": ["rbac.authorization.k8s.io"],
                                "resources": ["roles", "rolebindings"],
                                "verbs": _pick(
                                    s, ["get", "list"], ["get", "list", "bind", "escalate"]
                                ),
                            }
                        ],
                    )
                )
            ],
            fixed_target="Role/access-auditor",
        ),
        Setting(
            "cluster-admin-binding",
            r,
            "RoleBinding ops-oncall binds ClusterRole edit, or cluster-admin",
            "RoleBinding",
            objects=lambda s: [
                _create(
                    role_binding(
                        "ops-oncall", "ClusterRole", _pick(s, "edit", "cluster-admin"), "ad"
                    )
                )
            ],
            fixed_target="RoleBinding/ops-oncall",
        ),
        Setting(
            "default-sa-automount",
            r,
            "ServiceAccount default mounts no token, or mounts it",
            "ServiceAccount",
            objects=lambda s: [
                ObjectChange(
                    op="merge-patch",
                    api_version="v1",
                    kind="ServiceAccount",
                    name="default",
                    namespace=NAMESPACE,
                    body={"automountServiceAccountToken": _pick(s, False, True)},
                )
            ],
            fixed_target="ServiceAccount/default",
        ),
    ]


def _namespace_settings() -> list[Setting]:
    def network_policies(s: State) -> list[ObjectChange]:
        if s == State.COMPLIANT:
            return [
                ObjectChange(
                    op="merge-patch",
                    api_version="networking.k8s.io/v1",
                    kind="NetworkPolicy",
                    name="frontend-ingress",
                    namespace=NAMESPACE,
                    body={
                        "metadata": {"labels": {"app.kubernetes.io/part-of": "opentelemetry-demo"}}
                    },
                )
            ]
        return [
            ObjectChange(
                op="delete",
                api_version="networking.k8s.io/v1",
                kind="NetworkPolicy",
                name=name,
                namespace=NAMESPACE,
            )
            for name in ("default-deny-ingress", "frontend-ingress")
        ]

    return [
        Setting(
            "network-policies",
            Scope.NAMESPACE,
            "the namespace keeps its NetworkPolicies, or has none",
            "Namespace",
            objects=network_policies,
            fixed_target=f"Namespace/{NAMESPACE}",
        )
    ]


def _sshd(key: str, good: str, bad: str) -> Callable[[State], Obj]:
    return lambda s: {"sshd": {key: _pick(s, good, bad)}}


def _host_settings() -> list[Setting]:
    h = Scope.HOST

    def host(id_: str, description: str, patch: Callable[[State], Obj]) -> Setting:
        return Setting(id_, h, description, "Host", host=patch, fixed_target=HOST_TARGET)

    return [
        host(
            "sshd-root-login",
            "sshd PermitRootLogin no, or yes",
            _sshd("PermitRootLogin", "no", "yes"),
        ),
        host(
            "sshd-root-login-dropin",
            "a drop-in sshd_config.d/01-access.conf with PermitRootLogin no, or yes (it wins "
            "over the main file)",
            lambda s: {
                "sshdDropIns": {
                    "01-access.conf": {
                        "PermitRootLogin": _pick(s, "no", "yes"),
                        "MaxSessions": "10",
                    }
                }
            },
        ),
        host(
            "sshd-empty-passwords",
            "sshd PermitEmptyPasswords no, or yes",
            _sshd("PermitEmptyPasswords", "no", "yes"),
        ),
        host("sshd-max-auth-tries", "sshd MaxAuthTries 3, or 10", _sshd("MaxAuthTries", "3", "10")),
        host(
            "sshd-x11-forwarding",
            "sshd X11Forwarding no, or yes",
            _sshd("X11Forwarding", "no", "yes"),
        ),
        host(
            "shadow-permissions",
            "/etc/shadow mode 0000, or 0644",
            lambda s: {"files": {"/etc/shadow": {"mode": _pick(s, "0000", "0644")}}},
        ),
        host(
            "passwd-permissions",
            "/etc/passwd mode 0644, or 0666",
            lambda s: {"files": {"/etc/passwd": {"mode": _pick(s, "0644", "0666")}}},
        ),
        host(
            "auditd-service",
            "auditd enabled and active, or disabled and inactive",
            lambda s: {
                "services": {
                    "auditd": _pick(
                        s,
                        {"enabled": "enabled", "active": "active"},
                        {"enabled": "disabled", "active": "inactive"},
                    )
                }
            },
        ),
        host(
            "password-max-days",
            "PASS_MAX_DAYS 90, or 99999 in /etc/login.defs",
            lambda s: {"loginDefs": {"PASS_MAX_DAYS": _pick(s, "90", "99999")}},
        ),
        host(
            "password-min-length",
            "pwquality minlen 15, or 8",
            lambda s: {"pwquality": {"minlen": _pick(s, "15", "8")}},
        ),
        host(
            "telnet-server",
            "the telnet-server package absent, or installed",
            lambda s: {
                "packages": {"telnet-server": _pick(s, None, "0.17-85.el9")},
                "services": {
                    "telnet.socket": _pick(s, None, {"enabled": "enabled", "active": "active"})
                },
            },
        ),
        host(
            "ip-forwarding",
            "net.ipv4.ip_forward 0, or 1",
            lambda s: {"sysctl": {"net.ipv4.ip_forward": _pick(s, "0", "1")}},
        ),
        host(
            "selinux-enforcing",
            "SELinux enforcing, or permissive (running and in /etc/selinux/config)",
            lambda s: {
                "selinux": _pick(
                    s,
                    {"mode": "enforcing", "config": "enforcing"},
                    {"mode": "permissive", "config": "permissive"},
                )
            },
        ),
    ]


SETTINGS: dict[str, Setting] = {
    s.id: s
    for s in (*_workload_settings(), *_rbac_settings(), *_namespace_settings(), *_host_settings())
}
"""Every setting by id."""


def setting(setting_id: str) -> Setting:
    """A setting by id.

    Raises:
        KeyError: No such setting (the message lists the known ids).
    """
    try:
        return SETTINGS[setting_id]
    except KeyError:
        raise KeyError(
            f"unknown setting {setting_id!r} (known: {', '.join(sorted(SETTINGS))})"
        ) from None


def setting_changes(s: Setting, state: State, workload: str) -> list[ObjectChange]:
    """The changes that configure a setting one way on one workload (or namespace-wide)."""
    if s.scope == Scope.WORKLOAD:
        assert s.patch is not None
        return [
            ObjectChange(
                op="merge-patch",
                api_version="apps/v1",
                kind="Deployment",
                name=workload,
                namespace=NAMESPACE,
                body=s.patch(state, workload),
            )
        ]
    if s.scope == Scope.HOST:
        assert s.host is not None
        return [
            ObjectChange(
                op="merge-patch", api_version="v1", kind="Host", name=HOSTNAME, body=s.host(state)
            )
        ]
    assert s.objects is not None
    return s.objects(state)


def setting_target(s: Setting, workload: str) -> str:
    """The target a setting's state decides (`Deployment/<workload>` or its fixed target)."""
    return s.fixed_target or f"{s.target_kind}/{workload}"
