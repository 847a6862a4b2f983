"""Kubernetes-shaped objects of the twin: the baseline (the pinned chart as rendered), the API
server's defaulting, strategic merge patches with the real merge keys, selectors and units."""

from __future__ import annotations

import hashlib
import json
import marshal
import pickle
import re
import sys
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any, TypeVar

from itbench import stack
from itbench.core.alert_rules import prometheus_rule
from itbench.core.models.scenario import INJECTOR_KINDS as INJECTOR_KINDS
from itbench.core.shop import NODES

Obj = dict[str, Any]

T = TypeVar("T")


def clone(value: T) -> T:
    """A deep copy of plain object data (dicts, lists, strings, numbers), five times as fast
    as `copy.deepcopy` on Kubernetes-shaped objects (marshal; pickle for anything else)."""
    try:
        copied: T = marshal.loads(marshal.dumps(value))  # type: ignore[arg-type]
    except ValueError:
        copied = pickle.loads(pickle.dumps(value, pickle.HIGHEST_PROTOCOL))
    return copied


def involves(event: Obj, kind: str, name: str) -> bool:
    """Whether an Event (core/v1 `involvedObject` or events.k8s.io `regarding`) is about
    `kind/name`."""
    ref = event.get("involvedObject") or event.get("regarding") or {}
    return bool(ref.get("kind") == kind and ref.get("name") == name)


COMPONENT_LABEL = "opentelemetry.io/name"
CONTROL_PLANE_NODE, NODE_NAME = NODES
"""kind's control-plane node (tainted NoSchedule; no shop pod tolerates it) and the worker every
shop pod runs on."""
NODE_ARCHITECTURE = "amd64"
"""Architecture of the cluster's nodes."""
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
    "IOChaos": ("chaos-mesh.org/v1alpha1", "iochaos.chaos-mesh.org", True),
    "Schedule": ("chaos-mesh.org/v1alpha1", "schedules.chaos-mesh.org", True),
    "ServiceMonitor": ("monitoring.coreos.com/v1", "servicemonitors.monitoring.coreos.com", True),
    "ResourceQuota": ("v1", "resourcequotas", True),
    "LimitRange": ("v1", "limitranges", True),
    "PriorityClass": ("scheduling.k8s.io/v1", "priorityclasses.scheduling.k8s.io", False),
    "StorageClass": ("storage.k8s.io/v1", "storageclasses.storage.k8s.io", False),
    "ClusterRole": (
        "rbac.authorization.k8s.io/v1",
        "clusterroles.rbac.authorization.k8s.io",
        False,
    ),
    "ClusterRoleBinding": (
        "rbac.authorization.k8s.io/v1",
        "clusterrolebindings.rbac.authorization.k8s.io",
        False,
    ),
}
"""Kinds the twin serves: (apiVersion, kubectl resource name, namespaced)."""

# The fault injector's kinds (INJECTOR_KINDS) exist for the platform only. To an agent the API
# answers for them exactly as for a kind the server does not have, whether or not any object
# exists (on a live cluster they live where the agent's RBAC cannot read).

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
    "quota": "ResourceQuota",
    "limits": "LimitRange",
    "pc": "PriorityClass",
    "sc": "StorageClass",
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
_UNITS = {**_BINARY, **_DECIMAL}
_SUFFIXES = sorted(_UNITS, key=len, reverse=True)
_PARSED_LIMIT = 10_000
"""Quantity texts remembered per parser (the controllers and scrapes parse the same few
texts every 15 s)."""
_PARSED_MEMORY: dict[str, float] = {}
_PARSED_CPU: dict[str, float] = {}


def _quantity(
    text: str | int | float, parse: Callable[[str], float], known: dict[str, float]
) -> float:
    # Parsed once per text: controllers and scrapes read the same few quantities every tick.
    if isinstance(text, int | float):
        return float(text)
    if type(text) is not str:
        return parse(str(text).strip())
    value = known.get(text)
    if value is not None:
        return value
    value = parse(text.strip())
    if len(known) < _PARSED_LIMIT:
        known[text] = value
    return value


def parse_memory(text: str | int | float) -> float:
    """Bytes in a Kubernetes memory quantity (`160Mi`, `1G`, `512MB`, `1048576`).

    Raises:
        ValueError: Not a quantity.
    """
    return _quantity(text, _parse_memory, _PARSED_MEMORY)


