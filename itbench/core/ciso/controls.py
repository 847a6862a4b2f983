"""The CISO catalog as data: one control per scenario, its class, the setting its variants
configure, the CIS recommendation it implements and the requirement the agent is given.

`scenario_document` writes a control as a scenario template of the catalog: the seed draws the
variant (`state`: compliant or non-compliant), for workload settings the Deployment that
carries the setting, and the other CIS weaknesses of the environment (`background`, see
`itbench.core.ciso.background`), so that no fixed answer passes both the instance and its
counterpart and no policy flagging every weakness passes either. The requirement names the
recommendation and the targets to assess, never the variant, the Deployment or the weaknesses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from itbench.core.ciso.background import BACKGROUND_DRAWS
from itbench.core.ciso.classes import CLASS_RULES, CisoClass
from itbench.core.ciso.faults import BACKGROUND_FAULT, POLICY_SET_FAULT, SETTING_FAULT
from itbench.core.ciso.host import HOST_TARGET
from itbench.core.ciso.namespace import NAMESPACE
from itbench.core.ciso.settings import SETTINGS, Scope

K = CisoClass.KYVERNO
P = CisoClass.K8S_OPA
R = CisoClass.RHEL9_OPA
U = CisoClass.KYVERNO_UPDATE

POLICY_SET = "pod-security-baseline"
"""The policy set the update scenarios install."""


@dataclass(frozen=True)
class Control:
    """One CISO scenario's control.

    Attributes:
        name: The scenario's name (`ciso-...`).
        cls: Its class.
        setting: The setting its variants configure (`itbench.core.ciso.settings`).
        cis: The CIS recommendation, e.g. `CIS Kubernetes 5.2.2`.
        title: The recommendation's title.
        requirement: What the policy must check, in words (the task shows it).
        workloads: The Deployments the seed draws from (workload settings).
        update: Update class: the installed policy the requirement concerns.
    """

    name: str
    cls: CisoClass
    setting: str
    cis: str
    title: str
    requirement: str
    workloads: tuple[str, ...] = ()
    update: str = ""

    @property
    def control_id(self) -> str:
        """The id the ground truth and a posture report use."""
        return f"{self.cis} {self.setting}"

    @property
    def target_kind(self) -> str:
        """The kind of the targets assessed."""
        return SETTINGS[self.setting].target_kind


W1 = ("cart", "checkout", "payment", "ad")
W2 = ("frontend", "shipping", "recommendation", "email")
W3 = ("product-catalog", "currency", "cart", "email")

CONTROLS: tuple[Control, ...] = (
    # ---- Kyverno: a new Kubernetes control as a CEL policy (easy) --------------------------
    Control("ciso-kyverno-host-network", K, "host-network", "CIS Kubernetes 5.2.5",
            "Minimize the admission of containers wishing to share the host network namespace",
            "No pod may use the host's network namespace (hostNetwork).", W1),
    Control("ciso-kyverno-host-pid", K, "host-pid", "CIS Kubernetes 5.2.3",
            "Minimize the admission of containers wishing to share the host process ID namespace",
            "No pod may share the host's process ID namespace (hostPID).", W2),
    Control("ciso-kyverno-host-ipc", K, "host-ipc", "CIS Kubernetes 5.2.4",
            "Minimize the admission of containers wishing to share the host IPC namespace",
            "No pod may share the host's IPC namespace (hostIPC).", W3),
    Control("ciso-kyverno-privileged", K, "privileged", "CIS Kubernetes 5.2.2",
            "Minimize the admission of privileged containers",
            "No container may run privileged.", W1),
    Control("ciso-kyverno-privilege-escalation", K, "privilege-escalation",
            "CIS Kubernetes 5.2.6",
            "Minimize the admission of containers with allowPrivilegeEscalation",
            "Every container must set allowPrivilegeEscalation to false.", W2),
    Control("ciso-kyverno-run-as-root", K, "run-as-root", "CIS Kubernetes 5.2.7",
            "Minimize the admission of root containers",
            "Pods must run as non-root: runAsNonRoot true at pod level, and no container may "
            "run as UID 0 or set runAsNonRoot false.", W3),
    Control("ciso-kyverno-net-raw", K, "net-raw", "CIS Kubernetes 5.2.8",
            "Minimize the admission of containers with the NET_RAW capability",
            "No container may add the NET_RAW capability (nor ALL).", W1),
    Control("ciso-kyverno-added-capabilities", K, "added-capabilities", "CIS Kubernetes 5.2.9",
            "Minimize the admission of containers with added capabilities",
            "No container may add any capability.", W2),
    Control("ciso-kyverno-host-path", K, "host-path", "CIS Kubernetes 5.2.12",
            "Minimize the admission of HostPath volumes",
            "No pod may mount a hostPath volume.", W3),
    Control("ciso-kyverno-host-port", K, "host-port", "CIS Kubernetes 5.2.13",
            "Minimize the admission of containers which use HostPorts",
            "No container port may set a hostPort.", W1),
    Control("ciso-kyverno-seccomp", K, "seccomp", "CIS Kubernetes 5.7.2",
            "Ensure that the seccomp profile is set to docker/default in your Pod definitions",
            "Every pod must set its seccomp profile to RuntimeDefault or Localhost.", W2),
    Control("ciso-kyverno-automount-token", K, "automount-token", "CIS Kubernetes 5.1.6",
            "Ensure that Service Account Tokens are only mounted where necessary",
            "Every pod must set automountServiceAccountToken to false.", W3),
    # ---- K8sOPA: a new Kubernetes control as a kubectl collection and Rego (medium) --------
    Control("ciso-opa-privileged-init", P, "privileged-init", "CIS Kubernetes 5.2.2",
            "Minimize the admission of privileged containers",
            "No container of a Deployment's pod template, init containers included, may run "
            "privileged.", W1),
    Control("ciso-opa-privilege-escalation-init", P, "privilege-escalation-init",
            "CIS Kubernetes 5.2.6",
            "Minimize the admission of containers with allowPrivilegeEscalation",
            "Every container of a Deployment's pod template, init containers included, must "
            "set allowPrivilegeEscalation to false.", W2),
    Control("ciso-opa-drop-capabilities", P, "drop-capabilities", "CIS Kubernetes 5.2.10",
            "Minimize the admission of containers with capabilities assigned",
            "Every container of a Deployment's pod template must drop ALL capabilities.", W3),
    Control("ciso-opa-seccomp-container", P, "seccomp-container", "CIS Kubernetes 5.7.2",
            "Ensure that the seccomp profile is set to docker/default in your Pod definitions",
            "No Deployment's pod template may set a seccomp profile of type Unconfined, at pod "
            "or at container level.", W1),
    Control("ciso-opa-default-service-account", P, "default-service-account",
            "CIS Kubernetes 5.1.5",
            "Ensure that default service accounts are not actively used",
            "No Deployment's pods may run as the namespace's default ServiceAccount (set "
            "serviceAccountName to an account of their own).", W2),
    Control("ciso-opa-secret-env", P, "secret-env", "CIS Kubernetes 5.4.1",
            "Prefer using Secrets as files over Secrets as environment variables",
            "No container of a Deployment's pod template may read a Secret into an environment "
            "variable (env valueFrom.secretKeyRef or envFrom.secretRef).", W3),
    Control("ciso-opa-role-wildcard", P, "role-wildcard", "CIS Kubernetes 5.1.3",
            "Minimize wildcard use in Roles and ClusterRoles",
            "No Role of the namespace may use '*' in its apiGroups, resources or verbs."),
    Control("ciso-opa-role-secrets", P, "role-secrets", "CIS Kubernetes 5.1.2",
            "Minimize access to secrets",
            "No Role of the namespace may grant get, list or watch on Secrets."),
    Control("ciso-opa-role-create-pods", P, "role-create-pods", "CIS Kubernetes 5.1.4",
            "Minimize access to create pods",
            "No Role of the namespace may grant create on Pods."),
    Control("ciso-opa-role-escalate", P, "role-escalate", "CIS Kubernetes 5.1.8",
            "Limit use of the Bind, Impersonate and Escalate permissions in the Kubernetes "
            "cluster",
            "No Role of the namespace may grant the bind, escalate or impersonate verbs."),
    Control("ciso-opa-cluster-admin-binding", P, "cluster-admin-binding", "CIS Kubernetes 5.1.1",
            "Ensure that the cluster-admin role is only used where required",
            "No RoleBinding of the namespace may bind the cluster-admin ClusterRole."),
    Control("ciso-opa-default-sa-automount", P, "default-sa-automount", "CIS Kubernetes 5.1.5",
            "Ensure that default service accounts are not actively used",
            "Every ServiceAccount of the namespace must set automountServiceAccountToken to "
            "false."),
    Control("ciso-opa-network-policies", P, "network-policies", "CIS Kubernetes 5.3.2",
            "Ensure that all Namespaces have Network Policies defined",
            f"The namespace {NAMESPACE} must have at least one NetworkPolicy."),
    # ---- RHEL9OPA: a RHEL9 control as an Ansible or script collection and Rego (medium) ----
    Control("ciso-rhel9-sshd-root-login", R, "sshd-root-login", "CIS RHEL9 5.1.20",
            "Ensure sshd PermitRootLogin is disabled",
            "sshd's effective PermitRootLogin must be no."),
    Control("ciso-rhel9-sshd-root-login-dropin", R, "sshd-root-login-dropin",
            "CIS RHEL9 5.1.20",
            "Ensure sshd PermitRootLogin is disabled (drop-in configuration included)",
            "sshd's effective PermitRootLogin must be no, whatever file of sshd's configuration "
            "sets it."),
    Control("ciso-rhel9-sshd-empty-passwords", R, "sshd-empty-passwords", "CIS RHEL9 5.1.19",
            "Ensure sshd PermitEmptyPasswords is disabled",
            "sshd's effective PermitEmptyPasswords must be no."),
    Control("ciso-rhel9-sshd-max-auth-tries", R, "sshd-max-auth-tries", "CIS RHEL9 5.1.16",
            "Ensure sshd MaxAuthTries is configured",
            "sshd's effective MaxAuthTries must be 4 or less."),
    Control("ciso-rhel9-sshd-x11-forwarding", R, "sshd-x11-forwarding", "CIS RHEL9 5.1.10",
            "Ensure sshd X11Forwarding is disabled",
            "sshd's effective X11Forwarding must be no."),
    Control("ciso-rhel9-shadow-permissions", R, "shadow-permissions", "CIS RHEL9 7.1.5",
            "Ensure permissions on /etc/shadow are configured",
            "/etc/shadow must have mode 0000 and be owned by root:root."),
    Control("ciso-rhel9-passwd-permissions", R, "passwd-permissions", "CIS RHEL9 7.1.1",
            "Ensure permissions on /etc/passwd are configured",
            "/etc/passwd must have mode 0644 or stricter (no write bit for group or others) and "
            "be owned by root:root."),
    Control("ciso-rhel9-auditd-service", R, "auditd-service", "CIS RHEL9 6.3.1.4",
            "Ensure auditd service is enabled and active",
            "The auditd service must be enabled and active."),
    Control("ciso-rhel9-password-max-days", R, "password-max-days", "CIS RHEL9 5.4.1.1",
            "Ensure password expiration is configured",
            "PASS_MAX_DAYS in /etc/login.defs must be 365 or less."),
    Control("ciso-rhel9-password-min-length", R, "password-min-length", "CIS RHEL9 5.3.3.2.2",
            "Ensure minimum password length is configured",
            "pwquality's minlen (/etc/security/pwquality.conf) must be 14 or more."),
    Control("ciso-rhel9-telnet-server", R, "telnet-server", "CIS RHEL9 2.1.17",
            "Ensure telnet-server services are not in use",
            "The telnet-server package must not be installed."),
    Control("ciso-rhel9-ip-forwarding", R, "ip-forwarding", "CIS RHEL9 3.3.1",
            "Ensure ip forwarding is disabled",
            "The kernel parameter net.ipv4.ip_forward must be 0."),
    Control("ciso-rhel9-selinux-enforcing", R, "selinux-enforcing", "CIS RHEL9 1.3.1.5",
            "Ensure the SELinux mode is enforcing",
            "SELinux must run in enforcing mode and be configured so in /etc/selinux/config."),
    # ---- KyvernoUpdate: the installed policy set updated for a changed requirement (hard) --
    Control("ciso-update-host-ipc", U, "host-ipc", "CIS Kubernetes 5.2.4",
            "Minimize the admission of containers wishing to share the host IPC namespace",
            "The requirement behind disallow-host-namespaces now covers the host's IPC "
            "namespace too: no pod may set hostIPC.", W1, "disallow-host-namespaces"),
    Control("ciso-update-privileged-init", U, "privileged-init", "CIS Kubernetes 5.2.2",
            "Minimize the admission of privileged containers",
            "disallow-privileged-containers must now cover init containers: no container, init "
            "containers included, may run privileged.", W2, "disallow-privileged-containers"),
    Control("ciso-update-net-raw", U, "net-raw", "CIS Kubernetes 5.2.8",
            "Minimize the admission of containers with the NET_RAW capability",
            "restrict-capabilities must no longer allow NET_RAW: containers may add "
            "NET_BIND_SERVICE only.", W3, "restrict-capabilities"),
    Control("ciso-update-run-as-root", U, "run-as-root", "CIS Kubernetes 5.2.7",
            "Minimize the admission of root containers",
            "require-run-as-non-root must also refuse containers that override the pod: none "
            "may run as UID 0 or set runAsNonRoot false.", W1, "require-run-as-non-root"),
    Control("ciso-update-seccomp-container", U, "seccomp-container", "CIS Kubernetes 5.7.2",
            "Ensure that the seccomp profile is set to docker/default in your Pod definitions",
            "restrict-seccomp must also check containers: no container may set a seccomp "
            "profile of type Unconfined.", W2, "restrict-seccomp"),
    Control("ciso-update-privilege-escalation-init", U, "privilege-escalation-init",
            "CIS Kubernetes 5.2.6",
            "Minimize the admission of containers with allowPrivilegeEscalation",
            "disallow-privilege-escalation must now cover init containers: every container, "
            "init containers included, must set allowPrivilegeEscalation to false.", W3,
            "disallow-privilege-escalation"),
)  # fmt: skip
"""Every CISO scenario's control."""

