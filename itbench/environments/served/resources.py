"""The resources a served API knows: built-in kinds, the twin's kinds and those CRDs declare, with
the discovery documents and the minimal OpenAPI v3 that kubectl and kubernetes.core read."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from itbench.environments.sim.objects import KIND_INFO

Json = dict[str, Any]

VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


@dataclass(frozen=True)
class ResourceType:
    """One served resource.

    Attributes:
        group: API group ("" for the core group).
        version: API version.
        plural: Resource name (`deployments`).
        kind: Kind (`Deployment`).
        namespaced: Whether objects live in namespaces.
        short_names: kubectl's short names.
        categories: Discovery categories (`all`).
        subresources: Served subresources (`status`, `scale`, `log`, `token`).
        printer_columns: CRD additionalPrinterColumns (built-in kinds have their own tables).
        schema: A CRD's openAPIV3Schema (for `kubectl explain`).
        builtin: Whether the kind is built in (takes strategic merge patches).
        create_only: A virtual resource that is only created, never stored (reviews).
    """

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    printer_columns: tuple[Mapping[str, Any], ...] = ()
    schema: Mapping[str, Any] | None = None
    builtin: bool = True
    create_only: bool = False

    @property
    def api_version(self) -> str:
        """`group/version`, or the bare version for the core group."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        """The singular resource name."""
        return self.kind.lower()

    @property
    def has_status(self) -> bool:
        """Whether status is a subresource (writes to the object leave it alone)."""
        return "status" in self.subresources

    def discovery(self) -> list[Json]:
        """This resource's entries in an APIResourceList."""
        entry: Json = {
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": ["create"] if self.create_only else list(VERBS),
        }
        if self.short_names:
            entry["shortNames"] = list(self.short_names)
        if self.categories:
            entry["categories"] = list(self.categories)
        entries = [entry]
        for sub in self.subresources:
            verbs = {
                "status": ["get", "patch", "update"],
                "scale": ["get", "patch", "update"],
                "log": ["get"],
                "token": ["create"],
                "proxy": ["create", "delete", "get", "patch", "update"],
            }[sub]
            kind = {"scale": "Scale", "token": "TokenRequest"}.get(sub, self.kind)
            group = {"scale": "autoscaling", "token": "authentication.k8s.io"}.get(sub)
            sub_entry: Json = {
                "name": f"{self.plural}/{sub}",
                "singularName": "",
                "namespaced": self.namespaced,
                "kind": kind if sub != "log" else "Pod",
                "verbs": verbs,
            }
            if group is not None:
                sub_entry["group"] = group
                sub_entry["version"] = "v1"
            entries.append(sub_entry)
        return entries


_ALL = ("all",)
_EXTRA: dict[str, dict[str, Any]] = {
    "Pod": {"short": ("po",), "cat": _ALL, "sub": ("status", "log")},
    "Service": {"short": ("svc",), "cat": _ALL, "sub": ("status", "proxy")},
    "Deployment": {"short": ("deploy",), "cat": _ALL, "sub": ("status", "scale")},
    "ReplicaSet": {"short": ("rs",), "cat": _ALL, "sub": ("status", "scale")},
    "StatefulSet": {"short": ("sts",), "cat": _ALL, "sub": ("status", "scale")},
    "DaemonSet": {"short": ("ds",), "cat": _ALL, "sub": ("status",)},
    "Job": {"cat": _ALL, "sub": ("status",)},
    "CronJob": {"short": ("cj",), "cat": _ALL, "sub": ("status",)},
    "HorizontalPodAutoscaler": {"short": ("hpa",), "cat": _ALL, "sub": ("status",)},
    "Endpoints": {"short": ("ep",)},
    "ConfigMap": {"short": ("cm",)},
    "Namespace": {"short": ("ns",), "sub": ("status",)},
    "Node": {"short": ("no",), "sub": ("status",)},
    "Event": {"short": ("ev",)},
    "ServiceAccount": {"short": ("sa",), "sub": ("token",)},
    "PersistentVolumeClaim": {"short": ("pvc",), "sub": ("status",)},
    "NetworkPolicy": {"short": ("netpol",)},
    "Ingress": {"short": ("ing",), "sub": ("status",)},
    "ResourceQuota": {"short": ("quota",), "sub": ("status",)},
    "LimitRange": {"short": ("limits",)},
    "PriorityClass": {"short": ("pc",)},
    "StorageClass": {"short": ("sc",)},
    "PrometheusRule": {"sub": ()},
}
_CUSTOM_GROUPS = ("monitoring.coreos.com", "chaos-mesh.org")


