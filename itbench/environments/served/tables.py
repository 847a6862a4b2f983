"""Server-side Tables (`Accept: application/json;as=Table`) as kube-apiserver prints them, so that
`kubectl get` shows the usual columns: built-in kinds have their own, CRDs their
additionalPrinterColumns, everything else Name and Age."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from itbench.environments.served.resources import ResourceType

Json = dict[str, Any]
Cells = Callable[[Json, float], list[Any]]


def _parse_time(stamp: Any) -> float | None:
    if not isinstance(stamp, str) or not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def age(stamp: Any, now: float) -> str:
    """kubectl's human duration from a timestamp to now (`5m12s`, `3h`, `40d`, `<unknown>`)."""
    then = _parse_time(stamp)
    if then is None:
        return "<unknown>"
    seconds = int(now - then)
    if seconds < 0:
        return "<invalid>"
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        rest = seconds % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if days < 8:
        rest = hours % 24
        return f"{days}d{rest}h" if rest else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    return f"{days // 365}y"


def _meta(obj: Json) -> Json:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _spec(obj: Json) -> Json:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


def _status(obj: Json) -> Json:
    status = obj.get("status")
    return status if isinstance(status, dict) else {}


def _created(obj: Json, now: float) -> str:
    return age(_meta(obj).get("creationTimestamp"), now)


def _containers(template_spec: Json) -> tuple[str, str]:
    containers = template_spec.get("containers") or []
    names = ",".join(str(c.get("name", "")) for c in containers if isinstance(c, dict))
    images = ",".join(str(c.get("image", "")) for c in containers if isinstance(c, dict))
    return names, images


def _selector(selector: Any) -> str:
    if not isinstance(selector, dict):
        return "<none>"
    labels = selector.get("matchLabels") if "matchLabels" in selector else selector
    terms = [f"{k}={v}" for k, v in sorted((labels or {}).items()) if isinstance(v, str)]
    return ",".join(terms) or "<none>"


def _pod(obj: Json, now: float) -> list[Any]:
    status = _status(obj)
    statuses = [s for s in status.get("containerStatuses") or [] if isinstance(s, dict)]
    total = len(_spec(obj).get("containers") or [])
    ready = sum(1 for s in statuses if s.get("ready"))
    restarts = sum(int(s.get("restartCount", 0)) for s in statuses)
    reason = str(status.get("reason") or status.get("phase") or "Unknown")
    for s in statuses:
        state = s.get("state") or {}
        waiting = state.get("waiting") or {}
        terminated = state.get("terminated") or {}
        if waiting.get("reason"):
            reason = str(waiting["reason"])
        elif terminated.get("reason"):
            reason = str(terminated["reason"])
    if _meta(obj).get("deletionTimestamp"):
        reason = "Terminating"
    return [
        _meta(obj).get("name"),
        f"{ready}/{total}",
        reason,
        restarts,
        _created(obj, now),
        status.get("podIP") or "<none>",
        _spec(obj).get("nodeName") or "<none>",
        "<none>",
        "<none>",
    ]


def _deployment(obj: Json, now: float) -> list[Any]:
    spec, status = _spec(obj), _status(obj)
    names, images = _containers((spec.get("template") or {}).get("spec") or {})
    return [
        _meta(obj).get("name"),
        f"{int(status.get('readyReplicas', 0))}/{int(spec.get('replicas', 1))}",
        int(status.get("updatedReplicas", 0)),
        int(status.get("availableReplicas", 0)),
        _created(obj, now),
        names,
        images,
        _selector(spec.get("selector")),
    ]


def _replicaset(obj: Json, now: float) -> list[Any]:
    spec, status = _spec(obj), _status(obj)
    names, images = _containers((spec.get("template") or {}).get("spec") or {})
    return [
        _meta(obj).get("name"),
        int(spec.get("replicas", 1)),
        int(status.get("replicas", 0)),
        int(status.get("readyReplicas", 0)),
        _created(obj, now),
        names,
        images,
        _selector(spec.get("selector")),
    ]


def _statefulset(obj: Json, now: float) -> list[Any]:
    spec, status = _spec(obj), _status(obj)
    names, images = _containers((spec.get("template") or {}).get("spec") or {})
    return [
        _meta(obj).get("name"),
        f"{int(status.get('readyReplicas', 0))}/{int(spec.get('replicas', 1))}",
        _created(obj, now),
        names,
        images,
    ]


def _daemonset(obj: Json, now: float) -> list[Any]:
    spec, status = _spec(obj), _status(obj)
    selector = ((spec.get("template") or {}).get("spec") or {}).get("nodeSelector") or {}
    return [
        _meta(obj).get("name"),
        int(status.get("desiredNumberScheduled", 0)),
        int(status.get("currentNumberScheduled", 0)),
        int(status.get("numberReady", 0)),
        int(status.get("updatedNumberScheduled", 0)),
        int(status.get("numberAvailable", 0)),
        ",".join(f"{k}={v}" for k, v in sorted(selector.items())) or "<none>",
        _created(obj, now),
    ]


