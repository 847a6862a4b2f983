"""Cheap CISO strategies: artefacts that never read which control is asked.

Each reads only the form of answer the requirement wants (a policy, a policy set to update, a
Kubernetes or a host collection with Rego) and submits the same checks for every control of that
form: a union of the CIS checks written by hand, the union of every reference solution, or a
verdict of non-compliant on every target. On any other domain they do nothing.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import yaml

from agents.ciso_reference import solutions
from agents.routines import begin, finish
from itbench.client import (
    CollectionKind,
    ComplianceSubmission,
    ControlAssessment,
    Domain,
    EvidenceCollection,
    ITBenchClient,
    PostureReport,
    PostureResult,
    TaskDescription,
)

_ALL = solutions._ALL
"""Every container of a Pod (`object`), init containers included."""


def _every(condition: str) -> str:
    return f"({_ALL}).all(c, {condition})"


def _sc(field: str) -> str:
    return f"has(c.securityContext) && has(c.securityContext.{field})"


CIS_CEL: tuple[str, ...] = (
    "!(has(object.spec.hostNetwork) && object.spec.hostNetwork)",
    "!(has(object.spec.hostPID) && object.spec.hostPID)",
    "!(has(object.spec.hostIPC) && object.spec.hostIPC)",
    _every(f"!({_sc('privileged')} && c.securityContext.privileged)"),
    _every(f"{_sc('allowPrivilegeEscalation')} && !c.securityContext.allowPrivilegeEscalation"),
    "has(object.spec.securityContext) && has(object.spec.securityContext.runAsNonRoot) && "
    "object.spec.securityContext.runAsNonRoot",
    _every(f"!({_sc('runAsUser')} && c.securityContext.runAsUser == 0)"),
    _every(f"!({_sc('runAsNonRoot')} && !c.securityContext.runAsNonRoot)"),
    _every(
        f"!({_sc('capabilities')} && has(c.securityContext.capabilities.add) && "
        "size(c.securityContext.capabilities.add) > 0)"
    ),
    "object.spec.containers.all(c, has(c.securityContext) && "
    "has(c.securityContext.capabilities) && has(c.securityContext.capabilities.drop) && "
    "'ALL' in c.securityContext.capabilities.drop)",
    "!has(object.spec.volumes) || object.spec.volumes.all(v, !has(v.hostPath))",
    _every("!has(c.ports) || c.ports.all(p, !has(p.hostPort) || p.hostPort == 0)"),
    "has(object.spec.securityContext) && has(object.spec.securityContext.seccompProfile) && "
    "object.spec.securityContext.seccompProfile.type in ['RuntimeDefault', 'Localhost']",
    _every(f"!({_sc('seccompProfile')} && c.securityContext.seccompProfile.type == 'Unconfined')"),
    "has(object.spec.automountServiceAccountToken) && !object.spec.automountServiceAccountToken",
    "has(object.spec.serviceAccountName) && object.spec.serviceAccountName != 'default'",
    _every(
        "(!has(c.env) || c.env.all(e, !has(e.valueFrom) || !has(e.valueFrom.secretKeyRef))) && "
        "(!has(c.envFrom) || c.envFrom.all(e, !has(e.secretRef)))"
    ),
)
"""Every CIS Kubernetes pod check, written by hand, one CEL expression each."""

CIS_REGO_K8S = """
deployments contains d if {
\tsome d in input.items
\td.kind == "Deployment"
}

containers(d) := array.concat(
\tobject.get(d.spec.template.spec, "initContainers", []),
\td.spec.template.spec.containers,
)

sc(c) := object.get(c, "securityContext", {})

weak(d) if {
\tsome key in ["hostNetwork", "hostPID", "hostIPC"]
\tobject.get(d.spec.template.spec, key, false) == true
}

weak(d) if {
\tsome c in containers(d)
\tobject.get(sc(c), "privileged", false) == true
}

weak(d) if {
\tsome c in containers(d)
\tobject.get(sc(c), "allowPrivilegeEscalation", true) != false
}

weak(d) if {
\tsome c in containers(d)
\tcount(object.get(object.get(sc(c), "capabilities", {}), "add", [])) > 0
}

weak(d) if {
\tsome c in d.spec.template.spec.containers
\tnot "ALL" in object.get(object.get(sc(c), "capabilities", {}), "drop", [])
}

weak(d) if {
\tsome c in containers(d)
\tobject.get(sc(c), "runAsUser", 1) == 0
}

weak(d) if {
\tpod := object.get(d.spec.template.spec, "securityContext", {})
\tobject.get(pod, "seccompProfile", {}).type == "Unconfined"
}