def _parse_memory(s: str) -> float:
    for suffix in _SUFFIXES:
        if s.endswith(suffix):
            number = s[: -len(suffix)]
            return float(number) * _UNITS[suffix]
    return float(s)


def parse_cpu(text: str | int | float) -> float:
    """Cores in a Kubernetes CPU quantity (`100m`, `0.5`, `2`).

    Raises:
        ValueError: Not a quantity.
    """
    return _quantity(text, _parse_cpu, _PARSED_CPU)


def _parse_cpu(s: str) -> float:
    return float(s[:-1]) / 1000.0 if s.endswith("m") else float(s)


def valid_quantity(text: str, kind: str) -> bool:
    """Whether a text parses as a CPU (`cpu`) or memory quantity."""
    try:
        value = parse_cpu(text) if kind == "cpu" else parse_memory(text)
    except ValueError:
        return False
    return value >= 0


# ---- patches and selectors -------------------------------------------------------------------

_POD_SPEC_KEYS: dict[tuple[str, ...], str] = {
    ("containers",): "name",
    ("initContainers",): "name",
    ("ephemeralContainers",): "name",
    ("volumes",): "name",
    ("imagePullSecrets",): "name",
    ("hostAliases",): "ip",
    ("containers", "*", "env"): "name",
    ("containers", "*", "ports"): "containerPort",
    ("containers", "*", "volumeMounts"): "mountPath",
    ("containers", "*", "volumeDevices"): "devicePath",
    ("initContainers", "*", "env"): "name",
    ("initContainers", "*", "ports"): "containerPort",
    ("initContainers", "*", "volumeMounts"): "mountPath",
}
"""patchMergeKey of the lists of a PodSpec (k8s.io/api core/v1 types.go); lists without one
are replaced whole."""

_TEMPLATE = ("spec", "template", "spec")
_META_KEYS: dict[tuple[str, ...], str] = {("metadata", "ownerReferences"): "uid"}


def _with_prefix(prefix: tuple[str, ...]) -> dict[tuple[str, ...], str]:
    return {prefix + path: key for path, key in _POD_SPEC_KEYS.items()}


MERGE_KEYS: dict[str, dict[tuple[str, ...], str]] = {
    "Pod": {**_META_KEYS, **_with_prefix(("spec",))},
    "Deployment": {**_META_KEYS, **_with_prefix(_TEMPLATE)},
    "ReplicaSet": {**_META_KEYS, **_with_prefix(_TEMPLATE)},
    "StatefulSet": {**_META_KEYS, **_with_prefix(_TEMPLATE)},
    "DaemonSet": {**_META_KEYS, **_with_prefix(_TEMPLATE)},
    "Job": {**_META_KEYS, **_with_prefix(_TEMPLATE)},
    "CronJob": {**_META_KEYS, **_with_prefix(("spec", "jobTemplate", "spec", "template", "spec"))},
    "Service": {**_META_KEYS, ("spec", "ports"): "port"},
}
"""Strategic-merge keys per built-in kind, by path (`*` stands for a list element). Service
ports merge by `port`, containers by `name`, container ports by `containerPort`."""


class MergePatchError(ValueError):
    """A strategic merge patch the API server refuses; the message is the server's."""


def merge_patch(target: Any, patch: Any, *, strategic: bool = True, kind: str = "") -> Any:
    """Apply a patch as the API server does: null deletes a key; lists with a merge key merge
    element by element when strategic (built-in kinds), every other list is replaced.

    Args:
        target: The current value (not modified).
        patch: The patch.
        strategic: A strategic merge patch (`kubectl patch` on built-in kinds); otherwise a JSON
            merge patch (RFC 7386), which replaces lists.
        kind: The object's kind, whose merge keys apply (taken from the target when empty).

    Raises:
        MergePatchError: An element of a merge-keyed list lacks its merge key
            (the API server's `does not contain declared merge key`).
    """
    if not strategic:
        return _json_merge(target, patch)
    if not kind and isinstance(target, dict):
        kind = str(target.get("kind", ""))
    return _strategic(target, patch, (), MERGE_KEYS.get(kind, _META_KEYS))