def _twin_types() -> list[ResourceType]:
    out = []
    for kind, (api_version, resource, namespaced) in KIND_INFO.items():
        group, _, version = api_version.rpartition("/")
        extra = _EXTRA.get(kind, {})
        custom = group in _CUSTOM_GROUPS
        subresources = extra.get("sub", ("status",) if group == "chaos-mesh.org" else ())
        out.append(
            ResourceType(
                group=group,
                version=version,
                plural=resource.split(".", 1)[0],
                kind=kind,
                namespaced=namespaced,
                short_names=tuple(extra.get("short", ())),
                categories=tuple(extra.get("cat", ())),
                subresources=tuple(subresources),
                builtin=not custom,
            )
        )
    return out


PLATFORM_TYPES = (
    ResourceType("", "v1", "secrets", "Secret", True),
    ResourceType("rbac.authorization.k8s.io", "v1", "roles", "Role", True),
    ResourceType("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True),
    ResourceType("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
    ResourceType(
        "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False
    ),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True),
    ResourceType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, ("pdb",)),
    ResourceType(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        False,
        ("crd", "crds"),
        subresources=("status",),
    ),
    ResourceType(
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicies",
        "ValidatingAdmissionPolicy",
        False,
        subresources=("status",),
    ),
    ResourceType(
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicybindings",
        "ValidatingAdmissionPolicyBinding",
        False,
    ),
    ResourceType(
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        False,
    ),
    ResourceType(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        False,
    ),
    ResourceType(
        "authorization.k8s.io",
        "v1",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
        False,
        create_only=True,
    ),
)
"""Kinds the twin does not model, stored as they are written (RBAC, Leases, CRDs, admission
policies and webhook configurations, which are kept but not enforced, and reviews)."""


def builtin_types() -> list[ResourceType]:
    """Every kind a served API knows before any CRD is installed."""
    twin = _twin_types()
    known = {(t.group, t.plural) for t in twin}
    return twin + [t for t in PLATFORM_TYPES if (t.group, t.plural) not in known]


def crd_type(crd: Mapping[str, Any]) -> ResourceType:
    """The resource a CustomResourceDefinition declares (its storage version, else the first
    served one)."""
    spec = crd["spec"]
    names = spec["names"]
    versions = [v for v in spec.get("versions") or [] if v.get("served", True)]
    if not versions:
        raise ValueError(f"CustomResourceDefinition {crd['metadata']['name']} serves no version")
    version = next((v for v in versions if v.get("storage")), versions[0])
    subresources = version.get("subresources") or {}
    return ResourceType(
        group=spec["group"],
        version=version["name"],
        plural=names["plural"],
        kind=names["kind"],
        namespaced=spec.get("scope", "Namespaced") == "Namespaced",
        short_names=tuple(names.get("shortNames") or ()),
        categories=tuple(names.get("categories") or ()),
        subresources=tuple(s for s in ("status", "scale") if s in subresources),
        printer_columns=tuple(version.get("additionalPrinterColumns") or ()),
        schema=(version.get("schema") or {}).get("openAPIV3Schema"),
        builtin=False,
    )


