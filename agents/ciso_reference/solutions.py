"""The reference artefacts: for each setting a CISO control assesses, the CEL validation or the
Rego rules that decide it, and the evidence collections they read.

Written by hand from the CIS recommendations, as a compliance engineer would: each policy
checks the requirement on every object (an absent field as well as a present one), so it holds
on any variant of its scenario.
"""

from __future__ import annotations

import json
from typing import Any

# ---- Kyverno: CEL over a Pod ------------------------------------------------------------------

_ALL = (
    "(has(object.spec.initContainers) ? object.spec.initContainers : []) + object.spec.containers"
)
"""Every container of the pod, init containers included."""


def _sc(field: str) -> str:
    return f"has(c.securityContext) && has(c.securityContext.{field})"


CEL: dict[str, str] = {
    "host-network": "!has(object.spec.hostNetwork) || object.spec.hostNetwork == false",
    "host-pid": "!has(object.spec.hostPID) || object.spec.hostPID == false",
    "host-ipc": "!has(object.spec.hostIPC) || object.spec.hostIPC == false",
    "privileged": f"({_ALL}).all(c, !({_sc('privileged')}) || "
    "c.securityContext.privileged == false)",
    "privilege-escalation": f"({_ALL}).all(c, {_sc('allowPrivilegeEscalation')} && "
    "c.securityContext.allowPrivilegeEscalation == false)",
    "run-as-root": "has(object.spec.securityContext) && "
    "has(object.spec.securityContext.runAsNonRoot) && "
    "object.spec.securityContext.runAsNonRoot == true && "
    f"({_ALL}).all(c, !has(c.securityContext) || "
    "((!has(c.securityContext.runAsNonRoot) || c.securityContext.runAsNonRoot == true) && "
    "(!has(c.securityContext.runAsUser) || c.securityContext.runAsUser != 0)))",
    "net-raw": f"({_ALL}).all(c, !({_sc('capabilities')}) || "
    "!has(c.securityContext.capabilities.add) || "
    "!c.securityContext.capabilities.add.exists(a, a == 'NET_RAW' || a == 'ALL'))",
    "added-capabilities": f"({_ALL}).all(c, !({_sc('capabilities')}) || "
    "!has(c.securityContext.capabilities.add) || size(c.securityContext.capabilities.add) == 0)",
    "host-path": "!has(object.spec.volumes) || object.spec.volumes.all(v, !has(v.hostPath))",
    "host-port": f"({_ALL}).all(c, !has(c.ports) || "
    "c.ports.all(p, !has(p.hostPort) || p.hostPort == 0))",
    "seccomp": "has(object.spec.securityContext) && "
    "has(object.spec.securityContext.seccompProfile) && "
    "object.spec.securityContext.seccompProfile.type in ['RuntimeDefault', 'Localhost']",
    "automount-token": "has(object.spec.automountServiceAccountToken) && "
    "object.spec.automountServiceAccountToken == false",
}
"""The CEL validation of each Kyverno-class setting, over a Pod (`object`)."""