def _json_merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return clone(patch)
    result: dict[str, Any] = clone(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _json_merge(result.get(key), value)
    return result


def _strategic(
    target: Any, patch: Any, path: tuple[str, ...], keys: dict[tuple[str, ...], str]
) -> Any:
    if not isinstance(patch, dict):
        return clone(patch)
    if patch.get("$patch") == "replace":
        return {k: clone(v) for k, v in patch.items() if k != "$patch"}
    result: dict[str, Any] = clone(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        here = (*path, key)
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list) and here in keys:
            current = result.get(key)
            result[key] = _merge_list(
                current if isinstance(current, list) else [], value, here, keys
            )
        elif isinstance(value, list):
            result[key] = [clone(i) for i in value if not _is_delete(i)]
        else:
            result[key] = _strategic(result.get(key), value, here, keys)
    return result


def _is_delete(item: Any) -> bool:
    return isinstance(item, dict) and item.get("$patch") == "delete"


def _merge_list(
    current: list[Any], patch: list[Any], path: tuple[str, ...], keys: dict[tuple[str, ...], str]
) -> list[Any]:
    key = keys[path]
    if any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch):
        return [clone(i) for i in patch if not (isinstance(i, dict) and "$patch" in i)]
    out = [clone(i) for i in current]
    element = (*path, "*")
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            shown = go_map(item) if isinstance(item, dict) else str(item)
            raise MergePatchError(f"map: {shown} does not contain declared merge key: {key}")
        for n, existing in enumerate(out):
            if isinstance(existing, dict) and existing.get(key) == item.get(key):
                if _is_delete(item):
                    del out[n]
                else:
                    out[n] = _strategic(existing, item, element, keys)
                break
        else:
            if not _is_delete(item):
                out.append(_strategic({}, item, element, keys))
    return out


