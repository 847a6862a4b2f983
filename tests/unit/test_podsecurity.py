"""The Pod Security Standards checker: each control, each field path, each kind's template, and
the shop's own pods passing."""

from __future__ import annotations

from copy import deepcopy
from typing import Any

import pytest

from itbench.core import podsecurity
from itbench.core.podsecurity import Level
from itbench.environments.sim import SimEnvironment


def _deployment(
    pod_spec: dict[str, Any], annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    template: dict[str, Any] = {"metadata": {"labels": {"app": "x"}}, "spec": pod_spec}
    if annotations:
        template["metadata"]["annotations"] = annotations
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "x"},
        "spec": {"template": template},
    }


def _container(**security: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": "busybox"}
    if security:
        container["securityContext"] = security
    return container


T = "spec.template.spec"
C0 = f"{T}.containers[0]"

CASES: list[tuple[dict[str, Any], str, str, Level]] = [
    (
        {"hostNetwork": True, "containers": [_container()]},
        f"{T}.hostNetwork",
        "Host Namespaces",
        Level.BASELINE,
    ),
    (
        {"hostPID": True, "containers": [_container()]},
        f"{T}.hostPID",
        "Host Namespaces",
        Level.BASELINE,
    ),
    (
        {"hostIPC": True, "containers": [_container()]},
        f"{T}.hostIPC",
        "Host Namespaces",
        Level.BASELINE,
    ),
    (
        {"containers": [_container(privileged=True)]},
        f"{C0}.securityContext.privileged",
        "Privileged Containers",
        Level.BASELINE,
    ),
    (
        {"containers": [_container(capabilities={"add": ["NET_BIND_SERVICE", "SYS_ADMIN"]})]},
        f"{C0}.securityContext.capabilities.add[1]",
        "Capabilities",
        Level.BASELINE,
    ),
    (
        {"containers": [_container(capabilities={"add": ["CHOWN"]})]},
        f"{C0}.securityContext.capabilities.add[0]",
        "Capabilities",
        Level.RESTRICTED,
    ),
    (
        {"containers": [_container()], "volumes": [{"name": "root", "hostPath": {"path": "/"}}]},
        f"{T}.volumes[0].hostPath",
        "HostPath Volumes",
        Level.BASELINE,
    ),
    (
        {
            "containers": [
                {"name": "c", "image": "i", "ports": [{"containerPort": 80, "hostPort": 80}]}
            ]
        },
        f"{C0}.ports[0].hostPort",
        "Host Ports",
        Level.BASELINE,
    ),
    (
        {"containers": [_container(procMount="Unmasked")]},
        f"{C0}.securityContext.procMount",
        "/proc Mount Type",
        Level.BASELINE,
    ),
    (
        {"containers": [_container()], "securityContext": {"seLinuxOptions": {"type": "spc_t"}}},
        f"{T}.securityContext.seLinuxOptions.type",
        "SELinux",
        Level.BASELINE,
    ),
    (
        {"containers": [_container(seLinuxOptions={"user": "system_u"})]},
        f"{C0}.securityContext.seLinuxOptions.user",
        "SELinux",
        Level.BASELINE,
    ),
    (
        {"containers": [_container(seccompProfile={"type": "Unconfined"})]},
        f"{C0}.securityContext.seccompProfile.type",
        "Seccomp",
        Level.BASELINE,
    ),
    (
        {
            "containers": [_container()],
            "securityContext": {"seccompProfile": {"type": "Unconfined"}},
        },
        f"{T}.securityContext.seccompProfile.type",
        "Seccomp",
        Level.BASELINE,
    ),
    (
        {"containers": [_container(appArmorProfile={"type": "Unconfined"})]},
        f"{C0}.securityContext.appArmorProfile.type",
        "AppArmor",
        Level.BASELINE,
    ),
    (
        {
            "containers": [_container()],
            "securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]},
        },
        f"{T}.securityContext.sysctls[0].name",
        "Sysctls",
        Level.BASELINE,
    ),
    (
        {"containers": [_container(windowsOptions={"hostProcess": True})]},
        f"{C0}.securityContext.windowsOptions.hostProcess",
        "HostProcess",
        Level.BASELINE,
    ),
    (
        {"containers": [_container(allowPrivilegeEscalation=True)]},
        f"{C0}.securityContext.allowPrivilegeEscalation",
        "Privilege Escalation",
        Level.RESTRICTED,
    ),
    (
        {"containers": [_container(runAsUser=0)]},
        f"{C0}.securityContext.runAsUser",
        "Running as Non-root user",
        Level.RESTRICTED,
    ),
    (
        {"containers": [_container()], "securityContext": {"runAsNonRoot": False}},
        f"{T}.securityContext.runAsNonRoot",
        "Running as Non-root",
        Level.RESTRICTED,
    ),
    (
        {
            "containers": [_container()],
            "volumes": [{"name": "n", "nfs": {"server": "s", "path": "/"}}],
        },
        f"{T}.volumes[0].nfs",
        "Volume Types",
        Level.RESTRICTED,
    ),
    (
        {"initContainers": [_container(privileged=True)], "containers": [_container()]},
        f"{T}.initContainers[0].securityContext.privileged",
        "Privileged Containers",
        Level.BASELINE,
    ),
    (
        {"containers": [_container()], "ephemeralContainers": [_container(privileged=True)]},
        f"{T}.ephemeralContainers[0].securityContext.privileged",
        "Privileged Containers",
        Level.BASELINE,
    ),
]


@pytest.mark.parametrize(("spec", "path", "control", "level"), CASES, ids=[c[1] for c in CASES])
def test_each_control_names_its_field_path_and_standard(
    spec: dict[str, Any], path: str, control: str, level: Level
) -> None:
    violations = podsecurity.check(_deployment(spec))
    assert [(v.path, v.control, v.level) for v in violations] == [(path, control, level)]
    assert violations[0].message


def test_an_apparmor_annotation_other_than_runtime_default_or_localhost_is_refused() -> None:
    key = "container.apparmor.security.beta.kubernetes.io/c"
    bad = podsecurity.check(_deployment({"containers": [_container()]}, {key: "unconfined"}))
    assert [(v.path, v.control) for v in bad] == [
        (f"spec.template.metadata.annotations[{key}]", "AppArmor")
    ]
    for allowed in ("runtime/default", "localhost/my-profile"):
        assert podsecurity.check(_deployment({"containers": [_container()]}, {key: allowed})) == []


def test_allowed_values_pass() -> None:
    spec = {
        "hostNetwork": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 1000,
            "seccompProfile": {"type": "RuntimeDefault"},
            "seLinuxOptions": {"type": "container_t"},
            "sysctls": [{"name": "net.ipv4.ip_local_port_range", "value": "1024 65535"}],
        },
        "containers": [
            _container(
                privileged=False,
                allowPrivilegeEscalation=False,
                capabilities={"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]},
                procMount="Default",
                appArmorProfile={"type": "RuntimeDefault"},
            )
        ],
        "volumes": [{"name": "cfg", "configMap": {"name": "x"}}, {"name": "tmp", "emptyDir": {}}],
    }
    assert podsecurity.check(_deployment(spec)) == []


BAD_POD = {"hostPID": True, "containers": [_container(privileged=True)]}


@pytest.mark.parametrize(
    ("obj", "prefix"),
    [
        ({"kind": "Pod", "spec": BAD_POD}, "spec"),
        ({"kind": "DaemonSet", "spec": {"template": {"spec": BAD_POD}}}, "spec.template.spec"),
        ({"kind": "StatefulSet", "spec": {"template": {"spec": BAD_POD}}}, "spec.template.spec"),
        ({"kind": "ReplicaSet", "spec": {"template": {"spec": BAD_POD}}}, "spec.template.spec"),
        ({"kind": "Job", "spec": {"template": {"spec": BAD_POD}}}, "spec.template.spec"),
        (
            {"kind": "CronJob", "spec": {"jobTemplate": {"spec": {"template": {"spec": BAD_POD}}}}},
            "spec.jobTemplate.spec.template.spec",
        ),
        ({"kind": "PodTemplate", "template": {"spec": BAD_POD}}, "template.spec"),
    ],
)
def test_every_kind_that_runs_pods_is_checked_at_its_template(
    obj: dict[str, Any], prefix: str
) -> None:
    paths = [v.path for v in podsecurity.check(obj)]
    assert paths == [f"{prefix}.hostPID", f"{prefix}.containers[0].securityContext.privileged"]


def test_kinds_without_pods_and_malformed_values_give_no_violations() -> None:
    assert podsecurity.check({"kind": "ConfigMap", "data": {"privileged": "true"}}) == []
    assert podsecurity.check({"kind": "Deployment", "spec": {"template": "not a map"}}) == []
    odd = {"kind": "Pod", "spec": {"containers": "x", "volumes": [1, None]}}
    assert podsecurity.check(odd) == []


def test_worst_level_is_baseline_when_any_baseline_control_is_broken() -> None:
    mixed = podsecurity.check(
        _deployment({"containers": [_container(runAsUser=0, privileged=True)]})
    )
    assert podsecurity.worst_level(mixed) == Level.BASELINE
    only_restricted = podsecurity.check(_deployment({"containers": [_container(runAsUser=0)]}))
    assert podsecurity.worst_level(only_restricted) == Level.RESTRICTED
    assert podsecurity.worst_level([]) is None


def test_the_shops_own_pods_and_workloads_pass_the_enforced_level() -> None:
    twin = SimEnvironment(seed=7)
    twin.provision()
    checked = 0
    for kind in ("Pod", "Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job", "CronJob"):
        for obj in twin.get_objects(kind):
            assert podsecurity.check(obj) == [], f"{kind}/{obj['metadata']['name']}"
            checked += 1
    assert checked >= 60
    # The full restricted profile would refuse them: none spells out the required settings.
    cart = next(d for d in twin.get_objects("Deployment") if d["metadata"]["name"] == "cart")
    context = cart["spec"]["template"]["spec"]["containers"][0].get("securityContext") or {}
    assert context.get("allowPrivilegeEscalation") is not False


def test_a_copy_of_a_shop_workload_made_privileged_is_caught() -> None:
    twin = SimEnvironment(seed=7)
    twin.provision()
    cart = deepcopy(
        next(d for d in twin.get_objects("Deployment") if d["metadata"]["name"] == "cart")
    )
    cart["spec"]["template"]["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    assert [v.path for v in podsecurity.check(cart)] == [
        "spec.template.spec.containers[0].securityContext.privileged"
    ]
