"""The heuristic SRE agent: a classical, model-free incident responder.

It follows the firing alerts and the error signals (span-metric error rates, or error traces when
metrics are off) through the topology's call edges to the deepest failing service, inspects the
objects behind the services (flagd flags, Chaos Mesh experiments, NetworkPolicies, Service
selectors and target ports, pods' waiting reasons, restarts and readiness, ReplicaSet revisions,
scale), names the root causes with the propagation chain back to the frontend, and applies the
generic remedies of a small playbook: reset a flag, delete a chaos object or a blocking
NetworkPolicy, restore a Service selector or targetPort, roll a Deployment's pod template back to
its first revision, scale back up, raise a memory limit. Then it waits and checks the alerts.
"""

from __future__ import annotations

import itertools
import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from agents.plugin import Agent
from agents.routines import begin, finish, firing, ref, wait_for_quiet
from itbench.client import (
    ActionVerb,
    AgentAction,
    DiagnosisReport,
    Domain,
    EntityKind,
    FaultCategory,
    ITBenchAPIError,
    ITBenchClient,
    MitigationReport,
    PredictedEdge,
    PredictedEntity,
    TaskDescription,
)

ENTRY_SERVICE = "frontend"
ERROR_RATIO = 0.05
"""A service whose spans fail more often than this is failing."""

SERVICE_LABELS = ("service_name", "deployment", "service", "workload", "consumer_group", "app")
"""Alert labels that name the service an alert is about."""

FLAGD_CONFIGMAP = "flagd-config"
CHAOS_KINDS = ("NetworkChaos", "PodChaos", "StressChaos", "HTTPChaos", "JVMChaos")
FAILING_REASONS = frozenset(
    {
        "ImagePullBackOff",
        "ErrImagePull",
        "InvalidImageName",
        "CrashLoopBackOff",
        "CreateContainerConfigError",
        "RunContainerError",
        "OOMKilled",
        "Error",
    }
)
GENERATED_LABELS = ("pod-template-hash",)
"""Labels the ReplicaSet controller adds to a pod template; not part of the Deployment's."""

ERROR_CALLS = (
    'sum by (service_name) (rate(traces_span_metrics_calls_total{status_code="STATUS_CODE_ERROR"}'
    "[5m]))"
)
ALL_CALLS = "sum by (service_name) (rate(traces_span_metrics_calls_total[5m]))"
KNOWN_KINDS = frozenset(k.value for k in EntityKind)
"""Kinds a diagnosis may name."""
MIN_MEMORY_MI = 256
"""A raised memory limit is at least this many MiB."""


@dataclass
class Finding:
    """A local fault on one service, the entities to blame and the playbook's remedy.

    Attributes:
        service: The service (== Deployment name) the fault sits on.
        weight: How definite the evidence is (higher is surer).
        condition: The fault condition in words.
        roots: Root-cause entities (`Kind`, `name`).
        remedy: The actions that undo it.
        remedy_words: The remedy in words.
        category: What is wrong at the root causes.
    """

    service: str
    weight: float
    condition: str
    roots: list[tuple[str, str]] = field(default_factory=list)
    remedy: list[AgentAction] = field(default_factory=list)
    remedy_words: str = ""
    category: FaultCategory | None = None


REASON_CATEGORIES: tuple[tuple[str, FaultCategory], ...] = (
    ("ImagePullBackOff", FaultCategory.BAD_IMAGE),
    ("ErrImagePull", FaultCategory.BAD_IMAGE),
    ("InvalidImageName", FaultCategory.BAD_IMAGE),
    ("OOMKilled", FaultCategory.RESOURCE_LIMITS),
    ("Pending", FaultCategory.UNSCHEDULABLE),
    ("CreateContainerConfigError", FaultCategory.BAD_CONFIGURATION),
    ("CrashLoopBackOff", FaultCategory.BAD_IMAGE),
    ("Error", FaultCategory.BAD_IMAGE),
    ("NotReady", FaultCategory.BAD_PROBE),
)
"""What a pod's waiting or termination reason says is wrong, most telling first."""


def _category_of(reasons: list[str]) -> FaultCategory:
    for reason, category in REASON_CATEGORIES:
        if reason in reasons:
            return category
    return FaultCategory.BAD_CONFIGURATION