class ResourceTypes:
    """The resources served now (thread-safe); CRDs add and replace entries."""

    def __init__(self, types: Iterable[ResourceType]) -> None:
        """Serve these resources."""
        self._lock = threading.Lock()
        self._types: dict[tuple[str, str], ResourceType] = {(t.group, t.plural): t for t in types}

    def get(self, group: str, plural: str) -> ResourceType | None:
        """The resource of a group and plural."""
        with self._lock:
            return self._types.get((group, plural))

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        """The resource of an apiVersion and kind."""
        group, _, version = api_version.rpartition("/")
        with self._lock:
            for t in self._types.values():
                if t.group == group and t.kind == kind and t.version == version:
                    return t
        return None

    def add(self, rtype: ResourceType) -> None:
        """Serve a resource (replacing one of the same group and plural)."""
        with self._lock:
            self._types[(rtype.group, rtype.plural)] = rtype

    def all(self) -> list[ResourceType]:
        """Every served resource."""
        with self._lock:
            return list(self._types.values())


def discovery(parts: list[str], types: list[ResourceType], version: Json) -> Json | None:
    """The discovery document at a path (`/api`, `/apis`, `/apis/<g>/<v>`, `/version`), or None."""
    if parts == ["version"]:
        return version
    if parts[:2] == ["openapi", "v3"]:
        return openapi(parts[2:], types)
    if parts == []:
        return {"paths": ["/api", "/api/v1", "/apis", "/healthz", "/livez", "/readyz", "/version"]}
    if parts == ["api"]:
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}],
        }
    if parts == ["api", "v1"]:
        return _resource_list("v1", [t for t in types if t.group == ""])
    groups: dict[str, set[str]] = {}
    for t in types:
        if t.group:
            groups.setdefault(t.group, set()).add(t.version)
    if parts == ["apis"]:
        return {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [_group(g, sorted(v)) for g, v in sorted(groups.items())],
        }
    if len(parts) == 2 and parts[0] == "apis" and parts[1] in groups:
        return {
            "kind": "APIGroup",
            "apiVersion": "v1",
            **_group(parts[1], sorted(groups[parts[1]])),
        }
    if len(parts) == 3 and parts[0] == "apis" and parts[2] in groups.get(parts[1], set()):
        return _resource_list(
            f"{parts[1]}/{parts[2]}",
            [t for t in types if t.group == parts[1] and t.version == parts[2]],
        )
    return None


def _group(name: str, versions: list[str]) -> Json:
    entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": entries, "preferredVersion": entries[0]}


def _resource_list(group_version: str, types: Iterable[ResourceType]) -> Json:
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": [e for t in sorted(types, key=lambda t: t.plural) for e in t.discovery()],
    }


def openapi(parts: list[str], types: list[ResourceType]) -> Json | None:
    """OpenAPI v3: the operations kubectl looks for (the server validates fields itself) and the
    schemas of served CRDs (for `kubectl explain`)."""
    prefixes = sorted({"api/v1" if not t.group else f"apis/{t.group}/{t.version}" for t in types})
    if not parts:
        return {"paths": {p: {"serverRelativeURL": f"/openapi/v3/{p}"} for p in prefixes}}
    wanted = "/".join(parts)
    if wanted not in prefixes:
        return None
    paths: Json = {}
    schemas: Json = {}
    for t in types:
        prefix = "api/v1" if not t.group else f"apis/{t.group}/{t.version}"
        if prefix != wanted or t.create_only:
            continue
        scope = "/namespaces/{namespace}" if t.namespaced else ""
        gvk = {"group": t.group, "version": t.version, "kind": t.kind}
        operation = {
            "x-kubernetes-group-version-kind": gvk,
            "parameters": [
                {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}
            ],
            "responses": {},
        }
        paths[f"/{prefix}{scope}/{t.plural}/{{name}}"] = {"patch": operation, "put": operation}
        paths[f"/{prefix}{scope}/{t.plural}"] = {"post": operation}
        if t.schema is not None:
            schema = dict(t.schema)
            schema["x-kubernetes-group-version-kind"] = [gvk]
            reverse = ".".join(reversed(t.group.split(".")))
            schemas[f"{reverse}.{t.version}.{t.kind}"] = schema
    return {
        "openapi": "3.0.0",
        "info": {"title": "itbench twin", "version": "v1"},
        "paths": paths,
        "components": {"schemas": schemas},
    }