def _service(obj: Json, now: float) -> list[Any]:
    spec = _spec(obj)
    ports = []
    for p in spec.get("ports") or []:
        if not isinstance(p, dict):
            continue
        text = f"{p.get('port')}"
        if p.get("nodePort"):
            text += f":{p['nodePort']}"
        ports.append(f"{text}/{p.get('protocol', 'TCP')}")
    external = ",".join(spec.get("externalIPs") or []) or "<none>"
    return [
        _meta(obj).get("name"),
        spec.get("type", "ClusterIP"),
        spec.get("clusterIP") or "<none>",
        external,
        ",".join(ports) or "<none>",
        _created(obj, now),
        _selector(spec.get("selector")),
    ]


def _configmap(obj: Json, now: float) -> list[Any]:
    count = len(obj.get("data") or {}) + len(obj.get("binaryData") or {})
    return [_meta(obj).get("name"), count, _created(obj, now)]


def _secret(obj: Json, now: float) -> list[Any]:
    count = len(obj.get("data") or {}) + len(obj.get("stringData") or {})
    return [_meta(obj).get("name"), obj.get("type", "Opaque"), count, _created(obj, now)]


def _event(obj: Json, now: float) -> list[Any]:
    involved = obj.get("involvedObject") or {}
    last = obj.get("lastTimestamp") or obj.get("eventTime") or _meta(obj).get("creationTimestamp")
    return [
        age(last, now),
        obj.get("type", ""),
        obj.get("reason", ""),
        f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}",
        obj.get("message", ""),
        _meta(obj).get("name"),
    ]


