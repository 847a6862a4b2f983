"""The Kubernetes Pod Security Standards (v1.32) over the pod template an object would run.

Pure: an object in, its violations out, each naming the field path and the standard. The level
enforced is every **baseline** control, and the **restricted** controls in the form a workload
breaks only by asking for something: a root user id, an explicit `allowPrivilegeEscalation: true`
or `runAsNonRoot: false`, a capability other than NET_BIND_SERVICE, a volume type other than the
restricted list. The rest of restricted (requiring `allowPrivilegeEscalation: false`, `drop: [ALL]`,
`runAsNonRoot: true` and a RuntimeDefault seccomp profile to be spelled out) is not enforced: the
shop's own chart sets none of them, so enforcing it would refuse re-applying the shop as it ships.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Level(StrEnum):
    """A Pod Security Standards level."""

    BASELINE = "baseline"
    RESTRICTED = "restricted"


@dataclass(frozen=True)
class Violation:
    """One field of a pod template that breaks a Pod Security Standards control.

    Attributes:
        path: The field's path in the object, e.g.
            `spec.template.spec.containers[0].securityContext.privileged`.
        control: The control's name in the standard (`Privileged Containers`, `HostPath Volumes`).
        level: The standard the control belongs to.
        message: What the field holds and what the control allows.
    """

    path: str
    control: str
    level: Level
    message: str


BASELINE_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    }
)
"""Capabilities baseline allows a container to add."""

RESTRICTED_CAPABILITIES = frozenset({"NET_BIND_SERVICE"})
"""The only capability restricted allows a container to add."""

SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
    }
)
"""The sysctls baseline allows (the safe set of Kubernetes 1.32)."""

SELINUX_TYPES = frozenset(
    {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
)
"""SELinux types baseline allows."""

RESTRICTED_VOLUME_SOURCES = frozenset(
    {
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
    }
)
"""Volume sources restricted allows."""

APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"
"""Prefix of the (deprecated) per-container AppArmor annotation."""

TEMPLATE_PATHS: Mapping[str, tuple[str, ...]] = {
    "Pod": (),
    "PodTemplate": ("template",),
    "Deployment": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "ReplicationController": ("spec", "template"),
    "Job": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
}
"""Where each kind that runs pods holds its pod (metadata and spec below this path)."""

_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
_HOST_NAMESPACES = ("hostNetwork", "hostPID", "hostIPC")


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> Sequence[Any]:
    return value if isinstance(value, list) else []


def _join(*parts: str) -> str:
    return ".".join(p for p in parts if p)


@dataclass(frozen=True)
class PodTemplate:
    """The pod an object would run, and where it sits in the object.

    Attributes:
        prefix: Path of the pod's level in the object (`spec.template`; empty for a Pod).
        metadata: The pod's metadata.
        spec: The pod's spec.
    """

    prefix: str
    metadata: Mapping[str, Any]
    spec: Mapping[str, Any]

    def path(self, *parts: str) -> str:
        """The path of a field of the pod (`spec.hostPID` -> `spec.template.spec.hostPID`)."""
        return _join(self.prefix, *parts)


def pod_template(obj: Mapping[str, Any]) -> PodTemplate | None:
    """The pod template of an object of a kind that runs pods, or None for other kinds."""
    steps = TEMPLATE_PATHS.get(str(obj.get("kind") or ""))
    if steps is None:
        return None
    node: Mapping[str, Any] = obj
    for step in steps:
        node = _map(node.get(step))
    return PodTemplate(
        prefix=".".join(steps), metadata=_map(node.get("metadata")), spec=_map(node.get("spec"))
    )


def containers(pod: PodTemplate) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every container, init container and ephemeral container of a pod, with its path."""
    for key in _CONTAINER_LISTS:
        for i, container in enumerate(_list(pod.spec.get(key))):
            yield pod.path("spec", f"{key}[{i}]"), _map(container)


