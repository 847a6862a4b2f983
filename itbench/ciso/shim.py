"""The commands of the evidence sandbox: `kubectl` over the namespace's objects, the RHEL9 host's
own commands (`sshd -T`, `systemctl`, `rpm -q`, ...) and `sudo`.

This file is copied into the sandbox next to the host model and the environment's state and run
there by the sandbox's interpreter, so it imports nothing but the standard library and
`host_model` (a copy of `itbench.core.ciso.host`). Every command that would change the
environment is refused with exit status 77 and a line on stderr that starts with
`itbench-sandbox: refused:`, which the platform reads.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
STATE = HERE / "state.json"
REFUSED = "itbench-sandbox: refused:"
NO_NETWORK = "itbench-sandbox: no network:"
NETWORK_TOOLS = ("curl", "wget", "nc", "ncat", "ssh", "scp", "telnet", "ping", "dig", "nslookup")

KUBECTL_WRITES = {
    "apply",
    "create",
    "delete",
    "patch",
    "edit",
    "replace",
    "scale",
    "label",
    "annotate",
    "set",
    "rollout",
    "cordon",
    "uncordon",
    "drain",
    "taint",
    "exec",
    "cp",
    "run",
    "expose",
    "autoscale",
    "attach",
    "port-forward",
    "proxy",
    "debug",
}

SPELLINGS = {
    "po": "Pod",
    "pod": "Pod",
    "pods": "Pod",
    "deploy": "Deployment",
    "deployment": "Deployment",
    "deployments": "Deployment",
    "rs": "ReplicaSet",
    "replicaset": "ReplicaSet",
    "replicasets": "ReplicaSet",
    "svc": "Service",
    "service": "Service",
    "services": "Service",
    "sa": "ServiceAccount",
    "serviceaccount": "ServiceAccount",
    "serviceaccounts": "ServiceAccount",
    "cm": "ConfigMap",
    "configmap": "ConfigMap",
    "configmaps": "ConfigMap",
    "secret": "Secret",
    "secrets": "Secret",
    "netpol": "NetworkPolicy",
    "networkpolicy": "NetworkPolicy",
    "networkpolicies": "NetworkPolicy",
    "role": "Role",
    "roles": "Role",
    "rolebinding": "RoleBinding",
    "rolebindings": "RoleBinding",
    "clusterrole": "ClusterRole",
    "clusterroles": "ClusterRole",
    "clusterrolebinding": "ClusterRoleBinding",
    "clusterrolebindings": "ClusterRoleBinding",
    "ns": "Namespace",
    "namespace": "Namespace",
    "namespaces": "Namespace",
    "vpol": "ValidatingPolicy",
    "validatingpolicy": "ValidatingPolicy",
    "validatingpolicies": "ValidatingPolicy",
    "cpol": "ClusterPolicy",
    "clusterpolicy": "ClusterPolicy",
    "clusterpolicies": "ClusterPolicy",
    "pol": "Policy",
    "policy": "Policy",
    "policies": "Policy",
    "validatingadmissionpolicy": "ValidatingAdmissionPolicy",
    "validatingadmissionpolicies": "ValidatingAdmissionPolicy",
    "validatingadmissionpolicybinding": "ValidatingAdmissionPolicyBinding",
    "validatingadmissionpolicybindings": "ValidatingAdmissionPolicyBinding",
}


def _state() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(STATE.read_text())
    return data


def _refuse(what: str) -> int:
    sys.stderr.write(f"{REFUSED} {what}: the evidence sandbox is read-only\n")
    return 77


def _kind(text: str) -> str | None:
    base = text.split(".", 1)[0].lower()
    return SPELLINGS.get(base)


def _yaml(value: Any, indent: int = 0) -> str:
    pad = "  " * indent
    if isinstance(value, dict):
        if not value:
            return "{}"
        lines = []
        for k, v in value.items():
            if isinstance(v, (dict, list)) and v:
                lines.append(f"{pad}{k}:\n{_yaml(v, indent + 1)}")
            else:
                lines.append(f"{pad}{k}: {_yaml(v)}")
        return "\n".join(lines)
    if isinstance(value, list):
        if not value:
            return "[]"
        lines = []
        for v in value:
            if isinstance(v, dict) and v:
                body = _yaml(v, indent + 1).lstrip()
                lines.append(f"{pad}- {body}")
            else:
                lines.append(f"{pad}- {_yaml(v)}")
        return "\n".join(lines)
    return json.dumps(value)


def kubectl(args: list[str]) -> int:
    """kubectl get (and api-resources, version) over the environment's objects."""
    words = [a for a in args if not a.startswith("-")]
    if not words:
        sys.stderr.write("kubectl: give a command (get)\n")
        return 1
    verb = words[0]
    if verb in KUBECTL_WRITES:
        return _refuse(f"kubectl {verb}")
    if verb == "version":
        sys.stdout.write("Client Version: v1.31.0\nServer Version: v1.31.0\n")
        return 0
    if verb == "api-resources":
        sys.stdout.write("".join(f"{k}\n" for k in sorted(set(SPELLINGS.values()))))
        return 0
    if verb != "get":
        sys.stderr.write(f"kubectl: the sandbox answers get, not {verb}\n")
        return 1
    output = ""
    namespace = None
    all_namespaces = False
    positional: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-o", "--output") and i + 1 < len(args):
            output, i = args[i + 1], i + 2
            continue
        if a.startswith("-o") and len(a) > 2:
            output = a[2:].lstrip("=")
        elif a.startswith("--output="):
            output = a.split("=", 1)[1]
        elif a in ("-n", "--namespace") and i + 1 < len(args):
            namespace, i = args[i + 1], i + 2
            continue
        elif a.startswith("--namespace="):
            namespace = a.split("=", 1)[1]
        elif a in ("-A", "--all-namespaces"):
            all_namespaces = True
        elif not a.startswith("-"):
            positional.append(a)
        i += 1
    positional = positional[1:]
    if not positional:
        sys.stderr.write("kubectl get: name a resource type (e.g. pods)\n")
        return 1
    state = _state()
    objects: list[dict[str, Any]] = state["objects"]
    home = state["namespace"]
    kinds_text, names = positional[0], positional[1:]
    if "/" in kinds_text and not names:
        kinds_text, name = kinds_text.split("/", 1)
        names = [name]
    kinds = []
    for text in kinds_text.split(","):
        kind = _kind(text)
        if kind is None:
            sys.stderr.write(f'error: the server doesn\'t have a resource type "{text}"\n')
            return 1
        kinds.append(kind)
    if namespace not in (None, home) and not all_namespaces:
        found: list[dict[str, Any]] = []
    else:
        found = [o for o in objects if o.get("kind") in kinds]
    if names:
        found = [o for o in found if o.get("metadata", {}).get("name") in names]
        missing = [n for n in names if n not in {o["metadata"]["name"] for o in found}]
        if missing:
            sys.stderr.write(f'Error from server (NotFound): "{missing[0]}" not found\n')
            return 1
    single = len(names) == 1 and len(kinds) == 1
    if output == "json":
        doc: Any = found[0] if single else {"apiVersion": "v1", "kind": "List", "items": found}
        sys.stdout.write(json.dumps(doc, indent=4) + "\n")
    elif output == "yaml":
        doc = found[0] if single else {"apiVersion": "v1", "kind": "List", "items": found}
        sys.stdout.write(_yaml(doc) + "\n")
    elif output == "name":
        sys.stdout.write("".join(f"{o['kind'].lower()}/{o['metadata']['name']}\n" for o in found))
    else:
        if not found:
            sys.stderr.write(f"No resources found in {namespace or home} namespace.\n")
            return 0
        sys.stdout.write("NAME\n" + "".join(f"{o['metadata']['name']}\n" for o in found))
    return 0


