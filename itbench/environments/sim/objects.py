"""Kubernetes-shaped objects of the twin: baseline manifests, merge patches, selectors, units."""

from __future__ import annotations

import hashlib
import json
import pickle
from functools import lru_cache
from typing import Any, TypeVar

from itbench.core.alert_rules import prometheus_rule
from itbench.core.shop import (
    COST_BUDGET_KEY,
    COST_CONFIGMAP,
    DEFAULT_COST_BUDGET_PER_HOUR,
    FLAGD_CONFIG_KEY,
    FLAGD_CONFIGMAP,
    HPA_WORKLOADS,
    NODE_ARCHITECTURE,
    SERVICES,
    ServiceSpec,
    default_flagd_config_text,
)

Obj = dict[str, Any]

T = TypeVar("T")


def clone(value: T) -> T:
    """A deep copy of plain object data (dicts, lists, strings, numbers), three times as fast
    as `copy.deepcopy` on Kubernetes-shaped objects."""
    copied: T = pickle.loads(pickle.dumps(value, pickle.HIGHEST_PROTOCOL))
    return copied


COMPONENT_LABEL = "opentelemetry.io/name"
NODE_NAME = "kind-worker"
NODE_CPU_CORES = 8
NODE_MEMORY_GIB = 32

KIND_INFO: dict[str, tuple[str, str, bool]] = {
    "Deployment": ("apps/v1", "deployments.apps", True),
    "ReplicaSet": ("apps/v1", "replicasets.apps", True),
    "Pod": ("v1", "pods", True),
    "Service": ("v1", "services", True),
    "Endpoints": ("v1", "endpoints", True),
    "ConfigMap": ("v1", "configmaps", True),
    "Secret": ("v1", "secrets", True),
    "HorizontalPodAutoscaler": ("autoscaling/v2", "horizontalpodautoscalers.autoscaling", True),
    "NetworkPolicy": ("networking.k8s.io/v1", "networkpolicies.networking.k8s.io", True),
    "Node": ("v1", "nodes", False),
    "Namespace": ("v1", "namespaces", False),
    "ServiceAccount": ("v1", "serviceaccounts", True),
    "PersistentVolumeClaim": ("v1", "persistentvolumeclaims", True),
    "StatefulSet": ("apps/v1", "statefulsets.apps", True),
    "DaemonSet": ("apps/v1", "daemonsets.apps", True),
    "Job": ("batch/v1", "jobs.batch", True),
    "CronJob": ("batch/v1", "cronjobs.batch", True),
    "Ingress": ("networking.k8s.io/v1", "ingresses.networking.k8s.io", True),
    "Event": ("v1", "events", True),
    "PrometheusRule": ("monitoring.coreos.com/v1", "prometheusrules.monitoring.coreos.com", True),
    "NetworkChaos": ("chaos-mesh.org/v1alpha1", "networkchaos.chaos-mesh.org", True),
    "PodChaos": ("chaos-mesh.org/v1alpha1", "podchaos.chaos-mesh.org", True),
    "StressChaos": ("chaos-mesh.org/v1alpha1", "stresschaos.chaos-mesh.org", True),
    "HTTPChaos": ("chaos-mesh.org/v1alpha1", "httpchaos.chaos-mesh.org", True),
    "JVMChaos": ("chaos-mesh.org/v1alpha1", "jvmchaos.chaos-mesh.org", True),
}
"""Kinds the twin serves: (apiVersion, kubectl resource name, namespaced)."""

INJECTOR_KINDS = frozenset({"NetworkChaos", "PodChaos", "StressChaos", "HTTPChaos", "JVMChaos"})
"""Kinds of the fault injector: they exist for the platform only. To an agent the API answers
for them exactly as for a kind the server does not have, whether or not any object exists (on a
live cluster they live where the agent's RBAC cannot read)."""

_ALIASES: dict[str, str] = {
    "deploy": "Deployment",
    "rs": "ReplicaSet",
    "po": "Pod",
    "svc": "Service",
    "ep": "Endpoints",
    "cm": "ConfigMap",
    "hpa": "HorizontalPodAutoscaler",
    "netpol": "NetworkPolicy",
    "no": "Node",
    "ev": "Event",
    "ns": "Namespace",
    "sa": "ServiceAccount",
    "pvc": "PersistentVolumeClaim",
    "sts": "StatefulSet",
    "ds": "DaemonSet",
    "cj": "CronJob",
    "ing": "Ingress",
}
for _kind, (_api, _resource, _ns) in KIND_INFO.items():
    _ALIASES[_kind.lower()] = _kind
    _ALIASES[_resource.split(".")[0]] = _kind
    _ALIASES[_kind.lower() + "s"] = _kind


def canonical_kind(kind: str) -> str:
    """The kind for any kubectl spelling (`deploy`, `deployments.apps`, `Deployment`)."""
    text = kind.strip()
    if text in KIND_INFO:
        return text
    return _ALIASES.get(text.split(".", 1)[0].lower(), text)