weak(d) if {
\tsome c in containers(d)
\tobject.get(sc(c), "seccompProfile", {}).type == "Unconfined"
}

weak(d) if {
\tsome v in object.get(d.spec.template.spec, "volumes", [])
\tv.hostPath
}

weak(d) if {
\tsome c in containers(d)
\tsome p in object.get(c, "ports", [])
\tobject.get(p, "hostPort", 0) != 0
}

weak(d) if {
\tobject.get(d.spec.template.spec, "automountServiceAccountToken", true) != false
}

weak(d) if {
\tobject.get(d.spec.template.spec, "serviceAccountName", "default") == "default"
}

weak(d) if {
\tsome c in containers(d)
\tsome e in object.get(c, "env", [])
\te.valueFrom.secretKeyRef
}

violations contains sprintf("Deployment/%s", [d.metadata.name]) if {
\tsome d in deployments
\tweak(d)
}

violations contains sprintf("Role/%s", [r.metadata.name]) if {
\tsome r in input.items
\tr.kind == "Role"
\tsome rule in r.rules
\tsome verb in rule.verbs
\tverb in {"*", "bind", "escalate", "impersonate"}
}

violations contains sprintf("Role/%s", [r.metadata.name]) if {
\tsome r in input.items
\tr.kind == "Role"
\tsome rule in r.rules
\tsome resource in rule.resources
\tresource in {"*", "secrets", "pods"}
}

violations contains sprintf("RoleBinding/%s", [b.metadata.name]) if {
\tsome b in input.items
\tb.kind == "RoleBinding"
\tb.roleRef.name == "cluster-admin"
}

violations contains sprintf("ServiceAccount/%s", [sa.metadata.name]) if {
\tsome sa in input.items
\tsa.kind == "ServiceAccount"
\tobject.get(sa, "automountServiceAccountToken", true) != false
}

violations contains sprintf("Namespace/%s", [input.namespace.metadata.name]) if {
\tcount([p | some p in input.items; p.kind == "NetworkPolicy"]) == 0
}
"""
"""Every CIS Kubernetes check of Deployments, Roles, bindings, accounts and the namespace."""

CIS_REGO_HOST = """
default compliant := false

compliant if {
\tinput.sshd.permitrootlogin == "no"
\tinput.sshd.permitemptypasswords == "no"
\tto_number(input.sshd.maxauthtries) <= 4
\tinput.sshd.x11forwarding == "no"
\tinput.files["/etc/shadow"].mode == "0000"
\tregex.match(`^0?[0-7][0145][0145]$`, input.files["/etc/passwd"].mode)
\tinput.services.auditd.enabled == "enabled"
\tinput.services.auditd.active == "active"
\tto_number(input.loginDefs.PASS_MAX_DAYS) <= 365
\tto_number(input.pwquality.minlen) >= 14
\tinput.packages["telnet-server"] == false
\tinput.sysctl["net.ipv4.ip_forward"] == "0"
\tinput.selinux.mode == "enforcing"
\tinput.selinux.config == "enforcing"
}
"""
"""Every CIS RHEL9 check of the host collection's evidence, as one verdict."""


def _form(requirement: str) -> str:
    """Which answer the requirement wants: update, kyverno, host or k8s."""
    if re.search(r"the requirement concerns ([a-z0-9-]+)\.", requirement):
        return "update"
    if "Submit `kyverno`" in requirement:
        return "kyverno"
    return "host" if "Host/" in requirement else "k8s"


def _policy(name: str, expressions: list[str]) -> dict[str, Any]:
    policy = solutions.validating_policy(name, "true", "")
    policy["spec"]["validations"] = [
        {"expression": e, "message": f"{name}: check {n + 1} failed"}
        for n, e in enumerate(expressions)
    ]
    return policy


def _updated(client: ITBenchClient, requirement: str, expressions: list[str]) -> str:
    """The installed set, the policy the requirement concerns checking `expressions` instead."""
    match = re.search(r"the requirement concerns ([a-z0-9-]+)\.", requirement)
    concerned = match.group(1) if match else ""
    out = []
    installed = client.get("validatingpolicies").items
    for policy in sorted(installed, key=lambda p: str(p["metadata"]["name"])):
        meta = policy.get("metadata") or {}
        doc = {
            "apiVersion": policy["apiVersion"],
            "kind": policy["kind"],
            "metadata": {k: meta[k] for k in ("name", "labels", "annotations") if k in meta},
            "spec": copy.deepcopy(policy["spec"]),
        }
        if meta.get("name") == concerned:
            doc["spec"]["validations"] = [
                {"expression": e, "message": f"{concerned}: check {n + 1} failed"}
                for n, e in enumerate(expressions)
            ]
        out.append(doc)
    return yaml.safe_dump_all(out, sort_keys=False, width=100)