def go_map(value: Any) -> str:
    """A value as Go's fmt prints a decoded JSON value (`map[a:1 b:x]`, sorted keys)."""
    if isinstance(value, dict):
        inner = " ".join(f"{k}:{go_map(value[k])}" for k in sorted(value))
        return f"map[{inner}]"
    if isinstance(value, list):
        return "[" + " ".join(go_map(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


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


_TEMPLATE_HASHES: dict[bytes, str] = {}
"""Pod-template-hashes by the marshalled template (every twin's baseline has the same ones)."""


def template_hash(template: dict[str, Any]) -> str:
    """A pod-template-hash: a stable 10-character digest of a pod template."""
    # Equal marshal bytes are an equal template, keys in the same order: the same hash.
    try:
        key: bytes | None = marshal.dumps(template)
    except ValueError:
        key = None
    found = _TEMPLATE_HASHES.get(key) if key is not None else None
    if found is not None:
        return found
    text = json.dumps(template, sort_keys=True, separators=(",", ":"))
    digest = _digest(text)
    if key is not None and len(_TEMPLATE_HASHES) < 4096:
        _TEMPLATE_HASHES[key] = digest
    return digest


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
    """A literal environment variable of a container, `$(VAR)` references expanded as the
    kubelet does (from variables defined before it), or None."""
    return resolve_env(container).get(name)


EnvLookup = Callable[[str, str, str], "str | None"]
"""(kind Secret or ConfigMap, object name, key) -> the value, or None when absent."""


def resolve_env(container: dict[str, Any], lookup: EnvLookup | None = None) -> dict[str, str]:
    """A container's environment as its process sees it: literals with `$(VAR)` expanded from
    earlier variables, and (with a lookup) values from Secrets and ConfigMaps."""
    seen: dict[str, str] = {}
    for item in container.get("env") or []:
        if not isinstance(item, dict) or not item.get("name"):
            continue
        name = str(item["name"])
        if item.get("value") is not None:
            seen[name] = _expand(str(item["value"]), seen)
            continue
        source = item.get("valueFrom") or {}
        for key_ref, kind in (("secretKeyRef", "Secret"), ("configMapKeyRef", "ConfigMap")):
            ref = source.get(key_ref)
            if isinstance(ref, dict) and lookup is not None:
                value = lookup(kind, str(ref.get("name", "")), str(ref.get("key", "")))
                if value is not None:
                    seen[name] = value
    return seen


_REFERENCE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def _expand(text: str, known: dict[str, str]) -> str:
    return _REFERENCE.sub(lambda m: known.get(m.group(1), m.group(0)), text)


# ---- addresses -------------------------------------------------------------------------------

DEFAULT_PORTS = {"postgres": 5432, "redis": 6379, "http": 80}


def parse_address(raw: str, protocol: str = "") -> tuple[str, int, str | None]:
    """(host, port, password) of an address as the shop's clients read it: `host:port`, a URL
    (`http://...`, `postgres://user:pass@host/db`), libpq keywords (`host=... port=...`), an
    Npgsql string (`Host=...;Port=...`) or StackExchange.Redis' `host:port,password=...`.

    The port is 0 when none is given and the protocol has no default.
    """
    text = raw.strip()
    default = DEFAULT_PORTS.get(protocol, 0)
    if "=" in text and "://" not in text and "," not in text.split("=", 1)[0]:
        fields: dict[str, str] = {}
        for part in re.split(r"[;\s]+", text):
            key, sep, value = part.partition("=")
            if sep:
                fields[key.strip().lower()] = value.strip()
        if "host" in fields:
            port = fields.get("port", "")
            return (
                fields["host"],
                int(port) if port.isdigit() else default,
                fields.get("password"),
            )
    password = None
    if "," in text:
        text, *options = text.split(",")
        for option in options:
            key, _, value = option.partition("=")
            if key.strip() == "password":
                password = value.strip()
    rest = text.split("://", 1)[-1]
    authority = rest.split("/", 1)[0].split("?", 1)[0]
    if "@" in authority:
        credentials, authority = authority.rsplit("@", 1)
        if ":" in credentials:
            password = credentials.split(":", 1)[1]
    host, sep, port_text = authority.rpartition(":")
    if not sep:
        return authority, default, password
    return host, int(port_text) if port_text.isdigit() else 0, password


def address_of(
    env: Mapping[str, str], var: str, protocol: str = ""
) -> tuple[str | None, int, str | None]:
    """Where an environment variable points (host, port, password); None host when unset.

    `<X>_HOST` takes its port from `<X>_PORT`.
    """
    raw = env.get(var)
    if raw is None:
        return None, 0, None
    if var.endswith("_HOST"):
        port_var = env.get(var[: -len("_HOST")] + "_PORT")
        if port_var is not None:
            return raw, int(port_var) if port_var.isdigit() else 0, None
    return parse_address(raw, protocol)


# ---- the API server's defaults -------------------------------------------------------------


def _default_container(container: Obj) -> None:
    image = str(container.get("image", ""))
    tag = image.rpartition(":")[2] if ":" in image.rpartition("/")[2] else ""
    container.setdefault("imagePullPolicy", "Always" if tag in ("", "latest") else "IfNotPresent")
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    resources = container.setdefault("resources", {})
    limits = resources.get("limits") or {}
    if limits:
        requests = resources.setdefault("requests", {})
        for name, value in limits.items():
            requests.setdefault(name, value)
    for port in container.get("ports") or []:
        port.setdefault("protocol", "TCP")


def _default_pod_spec(spec: Obj) -> None:
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    spec.setdefault("terminationGracePeriodSeconds", 30)
    for container in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        _default_container(container)
    for volume in spec.get("volumes") or []:
        for source in ("configMap", "secret"):
            if source in volume:
                volume[source].setdefault("defaultMode", 420)


def api_defaults(obj: Obj) -> Obj:
    """The object as the API server stores it: the defaults of its kind filled in (a copy).

    Deployments get their strategy, history and deadline; pod templates their DNS policy,
    restart policy, scheduler, grace period and, per container, pull policy, termination message
    and requests equal to limits where only limits are set; Services their cluster IP, session
    affinity, IP families and port protocols.
    """
    out = clone(obj)
    kind = out.get("kind")
    if kind == "Deployment":
        spec = out.setdefault("spec", {})
        spec.setdefault("replicas", 1)
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)
        spec.setdefault(
            "strategy",
            {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"},
            },
        )
        if spec["strategy"].get("type") == "RollingUpdate":
            rolling = spec["strategy"].setdefault("rollingUpdate", {})
            rolling.setdefault("maxSurge", "25%")
            rolling.setdefault("maxUnavailable", "25%")
        _default_pod_spec(spec.setdefault("template", {}).setdefault("spec", {}))
    elif kind == "Pod":
        _default_pod_spec(out.setdefault("spec", {}))
    elif kind == "Service":
        spec = out.setdefault("spec", {})
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        spec.setdefault("internalTrafficPolicy", "Cluster")
        spec.setdefault("ipFamilyPolicy", "SingleStack")
        spec.setdefault("ipFamilies", ["IPv4"])
        if "clusterIP" not in spec:
            spec["clusterIP"] = cluster_ip(str(out["metadata"]["name"]))
        spec.setdefault("clusterIPs", [spec["clusterIP"]])
        for port in spec.get("ports") or []:
            port.setdefault("protocol", "TCP")
            if "port" in port:
                port.setdefault("targetPort", port["port"])
    return out


def cluster_ip(name: str) -> str:
    """A stable service IP in kind's default service range (10.96.0.0/16) for a Service."""
    digest = int(hashlib.sha256(name.encode()).hexdigest(), 16)
    return f"10.96.{digest % 250 + 1}.{digest // 250 % 250 + 2}"


# ---- the baseline ----------------------------------------------------------------------------


def component_labels(name: str) -> dict[str, str]:
    """The chart's selector label of a component's pods."""
    return {COMPONENT_LABEL: name}


def _retarget(obj: Obj, source: str, namespace: str) -> Obj:
    meta = obj.setdefault("metadata", {})
    if meta.get("namespace") == source:
        meta["namespace"] = namespace
    for subject in obj.get("subjects") or []:
        if subject.get("namespace") == source:
            subject["namespace"] = namespace
    return obj


def nodes() -> list[Obj]:
    """The cluster's nodes: kind's tainted control plane and the worker the shop runs on."""
    kubelet = str(stack.pins()["kubernetes"]["version"])
    out: list[Obj] = []
    for name, role in ((CONTROL_PLANE_NODE, "control-plane"), (NODE_NAME, "worker")):
        labels = {
            "beta.kubernetes.io/arch": NODE_ARCHITECTURE,
            "beta.kubernetes.io/os": "linux",
            "kubernetes.io/arch": NODE_ARCHITECTURE,
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
        }
        spec: Obj = {"podCIDR": "10.244.0.0/24" if role == "control-plane" else "10.244.1.0/24"}
        if role == "control-plane":
            labels["node-role.kubernetes.io/control-plane"] = ""
            spec["taints"] = [
                {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
            ]
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": labels},
                "spec": spec,
                "status": {
                    "capacity": {
                        "cpu": str(NODE_CPU_CORES),
                        "memory": f"{NODE_MEMORY_GIB}Gi",
                        "pods": "110",
                    },
                    "allocatable": {
                        "cpu": str(NODE_CPU_CORES),
                        "memory": f"{NODE_MEMORY_GIB}Gi",
                        "pods": "110",
                    },
                    "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                    "nodeInfo": {
                        "architecture": NODE_ARCHITECTURE,
                        "kubeletVersion": kubelet,
                        "containerRuntimeVersion": "containerd://2.1.1",
                        "operatingSystem": "linux",
                    },
                },
            }
        )
    return out


