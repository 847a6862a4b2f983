"""kubectl-shaped views of Kubernetes objects: kind spellings, `get` tables, `describe` and events.

The gateway returns structured JSON and, next to it, the text kubectl would print, so that an agent
built around kubectl output reads what it expects.
"""

from __future__ import annotations

import marshal
import threading
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime
from typing import Any

import yaml

_DUMPER: type = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_YAML_CACHE_SIZE = 256
_yaml_cache: OrderedDict[bytes, str] = OrderedDict()
_yaml_lock = threading.Lock()
"""libyaml's safe dumper where PyYAML has it (ten times PyYAML's own speed, the same text)."""

_KINDS: dict[str, tuple[str, ...]] = {
    "Pod": ("po", "pods"),
    "Deployment": ("deploy", "deployments"),
    "ReplicaSet": ("rs", "replicasets"),
    "StatefulSet": ("sts", "statefulsets"),
    "DaemonSet": ("ds", "daemonsets"),
    "Service": ("svc", "services"),
    "Endpoints": ("ep", "endpoint"),
    "ConfigMap": ("cm", "configmaps"),
    "Secret": ("secrets",),
    "HorizontalPodAutoscaler": ("hpa", "horizontalpodautoscalers"),
    "NetworkPolicy": ("netpol", "networkpolicies"),
    "Node": ("no", "nodes"),
    "Namespace": ("ns", "namespaces"),
    "Event": ("ev", "events"),
    "Job": ("jobs",),
    "CronJob": ("cj", "cronjobs"),
    "ServiceAccount": ("sa", "serviceaccounts"),
    "Role": ("roles",),
    "RoleBinding": ("rolebindings",),
    "PersistentVolumeClaim": ("pvc", "persistentvolumeclaims"),
    "PersistentVolume": ("pv", "persistentvolumes"),
    "Ingress": ("ing", "ingresses"),
    "PrometheusRule": ("prometheusrules",),
    "ServiceMonitor": ("servicemonitors",),
    "PodMonitor": ("podmonitors",),
    "Scenario": ("scenarios", "sc"),
    "BenchmarkRun": ("benchmarkruns", "br"),
    "Trial": ("trials",),
    "AgentSubmission": ("agentsubmissions",),
    "ClusterRole": ("clusterroles",),
    "ClusterRoleBinding": ("clusterrolebindings",),
    "CustomResourceDefinition": ("crd", "crds", "customresourcedefinitions"),
    "StorageClass": ("storageclasses",),
}
_LOOKUP: dict[str, str] = {}
for _kind, _aliases in _KINDS.items():
    _LOOKUP[_kind.lower()] = _kind
    for _alias in _aliases:
        _LOOKUP[_alias] = _kind

CLUSTER_SCOPED_KINDS = frozenset(
    {
        "Node",
        "Namespace",
        "PersistentVolume",
        "ClusterRole",
        "ClusterRoleBinding",
        "CustomResourceDefinition",
        "StorageClass",
        "PriorityClass",
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "Scenario",
    }
)
"""Kinds that live outside any namespace."""


def canonical_kind(kind: str) -> str:
    """The canonical kind for any kubectl spelling (`po`, `pods`, `Pod` -> `Pod`).

    Unknown spellings come back unchanged, so the environment can answer for them.
    """
    text = kind.strip()
    if "." in text:
        text = text.split(".", 1)[0]
    return _LOOKUP.get(text.lower(), text)


def _age(obj: dict[str, Any], now: datetime) -> str:
    created = (obj.get("metadata") or {}).get("creationTimestamp")
    if not created:
        return "<unknown>"
    try:
        then = datetime.fromisoformat(str(created).replace("Z", "+00:00"))
    except ValueError:
        return "<unknown>"
    if then.tzinfo is None and now.tzinfo is not None:
        then = then.replace(tzinfo=now.tzinfo)
    seconds = max(int((now - then).total_seconds()), 0)
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    if seconds < 172800:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def _name(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _pod_row(obj: dict[str, Any]) -> list[str]:
    status = obj.get("status") or {}
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for c in statuses if c.get("ready"))
    total = len(statuses) or len((obj.get("spec") or {}).get("containers") or [])
    restarts = sum(int(c.get("restartCount", 0)) for c in statuses)
    reason = str(status.get("phase", "Unknown"))
    for c in statuses:
        state = c.get("state") or {}
        waiting = state.get("waiting") or {}
        terminated = state.get("terminated") or {}
        if waiting.get("reason"):
            reason = str(waiting["reason"])
            break
        if terminated.get("reason"):
            reason = str(terminated["reason"])
            break
    return [f"{ready}/{total}", reason, str(restarts)]


def _deployment_row(obj: dict[str, Any]) -> list[str]:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    desired = int(spec.get("replicas", 1))
    return [
        f"{int(status.get('readyReplicas', 0))}/{desired}",
        str(int(status.get("updatedReplicas", 0))),
        str(int(status.get("availableReplicas", 0))),
    ]


def _replicaset_row(obj: dict[str, Any]) -> list[str]:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    return [
        str(int(spec.get("replicas", 0))),
        str(int(status.get("replicas", 0))),
        str(int(status.get("readyReplicas", 0))),
    ]


