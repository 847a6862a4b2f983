"""What kube-apiserver fills in on a write that the served API's store does too: the defaults of
the kinds' strategies (Secret type, a Namespace's label, finalizer and phase, a Service's cluster
IP), which kinds keep `metadata.generation`, and a CRD's status from its controllers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from itbench.environments.served.resources import ResourceType

Json = dict[str, Any]

SERVICE_RANGE = "10.96."
"""The service cluster IP range (10.96.0.0/16, kind's and kubeadm's default)."""


UNGENERATED = frozenset(
    {
        ("", "secrets"),
        ("", "configmaps"),
        ("", "serviceaccounts"),
        ("", "namespaces"),
        ("", "events"),
        ("", "endpoints"),
        ("coordination.k8s.io", "leases"),
        ("rbac.authorization.k8s.io", "roles"),
        ("rbac.authorization.k8s.io", "rolebindings"),
        ("rbac.authorization.k8s.io", "clusterroles"),
        ("rbac.authorization.k8s.io", "clusterrolebindings"),
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
    }
)
"""Built-in resources whose objects kube-apiserver gives no `metadata.generation` (their
strategies never set one); every other kind, custom resources included, starts at 1."""


def keeps_generation(rtype: ResourceType) -> bool:
    """Whether objects of a resource carry `metadata.generation`."""
    return (rtype.group, rtype.plural) not in UNGENERATED


def crd_status(crd: Json, now: str, before: Json | None = None) -> Json:
    """The status kube-apiserver's CRD controllers give a served CustomResourceDefinition: its
    names accepted, Established, and every storage version it has had (Helm and `kubectl wait
    --for=condition=Established` wait for it)."""
    spec = crd.get("spec") or {}
    stored = list((before or {}).get("storedVersions") or [])
    for version in spec.get("versions") or []:
        if version.get("storage") and version.get("name") not in stored:
            stored.append(version.get("name"))
    old = {c.get("type"): c for c in (before or {}).get("conditions") or []}

    def condition(kind: str, reason: str, message: str) -> Json:
        since = (old.get(kind) or {}).get("lastTransitionTime") or now
        return {
            "type": kind,
            "status": "True",
            "lastTransitionTime": since,
            "reason": reason,
            "message": message,
        }

    return {
        "conditions": [
            condition("NamesAccepted", "NoConflicts", "no conflicts found"),
            condition(
                "Established", "InitialNamesAccepted", "the initial names have been accepted"
            ),
        ],
        "acceptedNames": dict(spec.get("names") or {}),
        "storedVersions": stored,
    }


def creation_defaults(rtype: ResourceType, obj: Json) -> None:
    """Fill the defaults kube-apiserver gives a new Pod (phase Pending), Secret (type Opaque),
    Namespace (its name label, the kubernetes finalizer, phase Active) or Deployment (a strategy
    without a type)."""
    if (rtype.group, rtype.plural) == ("apps", "deployments"):
        # An empty strategy (`strategy: {}`, as kubectl create deployment sends) is defaulted as a
        # missing one is.
        spec = obj.get("spec")
        strategy = spec.get("strategy") if isinstance(spec, dict) else None
        if isinstance(strategy, dict) and not strategy.get("type"):
            strategy["type"] = "RollingUpdate"
            rolling = strategy.setdefault("rollingUpdate", {})
            rolling.setdefault("maxSurge", "25%")
            rolling.setdefault("maxUnavailable", "25%")
        return
    if rtype.group:
        return
    if rtype.plural == "pods":
        # A new pod is Pending until the scheduler and the kubelet say otherwise.
        obj["status"] = {"phase": "Pending"}
    elif rtype.plural == "secrets":
        obj.setdefault("type", "Opaque")
    elif rtype.plural == "namespaces":
        meta = obj.setdefault("metadata", {})
        name = str(meta.get("name", ""))
        meta["labels"] = {**(meta.get("labels") or {}), "kubernetes.io/metadata.name": name}
        obj["spec"] = {"finalizers": ["kubernetes"], **(obj.get("spec") or {})}
        obj["status"] = {"phase": "Active"}


def service_defaults(service: Json, others: Iterable[Mapping[str, Any]]) -> None:
    """Fill a new Service's defaults: a free cluster IP of the service range (unless ExternalName
    or headless), protocols, target ports and the fields its strategy sets.

    Args:
        service: The new Service.
        others: The specs of the Services stored now (their cluster IPs are taken).
    """
    spec = service.setdefault("spec", {})
    kind = spec.setdefault("type", "ClusterIP")
    for port in spec.get("ports") or []:
        port.setdefault("protocol", "TCP")
        port.setdefault("targetPort", port.get("port"))
    spec.setdefault("sessionAffinity", "None")
    if kind == "ExternalName":
        return
    spec.setdefault("internalTrafficPolicy", "Cluster")
    spec.setdefault("ipFamilies", ["IPv4"])
    spec.setdefault("ipFamilyPolicy", "SingleStack")
    if not spec.get("clusterIP"):
        used = {str(o.get("clusterIP")) for o in others}
        index = 10
        while f"{SERVICE_RANGE}{index // 250}.{index % 250 + 1}" in used:
            index += 1
        spec["clusterIP"] = f"{SERVICE_RANGE}{index // 250}.{index % 250 + 1}"
    spec.setdefault("clusterIPs", [spec["clusterIP"]])