def check(obj: Mapping[str, Any]) -> list[Violation]:
    """Every Pod Security Standards violation of the pod an object would run.

    Args:
        obj: A Kubernetes object (kind selects where its pod template is).

    Returns:
        The violations, in field order; empty for a compliant pod or a kind without pods.
    """
    pod = pod_template(obj)
    return [] if pod is None else check_pod(pod)


def check_pod(pod: PodTemplate) -> list[Violation]:
    """Every Pod Security Standards violation of one pod (see `check`)."""
    out: list[Violation] = []
    spec = pod.spec
    for key in _HOST_NAMESPACES:
        if spec.get(key) not in (None, False):
            out.append(
                _baseline(
                    pod.path("spec", key),
                    "Host Namespaces",
                    f"{key} is {spec.get(key)!r}; sharing the host's namespaces is not allowed",
                )
            )
    pod_context = _map(spec.get("securityContext"))
    out += _context_violations(pod.path("spec", "securityContext"), pod_context)
    for i, sysctl in enumerate(_list(pod_context.get("sysctls"))):
        name = _map(sysctl).get("name")
        if name not in SAFE_SYSCTLS:
            out.append(
                _baseline(
                    pod.path("spec", "securityContext", f"sysctls[{i}]", "name"),
                    "Sysctls",
                    f"sysctl {name!r} is not in the safe set ({', '.join(sorted(SAFE_SYSCTLS))})",
                )
            )
    out += _volume_violations(pod)
    for path, container in containers(pod):
        out += _container_violations(path, container)
    out += _annotation_violations(pod)
    return out


def _baseline(path: str, control: str, message: str) -> Violation:
    return Violation(path=path, control=control, level=Level.BASELINE, message=message)


def _restricted(path: str, control: str, message: str) -> Violation:
    return Violation(path=path, control=control, level=Level.RESTRICTED, message=message)


def _context_violations(path: str, context: Mapping[str, Any]) -> list[Violation]:
    """The controls a pod's and a container's securityContext share."""
    out: list[Violation] = []
    windows = _map(context.get("windowsOptions"))
    if windows.get("hostProcess") not in (None, False):
        out.append(
            _baseline(
                _join(path, "windowsOptions", "hostProcess"),
                "HostProcess",
                "Windows HostProcess containers run with the host's privileges",
            )
        )
    selinux = _map(context.get("seLinuxOptions"))
    if selinux.get("type", "") not in SELINUX_TYPES:
        out.append(
            _baseline(
                _join(path, "seLinuxOptions", "type"),
                "SELinux",
                f"SELinux type {selinux.get('type')!r} is not one of "
                f"{', '.join(sorted(t for t in SELINUX_TYPES if t))}",
            )
        )
    for key in ("user", "role"):
        if selinux.get(key) not in (None, ""):
            out.append(
                _baseline(
                    _join(path, "seLinuxOptions", key),
                    "SELinux",
                    f"a custom SELinux {key} ({selinux.get(key)!r}) is not allowed",
                )
            )
    seccomp = _map(context.get("seccompProfile"))
    if seccomp.get("type") == "Unconfined":
        out.append(
            _baseline(
                _join(path, "seccompProfile", "type"),
                "Seccomp",
                "the Unconfined seccomp profile is not allowed (RuntimeDefault or Localhost)",
            )
        )
    apparmor = _map(context.get("appArmorProfile"))
    if apparmor.get("type") not in (None, "RuntimeDefault", "Localhost"):
        out.append(
            _baseline(
                _join(path, "appArmorProfile", "type"),
                "AppArmor",
                f"AppArmor profile {apparmor.get('type')!r} is not allowed "
                "(RuntimeDefault or Localhost)",
            )
        )
    if context.get("runAsNonRoot") is False:
        out.append(
            _restricted(
                _join(path, "runAsNonRoot"),
                "Running as Non-root",
                "runAsNonRoot: false lets the container run as root",
            )
        )
    user = context.get("runAsUser")
    if isinstance(user, int) and not isinstance(user, bool) and user == 0:
        out.append(
            _restricted(
                _join(path, "runAsUser"),
                "Running as Non-root user",
                "runAsUser: 0 runs the container as root",
            )
        )
    return out