def _service_row(obj: dict[str, Any]) -> list[str]:
    spec = obj.get("spec") or {}
    ports = ",".join(f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in spec.get("ports") or [])
    selector = ",".join(f"{k}={v}" for k, v in (spec.get("selector") or {}).items())
    return [
        str(spec.get("type", "ClusterIP")),
        str(spec.get("clusterIP", "<none>")),
        ports or "<none>",
        selector or "<none>",
    ]


def _hpa_row(obj: dict[str, Any]) -> list[str]:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    target = spec.get("scaleTargetRef") or {}
    return [
        f"{target.get('kind', '')}/{target.get('name', '')}",
        str(spec.get("minReplicas", 1)),
        str(spec.get("maxReplicas", "")),
        str(status.get("currentReplicas", 0)),
    ]


def _node_row(obj: dict[str, Any]) -> list[str]:
    conditions = (obj.get("status") or {}).get("conditions") or []
    ready: dict[str, Any] = next((c for c in conditions if c.get("type") == "Ready"), {})
    return ["Ready" if ready.get("status") == "True" else "NotReady"]


_COLUMNS: dict[str, tuple[list[str], Callable[[dict[str, Any]], list[str]]]] = {
    "Pod": (["READY", "STATUS", "RESTARTS"], _pod_row),
    "Deployment": (["READY", "UP-TO-DATE", "AVAILABLE"], _deployment_row),
    "ReplicaSet": (["DESIRED", "CURRENT", "READY"], _replicaset_row),
    "Service": (["TYPE", "CLUSTER-IP", "PORT(S)", "SELECTOR"], _service_row),
    "HorizontalPodAutoscaler": (["REFERENCE", "MINPODS", "MAXPODS", "REPLICAS"], _hpa_row),
    "Node": (["STATUS"], _node_row),
}


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [len(h) for h in header]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    lines = ["   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    head = "   ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()
    return "\n".join([head, *lines])


def render_get(kind: str, objects: list[dict[str, Any]], now: datetime) -> str:
    """The table `kubectl get <kind>` prints for these objects.

    Args:
        kind: The canonical kind.
        objects: The objects, as Kubernetes JSON.
        now: The environment's time, for the AGE column.
    """
    if not objects:
        return f"No {kind} resources found."
    columns, row = _COLUMNS.get(kind, ([], lambda _o: []))
    header = ["NAME", *columns, "AGE"]
    rows = [[_name(o), *row(o), _age(o, now)] for o in objects]
    return _table(header, rows)


def _involved(event: dict[str, Any]) -> tuple[str, str]:
    obj = event.get("involvedObject") or event.get("regarding") or {}
    return str(obj.get("kind", "")), str(obj.get("name", ""))


def events_for(events: list[dict[str, Any]], kind: str, name: str) -> list[dict[str, Any]]:
    """The events whose involved object is `kind/name`."""
    return [e for e in events if _involved(e) == (kind, name)]


def render_events(events: list[dict[str, Any]]) -> str:
    """The table `kubectl get events` prints."""
    if not events:
        return "No events found."
    rows = []
    for e in events:
        kind, name = _involved(e)
        rows.append(
            [
                str(e.get("lastTimestamp") or e.get("eventTime") or e.get("firstTimestamp") or ""),
                str(e.get("type", "Normal")),
                str(e.get("reason", "")),
                f"{kind.lower()}/{name}",
                str(e.get("message", "")),
            ]
        )
    return _table(["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"], rows)


def render_describe(obj: dict[str, Any], events: list[dict[str, Any]]) -> str:
    """A `kubectl describe`-like rendering: identity, labels, spec and status, then events."""
    meta = obj.get("metadata") or {}
    lines = [
        f"Name:         {meta.get('name', '')}",
        f"Namespace:    {meta.get('namespace', '')}",
        f"Kind:         {obj.get('kind', '')}",
        "Labels:       "
        + (", ".join(f"{k}={v}" for k, v in (meta.get("labels") or {}).items()) or "<none>"),
        "Annotations:  "
        + (", ".join(f"{k}={v}" for k, v in (meta.get("annotations") or {}).items()) or "<none>"),
    ]
    body = {k: v for k, v in obj.items() if k not in ("metadata", "apiVersion", "kind")}
    if body:
        lines.append(_yaml_text(body).rstrip())
    lines.append("Events:")
    lines.append("  <none>" if not events else render_events(events))
    return "\n".join(lines)


def _yaml_text(body: dict[str, Any]) -> str:
    # An agent describes the same unchanged objects again and again; the YAML of a body is
    # kept by its exact content (marshal's bytes keep key order and types), so a changed
    # object is never answered with an old text.
    try:
        key = marshal.dumps(body)
    except ValueError:
        return str(yaml.dump(body, Dumper=_DUMPER, sort_keys=False, default_flow_style=False))
    with _yaml_lock:
        text = _yaml_cache.get(key)
        if text is not None:
            _yaml_cache.move_to_end(key)
            return text
    text = str(yaml.dump(body, Dumper=_DUMPER, sort_keys=False, default_flow_style=False))
    with _yaml_lock:
        _yaml_cache[key] = text
        while len(_yaml_cache) > _YAML_CACHE_SIZE:
            _yaml_cache.popitem(last=False)
    return text