def resource_name(kind: str) -> str:
    """kubectl's resource name of a kind (`deployment.apps` style, singular)."""
    info = KIND_INFO.get(kind)
    if info is None:
        return kind.lower()
    _, _, group = info[1].partition(".")
    singular = kind.lower()
    return f"{singular}.{group}" if group else singular


# ---- quantities ------------------------------------------------------------------------------

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
_DECIMAL = {"k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "MB": 10**6, "GB": 10**9}


def parse_memory(text: str | int | float) -> float:
    """Bytes in a Kubernetes memory quantity (`160Mi`, `1G`, `512MB`, `1048576`).

    Raises:
        ValueError: Not a quantity.
    """
    if isinstance(text, int | float):
        return float(text)
    s = str(text).strip()
    for suffix in sorted({**_BINARY, **_DECIMAL}, key=len, reverse=True):
        if s.endswith(suffix):
            number = s[: -len(suffix)]
            return float(number) * {**_BINARY, **_DECIMAL}[suffix]
    return float(s)


def parse_cpu(text: str | int | float) -> float:
    """Cores in a Kubernetes CPU quantity (`100m`, `0.5`, `2`).

    Raises:
        ValueError: Not a quantity.
    """
    if isinstance(text, int | float):
        return float(text)
    s = str(text).strip()
    if s.endswith("m"):
        return float(s[:-1]) / 1000.0
    return float(s)


def valid_quantity(text: str, kind: str) -> bool:
    """Whether a text parses as a CPU (`cpu`) or memory quantity."""
    try:
        value = parse_cpu(text) if kind == "cpu" else parse_memory(text)
    except ValueError:
        return False
    return value >= 0


# ---- patches and selectors -------------------------------------------------------------------

_MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
}
"""Lists that strategic merge patches merge by key (as kubectl patch does for built-in kinds)."""


def merge_patch(target: Any, patch: Any, *, strategic: bool = True) -> Any:
    """Apply a merge patch: null deletes a key; named lists merge by key when strategic.

    Args:
        target: The current value (not modified).
        patch: The patch.
        strategic: Merge the lists of `_MERGE_KEYS` item by item (kubectl's strategic merge for
            built-in kinds); otherwise lists are replaced (RFC 7386).
    """
    if not isinstance(patch, dict):
        return clone(patch)
    result: dict[str, Any] = clone(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif (
            strategic
            and isinstance(value, list)
            and isinstance(result.get(key), list)
            and _list_key(key, value) is not None
        ):
            result[key] = _merge_list(result[key], value, str(_list_key(key, value)))
        else:
            result[key] = merge_patch(result.get(key), value, strategic=strategic)
    return result


def _list_key(key: str, items: list[Any]) -> str | None:
    if key == "ports":
        # Service ports merge by port name when they have one; container ports by number.
        if all(isinstance(i, dict) and "containerPort" in i for i in items):
            return "containerPort"
        if all(isinstance(i, dict) and ("name" in i or "port" in i) for i in items):
            return "name" if all("name" in i for i in items) else "port"
        return None
    merge_key = _MERGE_KEYS.get(key)
    if merge_key is None or not all(isinstance(i, dict) and merge_key in i for i in items):
        return None
    return merge_key


def _merge_list(current: list[Any], patch: list[Any], key: str) -> list[Any]:
    out = [clone(i) for i in current]
    for item in patch:
        for n, existing in enumerate(out):
            if isinstance(existing, dict) and existing.get(key) == item.get(key):
                if item.get("$patch") == "delete":
                    del out[n]
                else:
                    out[n] = merge_patch(existing, item)
                break
        else:
            if item.get("$patch") != "delete":
                out.append(clone(item))
    return out


def labels_match(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """Whether labels satisfy a label selector (matchLabels and matchExpressions, or a plain map).

    An empty selector matches everything; None matches nothing.
    """
    if selector is None:
        return False
    if "matchLabels" not in selector and "matchExpressions" not in selector:
        return all(labels.get(k) == v for k, v in selector.items())
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        present = key in labels
        if op == "In" and (not present or labels[key] not in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True


def template_hash(template: dict[str, Any]) -> str:
    """A pod-template-hash: a stable 10-character digest of a pod template."""
    text = json.dumps(template, sort_keys=True, separators=(",", ":"))
    return _digest(text)


@lru_cache(maxsize=4096)
def _digest(text: str) -> str:
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    digest = int(hashlib.sha256(text.encode()).hexdigest(), 16)
    chars = []
    for _ in range(10):
        digest, r = divmod(digest, len(alphabet))
        chars.append(alphabet[r])
    return "".join(chars)


def main_container(pod_spec: dict[str, Any]) -> dict[str, Any]:
    """The first (application) container of a pod spec; an empty dict when there is none."""
    containers = pod_spec.get("containers") or []
    first = containers[0] if containers else {}
    return first if isinstance(first, dict) else {}


def env_value(container: dict[str, Any], name: str) -> str | None:
    """A literal environment variable of a container, or None."""
    for item in container.get("env") or []:
        if isinstance(item, dict) and item.get("name") == name:
            value = item.get("value")
            return None if value is None else str(value)
    return None


# ---- the baseline ----------------------------------------------------------------------------


def _meta(name: str, namespace: str, labels: dict[str, str] | None = None) -> Obj:
    meta: Obj = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = labels
    return meta


def component_labels(name: str) -> dict[str, str]:
    """The chart's labels on a component's pods."""
    return {
        COMPONENT_LABEL: name,
        "app.kubernetes.io/component": name,
        "app.kubernetes.io/name": name,
        "app.kubernetes.io/part-of": "opentelemetry-demo",
    }


def deployment(spec: ServiceSpec, namespace: str) -> Obj:
    """The chart's Deployment of a component."""
    container: Obj = {
        "name": spec.name,
        "image": spec.image,
        "imagePullPolicy": "IfNotPresent",
        "env": [{"name": k, "value": v} for k, v in spec.env],
        "resources": {
            "requests": {"cpu": f"{spec.cpu_request_m}m", "memory": f"{spec.memory_request_mi}Mi"},
            "limits": {"cpu": f"{spec.cpu_limit_m}m", "memory": f"{spec.memory_limit_mi}Mi"},
        },
    }
    ports = []
    if spec.port is not None:
        ports.append({"name": "service", "containerPort": spec.port, "protocol": "TCP"})
    ports += [{"name": n, "containerPort": p, "protocol": "TCP"} for n, p in spec.extra_ports]
    if ports:
        container["ports"] = ports
    labels = component_labels(spec.name)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(spec.name, namespace, dict(labels)),
        "spec": {
            "replicas": spec.replicas,
            "revisionHistoryLimit": 10,
            "selector": {"matchLabels": {COMPONENT_LABEL: spec.name}},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"},
            },
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "serviceAccountName": "opentelemetry-demo",
                    "containers": [container],
                },
            },
        },
    }