CONTROL_BY_NAME: dict[str, Control] = {c.name: c for c in CONTROLS}


def _targets(control: Control) -> str:
    kind = control.target_kind
    if kind == "Host":
        return f"the RHEL9 host {HOST_TARGET}"
    if kind == "Namespace":
        return f"the namespace itself (Namespace/{NAMESPACE})"
    return f"every {kind} of namespace {NAMESPACE}"


def requirement_text(control: Control) -> str:
    """The requirement the agent is given: recommendation, what to check, what to submit."""
    rules = CLASS_RULES[control.cls]
    lines = [
        f"[{control.control_id}] {control.cis}: {control.title}.",
        "",
        f"Requirement: {control.requirement}",
        f"Assess {_targets(control)}; name targets as `Kind/name`.",
    ]
    if control.cls == CisoClass.KYVERNO_UPDATE:
        lines.append(
            f"The namespace's policy set ({POLICY_SET}) is installed as Kyverno "
            f"ValidatingPolicies (read them with the objects API, kind validatingpolicies); "
            f"the requirement concerns {control.update}."
        )
    lines += ["", rules.summary]
    return "\n".join(lines)


def control_of(requirement: str) -> Control | None:
    """The control whose requirement a text is (None: no control's)."""
    text = requirement.strip()
    for control in CONTROLS:
        if requirement_text(control) == text:
            return control
    return None