def _submission(
    client: ITBenchClient, task: TaskDescription, cel: list[str], k8s: str, host: str
) -> ComplianceSubmission:
    form = _form(task.requirement)
    why = "every CIS check I know, whatever the control"
    if form == "update":
        return ComplianceSubmission(kyverno=_updated(client, task.requirement, cel), reasoning=why)
    if form == "kyverno":
        policy = _policy("cis-union", cel)
        return ComplianceSubmission(kyverno=yaml.safe_dump(policy, sort_keys=False), reasoning=why)
    if form == "host":
        return ComplianceSubmission(
            rego=solutions.rego_module(host),
            collection=EvidenceCollection(
                kind=CollectionKind.SCRIPT, content=solutions.HOST_SCRIPT
            ),
            reasoning=why,
        )
    return ComplianceSubmission(
        rego=solutions.rego_module(k8s),
        collection=EvidenceCollection(
            kind=CollectionKind.SCRIPT, content=solutions.k8s_collection(task.namespace)
        ),
        reasoning=why,
    )


def _union_of_host_rules() -> str:
    """Every reference host rule as a rule of its own; compliant when every one holds."""
    names = []
    out = []
    for n, rules in enumerate(solutions.REGO_HOST.values()):
        body = rules.split("compliant if {\n", 1)[1].rsplit("}", 1)[0]
        names.append(f"check_{n}")
        out.append(f"check_{n} if {{\n{body}}}\n")
    holds = "".join(f"\t{name}\n" for name in names)
    return "default compliant := false\n\n" + "\n".join(out) + f"\ncompliant if {{\n{holds}}}\n"


def _union_of_k8s_rules() -> str:
    """Every reference K8s rule in one module (their helper rules are shared, kept once)."""
    seen: set[str] = set()
    out: list[str] = []
    for rules in solutions.REGO_K8S.values():
        for block in rules.strip("\n").split("\n\n"):
            if block not in seen:
                seen.add(block)
                out.append(block)
    return "\n\n".join(out) + "\n"


def ciso_cis_union(client: ITBenchClient) -> None:
    """Submits one hand-written union of every CIS check in the form the requirement asks for,
    whatever the control (elsewhere: does nothing)."""
    task = begin(client)
    if task.domain == Domain.CISO:
        client.submit_compliance(
            _submission(client, task, list(CIS_CEL), CIS_REGO_K8S, CIS_REGO_HOST)
        )
    finish(client)


def ciso_reference_union(client: ITBenchClient) -> None:
    """Submits the union of every reference solution in the form the requirement asks for,
    whatever the control (elsewhere: does nothing)."""
    task = begin(client)
    if task.domain == Domain.CISO:
        cel = list(dict.fromkeys([*solutions.CEL.values(), *solutions.UPDATES.values()]))
        client.submit_compliance(
            _submission(client, task, cel, _union_of_k8s_rules(), _union_of_host_rules())
        )
    finish(client)


def ciso_all_noncompliant(client: ITBenchClient) -> None:
    """Reports every target of the namespace and the host non-compliant, with artefacts that
    flag every object (elsewhere: does nothing)."""
    task = begin(client)
    if task.domain != Domain.CISO:
        finish(client)
        return
    form = _form(task.requirement)
    deny = ["false"]
    k8s = (
        'violations contains sprintf("%s/%s", [i.kind, i.metadata.name]) if {\n'
        "\tsome i in input.items\n}\n\n"
        'violations contains sprintf("Namespace/%s", [input.namespace.metadata.name])\n'
    )
    host = "compliant := false\n"
    client.submit_compliance(_submission(client, task, deny, k8s, host))
    targets: list[str] = []
    if form == "host":
        targets = [t for t in re.findall(r"Host/[A-Za-z0-9.-]+", task.requirement)]
    else:
        kinds = {
            "deployments": "Deployment",
            "roles": "Role",
            "rolebindings": "RoleBinding",
            "serviceaccounts": "ServiceAccount",
        }
        for plural, kind in kinds.items():
            for obj in client.get(plural).items:
                targets.append(f"{kind}/{obj['metadata']['name']}")
        targets.append(f"Namespace/{task.namespace}")
    control = task.requirement.strip().splitlines()[0][:200] if task.requirement.strip() else "-"
    client.submit_posture(
        PostureReport(
            assessments=[
                ControlAssessment(control_id=control, target=t, result=PostureResult.FAIL)
                for t in dict.fromkeys(targets)
            ][:1000],
            reasoning=json.dumps({"nonCompliant": len(targets)}),
        )
    )
    finish(client)