def validating_policy(name: str, expression: str, message: str) -> dict[str, Any]:
    """A Kyverno ValidatingPolicy over Pods with one validation, in audit mode."""
    return {
        "apiVersion": "policies.kyverno.io/v1",
        "kind": "ValidatingPolicy",
        "metadata": {"name": name},
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


UPDATES: dict[str, str] = {
    "host-ipc": "!(has(object.spec.hostNetwork) && object.spec.hostNetwork) && "
    "!(has(object.spec.hostPID) && object.spec.hostPID) && "
    "!(has(object.spec.hostIPC) && object.spec.hostIPC)",
    "privileged-init": CEL["privileged"],
    "net-raw": f"({_ALL}).all(c, !({_sc('capabilities')}) || "
    "!has(c.securityContext.capabilities.add) || "
    "c.securityContext.capabilities.add.all(a, a in ['NET_BIND_SERVICE']))",
    "run-as-root": CEL["run-as-root"],
    "seccomp-container": "has(object.spec.securityContext) && "
    "has(object.spec.securityContext.seccompProfile) && "
    "object.spec.securityContext.seccompProfile.type in ['RuntimeDefault', 'Localhost'] && "
    f"({_ALL}).all(c, !({_sc('seccompProfile')}) || "
    "c.securityContext.seccompProfile.type != 'Unconfined')",
    "privilege-escalation-init": CEL["privilege-escalation"],
}
"""Update class: the new validation of the policy the changed requirement concerns."""

# ---- K8sOPA: a kubectl collection and Rego over it --------------------------------------------

K8S_COLLECTION = """\
#!/bin/bash
# The namespace's objects a Kubernetes CIS control reads, as one JSON document.
set -euo pipefail
kubectl get deployments,roles,rolebindings,serviceaccounts,networkpolicies -n "$NS" -o json \\
  > /tmp/objects.json
kubectl get namespace "$NS" -o json > /tmp/namespace.json
python3 - <<'PY' > "$ITBENCH_EVIDENCE"
import json
items = json.load(open("/tmp/objects.json"))["items"]
print(json.dumps({"items": items, "namespace": json.load(open("/tmp/namespace.json"))}))
PY
"""

_REGO_HEAD = "package cis\n\nimport rego.v1\n\n"
_DEPLOYMENTS = """
deployments contains d if {
\tsome d in input.items
\td.kind == "Deployment"
}

containers(d) := array.concat(
	object.get(d.spec.template.spec, "initContainers", []),
	d.spec.template.spec.containers,
)
"""
_ROLES = """
roles contains r if {
\tsome r in input.items
\tr.kind == "Role"
}
"""


def _deployment_rule(condition: str) -> str:
    return (
        _DEPLOYMENTS
        + '\nviolations contains sprintf("Deployment/%s", [d.metadata.name]) if {\n'
        + "\tsome d in deployments\n"
        + "".join(f"\t{line}\n" for line in condition.strip().splitlines())
        + "}\n"
    )


def _role_rule(condition: str) -> str:
    return (
        _ROLES
        + '\nviolations contains sprintf("Role/%s", [r.metadata.name]) if {\n'
        + "\tsome r in roles\n\tsome rule in r.rules\n"
        + "".join(f"\t{line}\n" for line in condition.strip().splitlines())
        + "}\n"
    )


REGO_K8S: dict[str, str] = {
    "privileged-init": _deployment_rule(
        'some c in containers(d)\nobject.get(object.get(c, "securityContext", {}), '
        '"privileged", false) == true'
    ),
    "privilege-escalation-init": _deployment_rule(
        'some c in containers(d)\nobject.get(object.get(c, "securityContext", {}), '
        '"allowPrivilegeEscalation", true) != false'
    ),
    "drop-capabilities": _deployment_rule(
        "some c in d.spec.template.spec.containers\n"
        'drops := object.get(object.get(object.get(c, "securityContext", {}), '
        '"capabilities", {}), "drop", [])\nnot "ALL" in drops'
    ),
    "seccomp-container": _DEPLOYMENTS
    + """
unconfined(d) if {
\tpod := object.get(d.spec.template.spec, "securityContext", {})
\tobject.get(pod, "seccompProfile", {}).type == "Unconfined"
}

unconfined(d) if {
\tsome c in containers(d)
\tobject.get(object.get(c, "securityContext", {}), "seccompProfile", {}).type == "Unconfined"
}

violations contains sprintf("Deployment/%s", [d.metadata.name]) if {
\tsome d in deployments
\tunconfined(d)
}
""",
    "default-service-account": _deployment_rule(
        'object.get(d.spec.template.spec, "serviceAccountName", "default") == "default"'
    ),
    "secret-env": _DEPLOYMENTS
    + """
secret_env(c) if {
\tsome e in object.get(c, "env", [])
\te.valueFrom.secretKeyRef
}

secret_env(c) if {
\tsome e in object.get(c, "envFrom", [])
\te.secretRef
}

violations contains sprintf("Deployment/%s", [d.metadata.name]) if {
\tsome d in deployments
\tsome c in containers(d)
\tsecret_env(c)
}
""",
    "role-wildcard": _role_rule(
        'some field in ["apiGroups", "resources", "verbs"]\n"*" in object.get(rule, field, [])'
    ),
    "role-secrets": _role_rule(
        '"secrets" in rule.resources\nsome verb in rule.verbs\nverb in {"get", "list", '
        '"watch", "*"}'
    ),
    "role-create-pods": _role_rule(
        '"pods" in rule.resources\nsome verb in rule.verbs\nverb in {"create", "*"}'
    ),
    "role-escalate": _role_rule(
        'some verb in rule.verbs\nverb in {"bind", "escalate", "impersonate", "*"}'
    ),
    "cluster-admin-binding": """
violations contains sprintf("RoleBinding/%s", [b.metadata.name]) if {
\tsome b in input.items
\tb.kind == "RoleBinding"
\tb.roleRef.kind == "ClusterRole"
\tb.roleRef.name == "cluster-admin"
}
""",
    "default-sa-automount": """
violations contains sprintf("ServiceAccount/%s", [sa.metadata.name]) if {
\tsome sa in input.items
\tsa.kind == "ServiceAccount"
\tobject.get(sa, "automountServiceAccountToken", true) != false
}
""",
    "network-policies": """
policies := [p | some p in input.items; p.kind == "NetworkPolicy"]

violations contains sprintf("Namespace/%s", [input.namespace.metadata.name]) if {
\tcount(policies) == 0
}
""",
}
"""The Rego rules of each K8sOPA-class setting, over the K8s collection's evidence."""

# ---- RHEL9OPA: a host collection and Rego over it ---------------------------------------------

HOST_SCRIPT = """\
#!/bin/bash
# The host's CIS-relevant configuration as one JSON document: effective sshd options, file
# modes and owners, units, packages, kernel parameters, login.defs, pwquality and SELinux.
set -euo pipefail
python3 - <<'PY' > "$ITBENCH_EVIDENCE"
import json, os, pwd, grp, stat, subprocess

def run(*argv):
    p = subprocess.run(list(argv), capture_output=True, text=True)
    return p.returncode, p.stdout

def pairs(path, sep=None):
    out = {}
    for line in open(path):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        key, _, value = line.partition("=" if sep == "=" else " ")
        out[key.strip()] = value.strip()
    return out

sshd = dict(line.split(" ", 1) for line in run("sshd", "-T")[1].splitlines() if " " in line)
files = {}
for path in ("/etc/passwd", "/etc/shadow", "/etc/group", "/etc/gshadow"):
    st = os.stat(path)
    files[path] = {"mode": format(stat.S_IMODE(st.st_mode), "04o"),
                   "owner": pwd.getpwuid(st.st_uid).pw_name if st.st_uid == 0 else str(st.st_uid),
                   "group": "root" if st.st_gid == 0 else str(st.st_gid)}
services = {}
for unit in ("auditd", "sshd", "telnet.socket"):
    services[unit] = {"enabled": run("systemctl", "is-enabled", unit)[1].strip() or "not-found",
                      "active": run("systemctl", "is-active", unit)[1].strip()}
packages = {name: run("rpm", "-q", name)[0] == 0 for name in ("telnet-server", "audit")}
sysctl = {key: run("sysctl", "-n", key)[1].strip() for key in ("net.ipv4.ip_forward",)}
selinux = {"mode": run("getenforce")[1].strip().lower(),
           "config": pairs("/etc/selinux/config", "=").get("SELINUX", "")}
print(json.dumps({"sshd": sshd, "files": files, "services": services, "packages": packages,
                  "sysctl": sysctl, "loginDefs": pairs("/etc/login.defs"),
                  "pwquality": pairs("/etc/security/pwquality.conf", "="), "selinux": selinux}))
PY
"""
"""The host collection as a script."""

SSHD_PLAYBOOK = """\
- name: Collect the effective sshd configuration
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Read sshd's effective options
      ansible.builtin.command: sshd -T
      register: sshd_t
      changed_when: false
    - name: Write the evidence
      ansible.builtin.copy:
        dest: "{{ lookup('env', 'ITBENCH_EVIDENCE') }}"
        content: >-
          {{ {'sshd': dict(sshd_t.stdout_lines | map('split', ' ', 1) | list)} | to_json }}
        mode: "0600"
"""
"""The host collection as an Ansible playbook (sshd controls)."""


def _host_rule(condition: str) -> str:
    body = "".join(f"\t{line}\n" for line in condition.strip().splitlines())
    return f"default compliant := false\n\ncompliant if {{\n{body}}}\n"


REGO_HOST: dict[str, str] = {
    "sshd-root-login": _host_rule('input.sshd.permitrootlogin == "no"'),
    "sshd-root-login-dropin": _host_rule('input.sshd.permitrootlogin == "no"'),
    "sshd-empty-passwords": _host_rule('input.sshd.permitemptypasswords == "no"'),
    "sshd-max-auth-tries": _host_rule("to_number(input.sshd.maxauthtries) <= 4"),
    "sshd-x11-forwarding": _host_rule('input.sshd.x11forwarding == "no"'),
    "shadow-permissions": _host_rule(
        'f := input.files["/etc/shadow"]\nf.mode == "0000"\nf.owner == "root"\nf.group == "root"'
    ),
    "passwd-permissions": _host_rule(
        'f := input.files["/etc/passwd"]\nregex.match(`^0?[0-7][0145][0145]$`, f.mode)\n'
        'f.owner == "root"\nf.group == "root"'
    ),
    "auditd-service": _host_rule(
        'input.services.auditd.enabled == "enabled"\ninput.services.auditd.active == "active"'
    ),
    "password-max-days": _host_rule("to_number(input.loginDefs.PASS_MAX_DAYS) <= 365"),
    "password-min-length": _host_rule("to_number(input.pwquality.minlen) >= 14"),
    "telnet-server": _host_rule('input.packages["telnet-server"] == false'),
    "ip-forwarding": _host_rule('input.sysctl["net.ipv4.ip_forward"] == "0"'),
    "selinux-enforcing": _host_rule(
        'input.selinux.mode == "enforcing"\ninput.selinux.config == "enforcing"'
    ),
}
"""The Rego rules of each RHEL9OPA-class setting, over the host collection's evidence."""

PLAYBOOK_SETTINGS = frozenset({"sshd-root-login", "sshd-root-login-dropin", "sshd-empty-passwords"})
"""Host settings whose reference collects with the Ansible playbook (the rest with the script)."""


def rego_module(rules: str) -> str:
    """A whole Rego module of the reference's package."""
    return _REGO_HEAD + rules.lstrip("\n")


def k8s_collection(namespace: str) -> str:
    """The K8s collection script for a namespace."""
    return f"NS={json.dumps(namespace)}\n" + K8S_COLLECTION.split("\n", 1)[1]