def host(argv: list[str]) -> int:
    """One of the host's own commands, answered from the host model."""
    sys.path.insert(0, str(HERE))
    import host_model  # type: ignore[import-not-found]

    answer = host_model.command_answer(_state()["host"], argv)
    sys.stdout.write(answer.stdout)
    if answer.status == 77:
        sys.stderr.write(f"{REFUSED} {host_model.quote(argv)}: the evidence sandbox is read-only\n")
    else:
        sys.stderr.write(answer.stderr)
    return int(answer.status)


def sudo(args: list[str]) -> int:
    """sudo: the sandbox already runs as root; run the command as it is."""
    i = 0
    while i < len(args) and args[i].startswith("-"):
        if args[i] in ("-u", "-g", "-p", "-C", "-D", "-r", "-t", "-U", "-h") and i + 1 < len(args):
            i += 2
        else:
            i += 1
    command = args[i:]
    if not command:
        return 0
    os.execvp(command[0], command)
    return 127  # pragma: no cover


def main() -> int:
    """Dispatch on the command name (the first argument)."""
    if len(sys.argv) < 2:
        return 2
    command, args = Path(sys.argv[1]).name, sys.argv[2:]
    if command == "kubectl":
        return kubectl(args)
    if command == "sudo":
        return sudo(args)
    if command in NETWORK_TOOLS:
        sys.stderr.write(f"{NO_NETWORK} {command}: the evidence sandbox has no network\n")
        return 78
    return host([command, *args])


if __name__ == "__main__":
    sys.exit(main())