def scenario_document(control: Control) -> dict[str, Any]:
    """The control as a scenario template (a document of `scenarios/ciso/<name>/`)."""
    setting = SETTINGS[control.setting]
    parameters: dict[str, Any] = {
        "state": {
            "description": "Which variant: the setting configured compliantly or not.",
            "choices": ["compliant", "noncompliant"],
        }
    }
    args: dict[str, Any] = {"setting": control.setting, "state": "${state}"}
    if setting.scope == Scope.WORKLOAD:
        parameters["workload"] = {
            "description": "The Deployment that carries the setting.",
            "choices": list(control.workloads),
        }
        args["workload"] = "${workload}"
    parameters["background"] = {
        "description": "Which other CIS weaknesses the environment carries (never the assessed "
        "setting's, the same in both variants).",
        "range": {"min": 0, "max": BACKGROUND_DRAWS - 1},
    }
    background: dict[str, Any] = {"setting": control.setting, "draw": "${background}"}
    if setting.scope == Scope.WORKLOAD:
        background["workload"] = "${workload}"
    if control.cls == CisoClass.KYVERNO_UPDATE:
        background["set"] = POLICY_SET
    faults: list[dict[str, Any]] = []
    if control.cls == CisoClass.KYVERNO_UPDATE:
        faults.append(
            {"id": POLICY_SET_FAULT, "args": {"set": POLICY_SET, "update": control.update}}
        )
    faults.append({"id": SETTING_FAULT, "args": args})
    faults.append({"id": BACKGROUND_FAULT, "args": background})
    technologies = {
        CisoClass.KYVERNO: ["Kubernetes", "Kyverno", "CEL"],
        CisoClass.K8S_OPA: ["Kubernetes", "kubectl", "OPA", "Rego"],
        CisoClass.RHEL9_OPA: ["RHEL9", "Ansible", "OPA", "Rego"],
        CisoClass.KYVERNO_UPDATE: ["Kubernetes", "Kyverno", "CEL"],
    }[control.cls]
    return {
        "apiVersion": "itbench.io/v1alpha1",
        "kind": "Scenario",
        "metadata": {"name": control.name, "labels": {"itbench.io/domain": "ciso"}},
        "spec": {
            "title": f"{control.cis}: {control.title}",
            "description": requirement_text(control),
            "domain": "CISO",
            "class": control.cls.value,
            "complexity": CLASS_RULES[control.cls].complexity.value,
            "parameters": parameters,
            "environment": {
                "application": "astronomy-shop",
                "namespace": NAMESPACE,
                "telemetry": {"metrics": False, "logs": False, "traces": False},
                "technologies": technologies,
            },
            "triggers": {"alerts": [], "timeoutSeconds": 900},
            "desiredOutcome": {
                "description": "The submitted artefacts give every target its right posture, on "
                "this variant and on its counterpart.",
                "alertsCleared": False,
                "observationWindowSeconds": 0,
            },
            "faults": faults,
        },
    }