def _container_violations(path: str, container: Mapping[str, Any]) -> list[Violation]:
    out: list[Violation] = []
    context = _map(container.get("securityContext"))
    context_path = _join(path, "securityContext")
    if context.get("privileged") not in (None, False):
        out.append(
            _baseline(
                _join(context_path, "privileged"),
                "Privileged Containers",
                "privileged containers are not allowed (unset or false)",
            )
        )
    added = _list(_map(context.get("capabilities")).get("add"))
    for i, capability in enumerate(added):
        cap_path = _join(context_path, "capabilities", f"add[{i}]")
        if capability not in BASELINE_CAPABILITIES:
            out.append(
                _baseline(
                    cap_path,
                    "Capabilities",
                    f"capability {capability!r} is beyond the baseline list "
                    f"({', '.join(sorted(BASELINE_CAPABILITIES))})",
                )
            )
        elif capability not in RESTRICTED_CAPABILITIES:
            out.append(
                _restricted(
                    cap_path,
                    "Capabilities",
                    f"capability {capability!r} may not be added (only NET_BIND_SERVICE)",
                )
            )
    if context.get("procMount") not in (None, "Default"):
        out.append(
            _baseline(
                _join(context_path, "procMount"),
                "/proc Mount Type",
                f"procMount {context.get('procMount')!r} unmasks /proc (only Default)",
            )
        )
    if context.get("allowPrivilegeEscalation") is True:
        out.append(
            _restricted(
                _join(context_path, "allowPrivilegeEscalation"),
                "Privilege Escalation",
                "allowPrivilegeEscalation: true lets a process gain more privileges than its "
                "parent",
            )
        )
    out += _context_violations(context_path, context)
    for i, port in enumerate(_list(container.get("ports"))):
        host_port = _map(port).get("hostPort")
        if host_port not in (None, 0):
            out.append(
                _baseline(
                    _join(path, f"ports[{i}]", "hostPort"),
                    "Host Ports",
                    f"hostPort {host_port!r} binds a port of the node (unset or 0)",
                )
            )
    return out


def _volume_violations(pod: PodTemplate) -> list[Violation]:
    out: list[Violation] = []
    for i, volume in enumerate(_list(pod.spec.get("volumes"))):
        volume = _map(volume)
        base = pod.path("spec", f"volumes[{i}]")
        if "hostPath" in volume:
            host_path = _map(volume.get("hostPath")).get("path")
            out.append(
                _baseline(
                    _join(base, "hostPath"),
                    "HostPath Volumes",
                    f"hostPath volume {host_path!r} mounts the node's file system",
                )
            )
            continue
        for source in sorted(set(volume) - {"name"} - RESTRICTED_VOLUME_SOURCES):
            out.append(
                _restricted(
                    _join(base, source),
                    "Volume Types",
                    f"volume type {source!r} is not allowed "
                    f"({', '.join(sorted(RESTRICTED_VOLUME_SOURCES))})",
                )
            )
    return out


def _annotation_violations(pod: PodTemplate) -> list[Violation]:
    out: list[Violation] = []
    for key, value in sorted(_map(pod.metadata.get("annotations")).items()):
        if not str(key).startswith(APPARMOR_ANNOTATION):
            continue
        text = str(value)
        if text in ("", "runtime/default") or text.startswith("localhost/"):
            continue
        out.append(
            _baseline(
                pod.path("metadata", f"annotations[{key}]"),
                "AppArmor",
                f"AppArmor profile {text!r} is not allowed (runtime/default or localhost/*)",
            )
        )
    return out


def worst_level(violations: Sequence[Violation]) -> Level | None:
    """The most basic standard broken: baseline when any baseline control is, else restricted."""
    if not violations:
        return None
    return (
        Level.BASELINE if any(v.level == Level.BASELINE for v in violations) else Level.RESTRICTED
    )