def service(spec: ServiceSpec, namespace: str) -> Obj | None:
    """The chart's Service of a component (None for components that do not listen)."""
    if spec.port is None:
        return None
    ports = [{"name": "tcp-service", "port": spec.port, "targetPort": spec.port, "protocol": "TCP"}]
    ports += [
        {"name": n, "port": p, "targetPort": p, "protocol": "TCP"} for n, p in spec.extra_ports
    ]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(spec.name, namespace, component_labels(spec.name)),
        "spec": {
            "type": "ClusterIP",
            "selector": {COMPONENT_LABEL: spec.name},
            "ports": ports,
        },
    }


def hpa(workload: str, namespace: str, minimum: int, maximum: int, target: int) -> Obj:
    """A CPU-utilisation HorizontalPodAutoscaler of a Deployment."""
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": _meta(workload, namespace, component_labels(workload)),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": workload},
            "minReplicas": minimum,
            "maxReplicas": maximum,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": target},
                    },
                }
            ],
        },
    }


def baseline_objects(namespace: str) -> list[Obj]:
    """Every object of the healthy shop (without ReplicaSets, Pods and Endpoints: controllers
    derive those)."""
    out: list[Obj] = [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": namespace,
                "labels": {"kubernetes.io/metadata.name": namespace},
            },
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        },
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": _meta("opentelemetry-demo", namespace),
        },
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": NODE_NAME,
                "labels": {
                    "kubernetes.io/hostname": NODE_NAME,
                    "kubernetes.io/arch": NODE_ARCHITECTURE,
                    "kubernetes.io/os": "linux",
                    "node-role.kubernetes.io/worker": "",
                },
            },
            "spec": {},
            "status": {
                "capacity": {"cpu": str(NODE_CPU_CORES), "memory": f"{NODE_MEMORY_GIB}Gi"},
                "allocatable": {"cpu": str(NODE_CPU_CORES), "memory": f"{NODE_MEMORY_GIB}Gi"},
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                "nodeInfo": {"architecture": NODE_ARCHITECTURE, "kubeletVersion": "v1.32.4"},
            },
        },
    ]
    for spec in SERVICES:
        out.append(deployment(spec, namespace))
        svc = service(spec, namespace)
        if svc is not None:
            out.append(svc)
    out.append(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": _meta(FLAGD_CONFIGMAP, namespace, component_labels("flagd")),
            "data": {FLAGD_CONFIG_KEY: default_flagd_config_text()},
        }
    )
    out.append(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": _meta(
                COST_CONFIGMAP, namespace, {"app.kubernetes.io/part-of": "opentelemetry-demo"}
            ),
            "data": {COST_BUDGET_KEY: f"{DEFAULT_COST_BUDGET_PER_HOUR:g}", "currency": "USD"},
        }
    )
    out.append(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": _meta("opentelemetry-demo-credentials", namespace),
            "type": "Opaque",
            "data": {"username": "ZGVtbw==", "password": "b3RlbC1kZW1v"},
        }
    )
    for workload, minimum, maximum, target in HPA_WORKLOADS:
        out.append(hpa(workload, namespace, minimum, maximum, target))
    out.append(prometheus_rule(namespace))
    return out