def _name(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _labels(obj: dict[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def _template(obj: dict[str, Any]) -> dict[str, Any]:
    return dict((obj.get("spec") or {}).get("template") or {})


def _template_labels(obj: dict[str, Any]) -> dict[str, str]:
    labels = dict((_template(obj).get("metadata") or {}).get("labels") or {})
    return {k: v for k, v in labels.items() if k not in GENERATED_LABELS}


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def _revision(obj: dict[str, Any]) -> int:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    try:
        return int(annotations.get("deployment.kubernetes.io/revision", "0"))
    except ValueError:
        return 0


def _containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return list((_template(obj).get("spec") or {}).get("containers") or [])


def restore_patch(current: Any, target: Any) -> Any:
    """A strategic merge patch (kubectl's default for built-in kinds) turning `current` into
    `target`: removed keys become null, lists of named items are patched item by item (items
    that must go get `$patch: delete`), other lists are replaced."""
    if isinstance(current, dict) and isinstance(target, dict):
        patch: dict[str, Any] = {k: None for k in current if k not in target}
        for key, value in target.items():
            if key not in current:
                patch[key] = value
            elif current[key] != value:
                patch[key] = restore_patch(current[key], value)
        return patch
    if _named(current) and _named(target):
        before = {item["name"]: item for item in current}
        wanted = {item["name"] for item in target}
        items: list[Any] = []
        for item in target:
            old = before.get(item["name"])
            items.append(
                item
                if old is None or old == item
                else {**restore_patch(old, item), "name": item["name"]}
            )
        items += [{"name": n, "$patch": "delete"} for n in before if n not in wanted]
        return items
    return target


def _named(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(i, dict) and "name" in i for i in value)


def _clean_template(template: dict[str, Any]) -> dict[str, Any]:
    meta = dict(template.get("metadata") or {})
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k not in GENERATED_LABELS}
    if labels:
        meta["labels"] = labels
    else:
        meta.pop("labels", None)
    cleaned = dict(template)
    if meta:
        cleaned["metadata"] = meta
    else:
        cleaned.pop("metadata", None)
    return cleaned


def _container_ports(deployment: dict[str, Any]) -> list[tuple[str, int]]:
    """(name, number) of every port the Deployment's containers declare."""
    return [
        (str(p.get("name", "")), int(p["containerPort"]))
        for c in _containers(deployment)
        for p in c.get("ports") or []
        if "containerPort" in p
    ]


def _admits(rule: dict[str, Any], port: tuple[str, int]) -> bool:
    """Whether a NetworkPolicy ingress rule lets traffic reach a container port.

    Rules restricted by `from` count as admitting (their sources are the shop's own pods).
    """
    allowed = rule.get("ports")
    if not allowed:
        return True
    name, number = port
    for entry in allowed:
        wanted = entry.get("port")
        if wanted is None or wanted == name:
            return True
        if isinstance(wanted, int) and wanted <= number <= int(entry.get("endPort", wanted)):
            return True
    return False


def _listening(service_port: dict[str, Any], container_ports: list[int]) -> int:
    """The container port a Service port should target: its own number if pods listen there."""
    port = service_port.get("port")
    return port if isinstance(port, int) and port in container_ports else container_ports[0]


def _flag_service(flag: str, services: list[str]) -> str | None:
    """The service a flagd flag belongs to: `productCatalogFailure` -> `product-catalog`."""
    kebab = "".join(f"-{c.lower()}" if c.isupper() else c for c in flag).strip("-")
    exact = [s for s in services if kebab.startswith(s + "-") or kebab == s]
    if exact:
        return max(exact, key=len)
    first = kebab.split("-", 1)[0]
    loose = sorted(s for s in services if s.startswith(first + "-"))
    return loose[0] if loose else None


def _memory_mi(text: str) -> float:
    units = {"Ki": 1 / 1024, "Mi": 1.0, "Gi": 1024.0, "K": 1e3 / 2**20, "M": 1e6 / 2**20}
    for suffix, factor in units.items():
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * factor
    return float(text) / 2**20


class Investigation:
    """What the agent has read about the trial, and the reasoning built on it."""

    def __init__(self, client: ITBenchClient, task: TaskDescription) -> None:
        """Read the workloads, services and pods of the trial's namespace."""
        self.client = client
        self.task = task
        self.notes: list[str] = []
        self.deployments = {_name(d): d for d in self._get("deployments")}
        self.services = {_name(s): s for s in self._get("services")}
        self.pods = self._get("pods")
        self.callees: dict[str, list[str]] = {}
        self.callers: dict[str, list[str]] = {}

    def _get(self, kind: str, name: str | None = None) -> list[dict[str, Any]]:
        try:
            return self.client.get(kind, name).items
        except ITBenchAPIError as exc:
            if exc.status != 404:
                self.notes.append(f"could not read {kind}: {exc.detail}")
            return []

    # ---- where the incident shows ---------------------------------------------------------
    def alerting_services(self) -> list[str]:
        """Services named by the firing alerts, the entry service first."""
        found: list[str] = []
        for alert in self.task.alerts:
            for label in SERVICE_LABELS:
                value = alert.labels.get(label)
                if value and value in self.deployments and value not in found:
                    found.append(value)
        found.sort(key=lambda s: (s != ENTRY_SERVICE, s))
        alerts = ", ".join(f"{a.alertname}{a.labels}" for a in self.task.alerts)
        self.notes.append(f"alerts: {alerts} -> services {found}")
        return found

    def read_call_graph(self) -> None:
        """Call edges between services, from the topology."""
        for edge in self.client.topology().edges:
            if edge.get("type") != "calls":
                continue
            caller = str(edge["source"]).split("/", 1)[-1]
            callee = str(edge["target"]).split("/", 1)[-1]
            self.callees.setdefault(caller, []).append(callee)
            self.callers.setdefault(callee, []).append(caller)

    def error_ratios(self) -> dict[str, float]:
        """Share of failed spans per service, from span metrics (empty without metrics)."""
        if not self.task.telemetry.metrics:
            return {}
        try:
            errors = self.client.query(ERROR_CALLS)["result"]
            totals = self.client.query(ALL_CALLS)["result"]
        except ITBenchAPIError as exc:
            self.notes.append(f"span metrics unavailable: {exc.detail}")
            return {}
        total = {r["metric"].get("service_name", ""): float(r["value"][1]) for r in totals}
        ratios: dict[str, float] = {}
        for r in errors:
            service = r["metric"].get("service_name", "")
            if total.get(service):
                ratios[service] = float(r["value"][1]) / total[service]
        failing = {s: round(v, 3) for s, v in ratios.items() if v > ERROR_RATIO}
        self.notes.append(f"span error ratios above {ERROR_RATIO}: {failing}")
        return ratios

    def error_origins(self, service: str) -> list[str]:
        """Services where error traces through `service` originate (deepest failing span)."""
        if not self.task.telemetry.traces:
            return []
        try:
            traces = self.client.traces(service, tags={"error": "true"}, limit=10)
        except ITBenchAPIError:
            return []
        origins: list[str] = []
        for trace in traces:
            processes = trace.get("processes") or {}
            erroring = {
                s["spanID"]: s
                for s in trace.get("spans") or []
                if any(
                    t.get("key") == "error" and str(t.get("value")).lower() == "true"
                    for t in s.get("tags") or []
                )
            }
            parents = {
                r.get("spanID")
                for s in erroring.values()
                for r in s.get("references") or []
                if r.get("refType") == "CHILD_OF"
            }
            for span_id, span in erroring.items():
                if span_id in parents:
                    continue  # an erroring child is closer to the origin
                tags = {t.get("key"): t.get("value") for t in span.get("tags") or []}
                own = str((processes.get(span.get("processID")) or {}).get("serviceName", ""))
                peer = str(tags.get("peer.service") or "")
                origin = peer if peer in self.deployments else own
                if origin and origin not in origins:
                    origins.append(origin)
        self.notes.append(f"error traces through {service} originate at {origins}")
        return origins

    def deepest_failing(self, starts: list[str], failing: set[str]) -> str | None:
        """Walk call edges from the alerting services through failing callees to the deepest."""
        best: tuple[int, str] | None = None
        for start in starts:
            depth = {start: 0}
            queue = deque([start])
            while queue:
                current = queue.popleft()
                for callee in self.callees.get(current, []):
                    if callee in failing and callee not in depth:
                        depth[callee] = depth[current] + 1
                        queue.append(callee)
            for service, d in depth.items():
                if best is None or d > best[0]:
                    best = (d, service)
        return best[1] if best else None

    # ---- local faults -----------------------------------------------------------------------
    def findings(self) -> list[Finding]:
        """Every local fault in the namespace, surest first."""
        found = [
            *self._flag_findings(),
            *self._chaos_findings(),
            *self._network_policy_findings(),
            *self._service_findings(),
            *self._workload_findings(),
        ]
        found.sort(key=lambda f: -f.weight)
        for f in found:
            self.notes.append(f"finding on {f.service} ({f.weight:g}): {f.condition}")
        return found

    def restart(self, service: str) -> list[AgentAction]:
        """A rollout restart of the service's Deployment (none if there is no such Deployment)."""
        if service not in self.deployments:
            return []
        return [AgentAction(verb=ActionVerb.ROLLOUT_RESTART, kind="Deployment", name=service)]

    def _flag_findings(self) -> list[Finding]:
        out: list[Finding] = []
        for cm in self._get("configmaps", FLAGD_CONFIGMAP):
            for text in (cm.get("data") or {}).values():
                try:
                    flags = json.loads(text).get("flags", {})
                except (ValueError, AttributeError):
                    continue
                for flag, spec in sorted(flags.items()):
                    variants = spec.get("variants") or {}
                    default = spec.get("defaultVariant")
                    if "off" not in variants or default in (None, "off"):
                        continue
                    service = _flag_service(flag, sorted(self.deployments)) or ENTRY_SERVICE
                    reset = AgentAction(
                        verb=ActionVerb.SET_FLAG,
                        kind="ConfigMap",
                        name=FLAGD_CONFIGMAP,
                        flag=flag,
                        variant="off",
                    )
                    out.append(
                        Finding(
                            service=service,
                            weight=4.0,
                            condition=f"feature flag {flag} is {default!r}",
                            roots=[("Flag", flag)],
                            remedy=[reset, *self.restart(service)],
                            remedy_words=f"set flag {flag} to off and restart {service}",
                            category=FaultCategory.FEATURE_FLAG,
                        )
                    )
        return out

    def _chaos_findings(self) -> list[Finding]:
        out: list[Finding] = []
        for kind in CHAOS_KINDS:
            for obj in self._get(kind):
                selector = (obj.get("spec") or {}).get("selector") or {}
                labels = selector.get("labelSelectors") or {}
                service = next(
                    (
                        s
                        for s, d in sorted(self.deployments.items())
                        if _selects(labels, _template_labels(d))
                    ),
                    "",
                )
                roots = [(kind, _name(obj))] + ([("Deployment", service)] if service else [])
                out.append(
                    Finding(
                        service=service or ENTRY_SERVICE,
                        weight=4.0,
                        condition=f"{kind} {_name(obj)} injects faults into {service or 'pods'}",
                        roots=roots,
                        remedy=[
                            AgentAction(verb=ActionVerb.DELETE, kind=kind, name=_name(obj)),
                            *self.restart(service),
                        ],
                        remedy_words=f"delete {kind} {_name(obj)}",
                        category=FaultCategory.NETWORK_DEGRADED,
                    )
                )
        return out

    def _network_policy_findings(self) -> list[Finding]:
        out: list[Finding] = []
        for policy in self._get("networkpolicies"):
            spec = policy.get("spec") or {}
            if "Ingress" not in (spec.get("policyTypes") or ["Ingress"]):
                continue
            selector = (spec.get("podSelector") or {}).get("matchLabels") or {}
            rules = list(spec.get("ingress") or [])
            for service, deployment in sorted(self.deployments.items()):
                if not _selects(selector, _template_labels(deployment)):
                    continue
                ports = _container_ports(deployment)
                blocked = [p for p in ports if not any(_admits(rule, p) for rule in rules)]
                if not blocked:
                    continue
                out.append(
                    Finding(
                        service=service,
                        weight=4.0,
                        condition=f"NetworkPolicy {_name(policy)} blocks ingress to {service} "
                        f"on {', '.join(f'{p[0]}/{p[1]}' for p in blocked)}",
                        roots=[("NetworkPolicy", _name(policy)), ("Deployment", service)],
                        remedy=[
                            AgentAction(
                                verb=ActionVerb.DELETE, kind="NetworkPolicy", name=_name(policy)
                            )
                        ],
                        remedy_words=f"delete NetworkPolicy {_name(policy)}",
                        category=FaultCategory.TRAFFIC_BLOCKED,
                    )
                )
        return out

    def _service_findings(self) -> list[Finding]:
        out: list[Finding] = []
        for service, svc in sorted(self.services.items()):
            deployment = self.deployments.get(service)
            if deployment is None:
                continue
            spec = svc.get("spec") or {}
            selector = dict(spec.get("selector") or {})
            labels = _template_labels(deployment)
            if selector and not _selects(selector, labels):
                patch: dict[str, str | None] = {
                    k: labels.get(k) for k, v in selector.items() if labels.get(k) != v
                }
                if not any(labels.get(k) == v for k, v in selector.items() if k not in patch):
                    patch.update(labels)
                out.append(
                    Finding(
                        service=service,
                        weight=3.0,
                        condition=f"Service {service} selector {selector} matches no pod",
                        roots=[("Deployment", service)],
                        remedy=[
                            AgentAction(
                                verb=ActionVerb.PATCH,
                                kind="Service",
                                name=service,
                                patch={"spec": {"selector": patch}},
                            )
                        ],
                        remedy_words=f"restore the selector of Service {service}",
                        category=FaultCategory.SERVICE_MISROUTED,
                    )
                )
            container_ports = sorted(
                {
                    int(p["containerPort"])
                    for c in _containers(deployment)
                    for p in c.get("ports") or []
                    if "containerPort" in p
                }
            )
            ports = list(spec.get("ports") or [])
            wrong = [
                p
                for p in ports
                if isinstance(p.get("targetPort"), int) and p["targetPort"] not in container_ports
            ]
            if container_ports and wrong:
                fixed = [
                    {**p, "targetPort": _listening(p, container_ports)} if p in wrong else p
                    for p in ports
                ]
                out.append(
                    Finding(
                        service=service,
                        weight=3.0,
                        condition=f"Service {service} targets port {wrong[0]['targetPort']} "
                        f"but its pods listen on {container_ports}",
                        roots=[("Deployment", service)],
                        remedy=[
                            AgentAction(
                                verb=ActionVerb.PATCH,
                                kind="Service",
                                name=service,
                                patch={"spec": {"ports": fixed}},
                            )
                        ],
                        remedy_words=f"restore the targetPort of Service {service}",
                        category=FaultCategory.SERVICE_MISROUTED,
                    )
                )
        return out

    def _pod_troubles(self, deployment: dict[str, Any]) -> tuple[list[str], int]:
        reasons: list[str] = []
        restarts = 0
        for pod in self.pods:
            if not _selects(_template_labels(deployment), _labels(pod)):
                continue
            status = pod.get("status") or {}
            if status.get("phase") == "Pending":
                reasons.append("Pending")
            for c in status.get("containerStatuses") or []:
                restarts += int(c.get("restartCount", 0))
                state = c.get("state") or {}
                last = (c.get("lastState") or {}).get("terminated") or {}
                parts = (state.get("waiting") or {}, state.get("terminated") or {}, last)
                found = [str(p["reason"]) for p in parts if p.get("reason") in FAILING_REASONS]
                reasons.extend(found)
                if not c.get("ready", True) and not found:
                    reasons.append("NotReady")
        return reasons, restarts

    def _workload_findings(self) -> list[Finding]:
        out: list[Finding] = []
        by_owner: dict[str, list[dict[str, Any]]] = {}
        for rs in self._get("replicasets"):
            for owner in (rs.get("metadata") or {}).get("ownerReferences") or []:
                by_owner.setdefault(str(owner.get("name")), []).append(rs)
        for service, deployment in sorted(self.deployments.items()):
            reasons, restarts = self._pod_troubles(deployment)
            replicas = int((deployment.get("spec") or {}).get("replicas", 1))
            revisions = sorted(by_owner.get(service, []), key=_revision)
            first = _clean_template(_template(revisions[0])) if revisions else {}
            current = _template(deployment)
            restore = restore_patch(current, first) if first and current != first else {}
            if replicas == 0:
                out.append(
                    Finding(
                        service=service,
                        weight=3.5,
                        condition=f"Deployment {service} is scaled to zero",
                        roots=[("Deployment", service)],
                        remedy=[
                            AgentAction(
                                verb=ActionVerb.SCALE, kind="Deployment", name=service, replicas=1
                            )
                        ],
                        remedy_words=f"scale Deployment {service} back to 1",
                        category=FaultCategory.SCALED_DOWN,
                    )
                )
            if not reasons and not restore:
                continue
            words = ", ".join(sorted(set(reasons))) or "running"
            condition = f"pods of {service}: {words}" + (
                f", {restarts} restarts" if restarts else ""
            )
            finding = Finding(
                service=service,
                weight=1.0,
                condition=condition,
                roots=[("Deployment", service)],
                category=_category_of(reasons),
            )
            if restore:
                finding.weight = 3.0 + (1.0 if reasons else 0.0)
                finding.condition += "; its pod template changed since the first revision"
                finding.remedy = [
                    AgentAction(
                        verb=ActionVerb.PATCH,
                        kind="Deployment",
                        name=service,
                        patch={"spec": {"template": restore}},
                    )
                ]
                finding.remedy_words = (
                    f"roll Deployment {service}'s pod template back to its first revision"
                )
            elif "OOMKilled" in reasons:
                finding.weight = 2.5
                finding.remedy = self._raise_memory(deployment)
                finding.remedy_words = f"raise the memory limit of Deployment {service}"
            elif reasons:
                finding.weight = 2.0
                finding.remedy = self.restart(service)
                finding.remedy_words = f"restart Deployment {service}"
            out.append(finding)
        return out

    def _raise_memory(self, deployment: dict[str, Any]) -> list[AgentAction]:
        actions = []
        for c in _containers(deployment):
            limit = ((c.get("resources") or {}).get("limits") or {}).get("memory")
            value = max(int(_memory_mi(str(limit)) * 4) if limit else 0, MIN_MEMORY_MI)
            actions.append(
                AgentAction(
                    verb=ActionVerb.SET_RESOURCES,
                    kind="Deployment",
                    name=_name(deployment),
                    container=str(c.get("name")),
                    limits={"memory": f"{value}Mi"},
                )
            )
        return actions

    # ---- the report ---------------------------------------------------------------------------
    def chain_to_entry(self, root: str, alerting: list[str], symptomatic: set[str]) -> list[str]:
        """Services from the root cause up the callers to the entry service when it shows
        symptoms, otherwise to the nearest alerting service."""
        entry = {ENTRY_SERVICE} & symptomatic
        for goals in (entry - {root}, set(alerting) - {root}):
            path = self._path_up(root, goals)
            if path:
                return path
        return [root]

    def _path_up(self, root: str, goals: set[str]) -> list[str]:
        previous: dict[str, str] = {}
        queue = deque([root])
        seen = {root}
        while queue:
            current = queue.popleft()
            if current in goals:
                path = [current]
                while path[-1] != root:
                    path.append(previous[path[-1]])
                return list(reversed(path))
            for caller in self.callers.get(current, []):
                if caller not in seen:
                    seen.add(caller)
                    previous[caller] = current
                    queue.append(caller)
        return []


@dataclass
class Diagnosis:
    """The agent's conclusion: local faults to blame and fix, and the propagation chains."""

    findings: list[Finding]
    chains: list[list[str]]


DEFINITE = 3.0
"""Findings at least this sure are named and remedied; weaker ones only without any definite."""


def diagnose(inv: Investigation) -> Diagnosis:
    """Find the local faults and the chains from them up to the alerting services."""
    alerting = inv.alerting_services()
    inv.read_call_graph()
    ratios = inv.error_ratios()
    failing = {s for s, r in ratios.items() if r > ERROR_RATIO} | set(alerting)
    starts = alerting or [ENTRY_SERVICE]
    if not ratios:
        failing |= set(inv.error_origins(starts[0]))
    deepest = inv.deepest_failing(starts, failing) or starts[0]
    inv.notes.append(f"deepest failing service along the call graph: {deepest}")
    findings = inv.findings()
    definite = [f for f in findings if f.weight >= DEFINITE]
    chosen = definite or findings[:1]
    if not chosen and inv.task.alerts:
        # Nothing local explains it: blame the deepest failing service and restart it.
        chosen = [
            Finding(
                service=deepest,
                weight=0.0,
                condition="the deepest failing service along the call graph",
                roots=[("Deployment", deepest)],
                remedy=inv.restart(deepest),
                remedy_words=f"restart Deployment {deepest}",
                category=FaultCategory.APPLICATION_FAILURE,
            )
        ]
    symptomatic = failing | set(alerting)
    for f in chosen:
        # A flag names its service only when that service shows the symptoms itself.
        flagged = any(kind == "Flag" for kind, _ in f.roots)
        if flagged and f.service in symptomatic and ("Deployment", f.service) not in f.roots:
            f.roots.append(("Deployment", f.service))
    roots = list(dict.fromkeys(f.service for f in chosen))
    chains = [inv.chain_to_entry(root, alerting, symptomatic) for root in roots]
    return Diagnosis(findings=chosen, chains=chains)


def report(diagnosis: Diagnosis, notes: list[str]) -> DiagnosisReport:
    """The diagnosis report naming the root causes and the chains up to the entry service."""
    entities: dict[str, PredictedEntity] = {}
    for f in diagnosis.findings:
        for kind, name in f.roots:
            if kind not in KNOWN_KINDS:
                continue
            entities.setdefault(
                ref(kind, name),
                PredictedEntity(
                    kind=EntityKind(kind),
                    name=name,
                    root_cause=True,
                    condition=f.condition[:1000],
                    category=f.category,
                ),
            )
    edges: dict[tuple[str, str], PredictedEdge] = {}
    for chain in diagnosis.chains:
        for service in chain[1:]:
            entities.setdefault(
                ref("Deployment", service),
                PredictedEntity(kind=EntityKind.DEPLOYMENT, name=service, condition="errors"),
            )
        for a, b in itertools.pairwise(chain):
            edges.setdefault(
                (a, b),
                PredictedEdge(
                    source=ref("Deployment", a),
                    target=ref("Deployment", b),
                    condition=f"{a} fails",
                    effect=f"calls from {b} fail",
                ),
            )
    return DiagnosisReport(
        entities=list(entities.values()),
        propagation_chain=list(edges.values()),
        reasoning="\n".join(notes)[-19_000:],
    )


def run(client: ITBenchClient) -> None:
    """Work one SRE trial: diagnose, remedy, wait for the alerts to clear, report.

    Args:
        client: The SDK client holding the trial's token.
    """
    task = begin(client)
    if task.domain != Domain.SRE:
        finish(client)
        return
    inv = Investigation(client, task)
    diagnosis = diagnose(inv)
    client.submit_diagnosis(report(diagnosis, inv.notes))
    done: list[str] = []
    applied: set[str] = set()
    for finding in diagnosis.findings:
        for action in finding.remedy:
            key = action.model_dump_json()
            if key in applied:
                continue
            applied.add(key)
            try:
                message = client.act(action).message
            except ITBenchAPIError as exc:
                message = f"refused: {exc.detail}"
            done.append(f"{finding.remedy_words}: {message}")
    quiet = wait_for_quiet(client, budget_seconds=420.0, step_seconds=30.0) if done else False
    client.submit_mitigation(
        MitigationReport(
            actions=done,
            resolved=quiet,
            reasoning="alerts cleared" if quiet else f"alerts still firing: {firing(client)}",
        )
    )
    finish(client)


AGENT = Agent(
    run=run,
    domains=("SRE",),
    description="Follows alerts along the topology to the failing service; applies its remedy.",
)
"""The registry's entry (`itbench.agents`)."""