@lru_cache(maxsize=8)
def _baseline(namespace: str) -> tuple[Obj, ...]:
    source = stack.release()["namespace"]
    kps = stack.chart_pin("kube-prometheus-stack")
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
        *nodes(),
    ]
    for obj in stack.chart_objects():
        out.append(api_defaults(_retarget(obj, source, namespace)))
    for obj in stack.stack_manifests("autoscaling.yaml"):
        obj["metadata"]["namespace"] = namespace
        out.append(obj)
    out.append(prometheus_rule(namespace, {"release": str(kps["release"])}))
    return tuple(out)


def baseline_objects(namespace: str) -> list[Obj]:
    """Every object of the healthy shop: the pinned chart as the API server stores it, the
    stack's autoscalers and alert rules, the namespace and the nodes (without ReplicaSets, Pods
    and Endpoints: controllers derive those)."""
    data = _baseline_data(namespace)
    if data is None:
        return [clone(o) for o in _baseline(namespace)]
    return [marshal.loads(b) for b in data]


@lru_cache(maxsize=8)
def _baseline_data(namespace: str) -> list[bytes] | None:
    # Each baseline object marshalled once, as `clone` marshals it: a copy is then a read
    # (None: not plain data). Its strings are interned first, so that every copy, and every
    # copy of a copy, shares one object per distinct string instead of holding its own: a
    # twin's objects are mostly repeated keys, labels and images.
    try:
        return [marshal.dumps(_interned(o)) for o in _baseline(namespace)]
    except ValueError:
        return None


def _interned(value: Any) -> Any:
    """Plain object data with every string, key or value, interned (`sys.intern`)."""
    if isinstance(value, str):
        return sys.intern(value)
    if isinstance(value, dict):
        return {_interned(k): _interned(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_interned(v) for v in value]
    return value