def _node(obj: Json, now: float) -> list[Any]:
    conditions = {c.get("type"): c.get("status") for c in _status(obj).get("conditions") or []}
    state = "Ready" if conditions.get("Ready") == "True" else "NotReady"
    if _spec(obj).get("unschedulable"):
        state += ",SchedulingDisabled"
    labels = _meta(obj).get("labels") or {}
    roles = sorted(k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/"))
    info = _status(obj).get("nodeInfo") or {}
    return [
        _meta(obj).get("name"),
        state,
        ",".join(roles) or "<none>",
        _created(obj, now),
        info.get("kubeletVersion", ""),
    ]


def _namespace(obj: Json, now: float) -> list[Any]:
    phase = _status(obj).get("phase", "Active")
    if _meta(obj).get("deletionTimestamp"):
        phase = "Terminating"
    return [_meta(obj).get("name"), phase, _created(obj, now)]


def _hpa(obj: Json, now: float) -> list[Any]:
    spec, status = _spec(obj), _status(obj)
    ref = spec.get("scaleTargetRef") or {}
    targets = []
    current = {
        (m.get("resource") or {}).get("name"): (m.get("resource") or {}).get("current") or {}
        for m in status.get("currentMetrics") or []
        if isinstance(m, dict)
    }
    for metric in spec.get("metrics") or []:
        resource = (metric or {}).get("resource") or {}
        target = (resource.get("target") or {}).get("averageUtilization")
        seen = (current.get(resource.get("name")) or {}).get("averageUtilization")
        shown = f"{seen}%" if seen is not None else "<unknown>"
        targets.append(f"{resource.get('name', '')}: {shown}/{target}%")
    return [
        _meta(obj).get("name"),
        f"{ref.get('kind', '')}/{ref.get('name', '')}",
        ", ".join(targets) or "<none>",
        spec.get("minReplicas", 1),
        spec.get("maxReplicas", 0),
        status.get("currentReplicas", 0),
        _created(obj, now),
    ]


def _netpol(obj: Json, now: float) -> list[Any]:
    selector = _selector(_spec(obj).get("podSelector"))
    return [
        _meta(obj).get("name"),
        "<none>" if selector == "<none>" else selector,
        _created(obj, now),
    ]


def _endpoints(obj: Json, now: float) -> list[Any]:
    shown = []
    for subset in obj.get("subsets") or []:
        ports = [p.get("port") for p in subset.get("ports") or []] or [None]
        for address in subset.get("addresses") or []:
            for port in ports:
                ip = address.get("ip", "")
                shown.append(f"{ip}:{port}" if port is not None else ip)
    text = ",".join(shown[:3]) + (f" + {len(shown) - 3} more..." if len(shown) > 3 else "")
    return [_meta(obj).get("name"), text or "<none>", _created(obj, now)]


def _job(obj: Json, now: float) -> list[Any]:
    spec, status = _spec(obj), _status(obj)
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    state = "Running"
    if conditions.get("Complete") == "True":
        state = "Complete"
    elif conditions.get("Failed") == "True":
        state = "Failed"
    return [
        _meta(obj).get("name"),
        state,
        f"{int(status.get('succeeded', 0))}/{int(spec.get('completions', 1))}",
        _created(obj, now),
    ]


def _named(obj: Json, now: float) -> list[Any]:
    return [_meta(obj).get("name"), _created(obj, now)]


def _column(name: str, kind: str = "string", priority: int = 0, fmt: str = "") -> Json:
    return {"name": name, "type": kind, "format": fmt, "description": "", "priority": priority}


_NAME = _column("Name", fmt="name")
_AGE = _column("Age")
TABLES: dict[str, tuple[list[Json], Cells]] = {
    "Pod": (
        [
            _NAME,
            _column("Ready"),
            _column("Status"),
            _column("Restarts", "integer"),
            _AGE,
            _column("IP", priority=1),
            _column("Node", priority=1),
            _column("Nominated Node", priority=1),
            _column("Readiness Gates", priority=1),
        ],
        _pod,
    ),
    "Deployment": (
        [
            _NAME,
            _column("Ready"),
            _column("Up-to-date", "integer"),
            _column("Available", "integer"),
            _AGE,
            _column("Containers", priority=1),
            _column("Images", priority=1),
            _column("Selector", priority=1),
        ],
        _deployment,
    ),
    "ReplicaSet": (
        [
            _NAME,
            _column("Desired", "integer"),
            _column("Current", "integer"),
            _column("Ready", "integer"),
            _AGE,
            _column("Containers", priority=1),
            _column("Images", priority=1),
            _column("Selector", priority=1),
        ],
        _replicaset,
    ),
    "StatefulSet": (
        [
            _NAME,
            _column("Ready"),
            _AGE,
            _column("Containers", priority=1),
            _column("Images", priority=1),
        ],
        _statefulset,
    ),
    "DaemonSet": (
        [
            _NAME,
            _column("Desired", "integer"),
            _column("Current", "integer"),
            _column("Ready", "integer"),
            _column("Up-to-date", "integer"),
            _column("Available", "integer"),
            _column("Node Selector"),
            _AGE,
        ],
        _daemonset,
    ),
    "Service": (
        [
            _NAME,
            _column("Type"),
            _column("Cluster-IP"),
            _column("External-IP"),
            _column("Port(s)"),
            _AGE,
            _column("Selector", priority=1),
        ],
        _service,
    ),
    "ConfigMap": ([_NAME, _column("Data", "integer"), _AGE], _configmap),
    "Secret": ([_NAME, _column("Type"), _column("Data", "integer"), _AGE], _secret),
    "Event": (
        [
            _column("Last Seen"),
            _column("Type"),
            _column("Reason"),
            _column("Object"),
            _column("Message"),
            _column("Name", priority=1, fmt="name"),
        ],
        _event,
    ),
    "Node": ([_NAME, _column("Status"), _column("Roles"), _AGE, _column("Version")], _node),
    "Namespace": ([_NAME, _column("Status"), _AGE], _namespace),
    "HorizontalPodAutoscaler": (
        [
            _NAME,
            _column("Reference"),
            _column("Targets"),
            _column("MinPods", "integer"),
            _column("MaxPods", "integer"),
            _column("Replicas", "integer"),
            _AGE,
        ],
        _hpa,
    ),
    "NetworkPolicy": ([_NAME, _column("Pod-Selector"), _AGE], _netpol),
    "Endpoints": ([_NAME, _column("Endpoints"), _AGE], _endpoints),
    "Job": ([_NAME, _column("Status"), _column("Completions"), _AGE], _job),
}


def _jsonpath(obj: Json, path: str) -> Any:
    node: Any = obj
    for part in path.lstrip(".").split("."):
        if not part:
            continue
        node = node.get(part) if isinstance(node, dict) else None
    return node


def table(rtype: ResourceType, items: Sequence[Json], resource_version: str, now: float) -> Json:
    """A meta.k8s.io/v1 Table of objects of one resource.

    Args:
        rtype: Their resource.
        items: The objects.
        resource_version: The list's resourceVersion.
        now: The server's time (for ages), epoch seconds.
    """
    if rtype.printer_columns:
        custom: list[Mapping[str, Any]] = [
            {"name": "Name", "type": "string", "format": "name", "jsonPath": ".metadata.name"},
            *rtype.printer_columns,
        ]
        columns = [
            _column(str(c["name"]), str(c.get("type", "string")), int(c.get("priority", 0)))
            for c in custom
        ]
        columns[0]["format"] = "name"

        def cells(obj: Json, at: float) -> list[Any]:
            out = []
            for c in custom:
                value = _jsonpath(obj, str(c.get("jsonPath", "")))
                if c.get("type") == "date" and value is not None:
                    value = age(value, at)
                out.append(value)
            return out

        render: Cells = cells
    else:
        columns, render = TABLES.get(rtype.kind, ([_NAME, _AGE], _named))
    return {
        "apiVersion": "meta.k8s.io/v1",
        "kind": "Table",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": columns,
        "rows": [
            {
                "cells": render(obj, now),
                "object": {
                    "apiVersion": "meta.k8s.io/v1",
                    "kind": "PartialObjectMetadata",
                    "metadata": _meta(obj),
                },
            }
            for obj in items
        ],
    }
