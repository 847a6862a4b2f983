"""What the SRE agent reads of the namespace's objects, and the checks an SRE runs on them.

Workloads and their pods, the rollout history (the pod template the previous ReplicaSet ran),
Services against the pods they should select, NetworkPolicies against the ports pods serve, and
the flags flagd serves (targeting evaluated). Nothing here decides what is wrong; it answers
questions about objects.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agents.routines import items, name_of
from itbench.client import ITBenchClient

GENERATED_LABELS = ("pod-template-hash",)
"""Labels the ReplicaSet controller adds to a pod template; not part of the Deployment's."""
REVISION = "deployment.kubernetes.io/revision"
ADDRESS_SUFFIXES = ("_ADDR", "_HOST", "_URL", "_ENDPOINT", "_PORT")
"""Environment variables that hold a dependency's address."""
TELEMETRY_ENV_PREFIX = "OTEL_"
"""OpenTelemetry SDK variables: they label and route telemetry, not the service's behaviour."""


def template_of(obj: dict[str, Any]) -> dict[str, Any]:
    """The pod template of a Deployment or ReplicaSet, without generated labels."""
    template = dict((obj.get("spec") or {}).get("template") or {})
    meta = dict(template.get("metadata") or {})
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k not in GENERATED_LABELS}
    if labels:
        meta["labels"] = labels
    else:
        meta.pop("labels", None)
    if meta:
        template["metadata"] = meta
    else:
        template.pop("metadata", None)
    return template


def containers_of(template: dict[str, Any]) -> list[dict[str, Any]]:
    """The containers of a pod template or pod spec holder."""
    return list((template.get("spec") or {}).get("containers") or [])


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
        out: list[Any] = []
        for item in target:
            old = before.get(item["name"])
            out.append(
                item
                if old is None or old == item
                else {**restore_patch(old, item), "name": item["name"]}
            )
        out += [{"name": n, "$patch": "delete"} for n in before if n not in wanted]
        return out
    return target


def _named(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(i, dict) and "name" in i for i in value)


@dataclass(frozen=True)
class TemplateChange:
    """How a workload's pod template differs from the one its previous ReplicaSet ran.

    Attributes:
        fields: What changed, as `container/field` or `spec/field` (e.g. `checkout/image`).
        env: Environment variables whose value changed: name -> (before, now).
        patch: The patch that restores the previous template.
        memory_lowered: A memory limit or request went down.
        cpu_lowered: A CPU limit or request went down.
        previous_revision: The revision the previous template belongs to.
    """

    fields: tuple[str, ...]
    env: dict[str, tuple[str | None, str | None]]
    patch: dict[str, Any]
    memory_lowered: bool
    cpu_lowered: bool
    previous_revision: int

    def behaviour_env(self) -> dict[str, tuple[str | None, str | None]]:
        """The changed environment variables that change behaviour (OTEL_* variables only
        describe the telemetry)."""
        return {k: v for k, v in self.env.items() if not k.startswith(TELEMETRY_ENV_PREFIX)}

    def touches(self, *names: str) -> bool:
        """Whether any changed field ends with one of these field names."""
        return any(f.rsplit("/", 1)[-1] in names for f in self.fields)


@dataclass(frozen=True)
class PodState:
    """What `kubectl get pods` and `describe` tell about a workload's pods.

    Attributes:
        pods: Pod names.
        ready: How many are ready.
        reasons: Waiting and last-termination reasons, and Pending.
        restarts: Restarts summed over the pods.
        events: Warning events about the pods, as `Reason: message`.
    """

    pods: tuple[str, ...]
    ready: int
    reasons: frozenset[str]
    restarts: int
    events: tuple[str, ...] = ()

    def event(self, *reasons: str) -> list[str]:
        """The warning events with one of these reasons."""
        return [e for e in self.events if e.split(":", 1)[0] in reasons]


@dataclass
class Objects:
    """The namespace's objects as the agent read them."""

    deployments: dict[str, dict[str, Any]]
    replicasets: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    services: dict[str, dict[str, Any]]
    policies: list[dict[str, Any]]
    hpas: list[dict[str, Any]]
    events: list[dict[str, Any]]
    flags_doc: dict[str, Any] = field(default_factory=dict)
    flags_configmap: str = ""
    namespace: str = ""
    _owners: dict[str, str] = field(default_factory=dict, repr=False)

    @classmethod
    def read(cls, client: ITBenchClient, namespace: str) -> Objects:
        """Read every kind the investigation looks at, once."""
        flags_doc: dict[str, Any] = {}
        flags_configmap = ""
        for cm in items(client, "configmaps"):
            for text in (cm.get("data") or {}).values():
                doc = _flagd_document(str(text))
                if doc is not None:
                    flags_doc, flags_configmap = doc, name_of(cm)
                    break
        try:
            events = client.events().items
        except Exception:
            events = []
        return cls(
            deployments={name_of(d): d for d in items(client, "deployments")},
            replicasets=items(client, "replicasets"),
            pods=items(client, "pods"),
            services={name_of(s): s for s in items(client, "services")},
            policies=items(client, "networkpolicies"),
            hpas=items(client, "horizontalpodautoscalers"),
            events=events,
            flags_doc=flags_doc,
            flags_configmap=flags_configmap,
            namespace=namespace,
        )

    # ---- workloads and pods -------------------------------------------------------------
    def owner_of(self, pod: dict[str, Any]) -> str:
        """The Deployment that owns a pod (through its ReplicaSet)."""
        if not self._owners:
            self._owners = {name_of(rs): _controller(rs) for rs in self.replicasets}
        for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
            if ref.get("kind") == "ReplicaSet":
                return self._owners.get(str(ref.get("name")), "")
        return ""

    def pods_of(self, workload: str) -> list[dict[str, Any]]:
        """The pods a Deployment owns."""
        return [p for p in self.pods if self.owner_of(p) == workload]

    def pod_state(self, workload: str) -> PodState:
        """Readiness, waiting and termination reasons, restarts and warning events of a
        workload's pods."""
        pods = self.pods_of(workload)
        names = tuple(name_of(p) for p in pods)
        reasons: set[str] = set()
        ready = restarts = 0
        for pod in pods:
            status = pod.get("status") or {}
            if status.get("phase") == "Pending":
                reasons.add("Pending")
            statuses = status.get("containerStatuses") or []
            if statuses and all(s.get("ready") for s in statuses):
                ready += 1
            for s in statuses:
                restarts += int(s.get("restartCount") or 0)
                waiting = (s.get("state") or {}).get("waiting") or {}
                if waiting.get("reason"):
                    reasons.add(str(waiting["reason"]))
                holders = [s.get("state") or {}]
                if not s.get("ready") or int(s.get("restartCount") or 0) >= 2:
                    # One restart of a container that now serves is how many services start
                    # (waiting for a database or a broker): not a symptom.
                    holders.append(s.get("lastState") or {})
                for holder in holders:
                    reason = (holder.get("terminated") or {}).get("reason")
                    if reason:
                        reasons.add(str(reason))
        events = tuple(
            f"{e.get('reason', '')}: {e.get('message', '')}"
            for e in self.events
            if e.get("type") == "Warning"
            and _event_object(e)[0] == "Pod"
            and _event_object(e)[1] in names
        )
        return PodState(names, ready, frozenset(reasons), restarts, events)

    def pod_by_ip(self, ip: str) -> dict[str, Any] | None:
        """The pod with this IP."""
        for pod in self.pods:
            if (pod.get("status") or {}).get("podIP") == ip:
                return pod
        return None

    def container_ports(self, workload: str) -> list[tuple[str, int]]:
        """(name, number) of every port a Deployment's containers declare."""
        d = self.deployments.get(workload)
        if d is None:
            return []
        return [
            (str(p.get("name", "")), int(p["containerPort"]))
            for c in containers_of(template_of(d))
            for p in c.get("ports") or []
            if "containerPort" in p
        ]

    def replicas(self, workload: str) -> int | None:
        """spec.replicas of a Deployment."""
        d = self.deployments.get(workload)
        if d is None:
            return None
        value = (d.get("spec") or {}).get("replicas")
        return int(value) if isinstance(value, int) else 1

    def autoscaled(self, workload: str) -> bool:
        """Whether a HorizontalPodAutoscaler scales this Deployment."""
        return any(
            ((h.get("spec") or {}).get("scaleTargetRef") or {}).get("name") == workload
            for h in self.hpas
        )

    # ---- rollout history ----------------------------------------------------------------
    def previous_replicaset(self, workload: str) -> dict[str, Any] | None:
        """The ReplicaSet of the revision before the current one."""
        d = self.deployments.get(workload)
        if d is None:
            return None
        current = _revision(d)
        older = [
            rs
            for rs in self.replicasets
            if _controller(rs) == workload and 0 < _revision(rs) < current
        ]
        return max(older, key=_revision) if older else None

    def template_change(self, workload: str) -> TemplateChange | None:
        """How the current pod template differs from the previous revision's (None: no
        previous revision, or the same template)."""
        d = self.deployments.get(workload)
        previous = self.previous_replicaset(workload)
        if d is None or previous is None:
            return None
        now, before = template_of(d), template_of(previous)
        if now == before:
            return None
        fields: list[str] = []
        env: dict[str, tuple[str | None, str | None]] = {}
        memory_lowered = cpu_lowered = False
        now_c = {str(c.get("name")): c for c in containers_of(now)}
        before_c = {str(c.get("name")): c for c in containers_of(before)}
        for name in sorted(set(now_c) | set(before_c)):
            a, b = before_c.get(name, {}), now_c.get(name, {})
            for key in sorted(set(a) | set(b)):
                if a.get(key) != b.get(key):
                    fields.append(f"{name}/{key}")
            env.update(_env_changes(a, b))
            memory_lowered |= _lowered(a, b, "memory")
            cpu_lowered |= _lowered(a, b, "cpu")
        spec_now = {k: v for k, v in (now.get("spec") or {}).items() if k != "containers"}
        spec_before = {k: v for k, v in (before.get("spec") or {}).items() if k != "containers"}
        for key in sorted(set(spec_now) | set(spec_before)):
            if spec_now.get(key) != spec_before.get(key):
                fields.append(f"spec/{key}")
        if (now.get("metadata") or {}) != (before.get("metadata") or {}):
            fields.append("metadata/annotations")
        return TemplateChange(
            fields=tuple(fields),
            env=env,
            patch={"spec": {"template": restore_patch(now, before)}},
            memory_lowered=memory_lowered,
            cpu_lowered=cpu_lowered,
            previous_revision=_revision(previous),
        )

    # ---- Services and policies ----------------------------------------------------------
    def service_problems(self, service: str, workload: str) -> list[tuple[str, dict[str, Any]]]:
        """What is wrong with a Service in front of a workload, each with the patch that fixes
        it: a selector that picks none of the workload's pods, a targetPort nothing declares."""
        svc = self.services.get(service)
        d = self.deployments.get(workload)
        if svc is None or d is None:
            return []
        spec = svc.get("spec") or {}
        problems: list[tuple[str, dict[str, Any]]] = []
        selector = dict(spec.get("selector") or {})
        pod_labels = dict((template_of(d).get("metadata") or {}).get("labels") or {})
        if selector and not all(pod_labels.get(k) == v for k, v in selector.items()):
            wanted = dict(((d.get("spec") or {}).get("selector") or {}).get("matchLabels") or {})
            if wanted:
                fix: dict[str, Any] = {k: None for k in selector if k not in wanted}
                fix.update(wanted)
                problems.append(
                    (
                        f"Service {service} selects {selector}, which none of {workload}'s pods "
                        f"carry (they are {wanted})",
                        {"spec": {"selector": fix}},
                    )
                )
        declared = self.container_ports(workload)
        numbers = {n for _, n in declared}
        names = {n for n, _ in declared if n}
        ports = list(spec.get("ports") or [])
        fixed: list[dict[str, Any]] = []
        wrong: list[str] = []
        for port in ports:
            target = port.get("targetPort", port.get("port"))
            if (isinstance(target, int) and target in numbers) or (
                isinstance(target, str)
                and (target in names or (target.isdigit() and int(target) in numbers))
            ):
                fixed.append(port)
                continue
            if not numbers:
                fixed.append(port)
                continue
            number = port.get("port")
            good = number if isinstance(number, int) and number in numbers else min(numbers)
            wrong.append(f"{port.get('name') or number}: targetPort {target}")
            fixed.append({**port, "targetPort": good})
        if wrong:
            problems.append(
                (
                    f"Service {service} targets {', '.join(wrong)}, a port {workload}'s pods do "
                    f"not declare (they declare {sorted(numbers)})",
                    {"spec": {"ports": fixed}},
                )
            )
        return problems

    def blocking_policies(
        self, workload: str, callers: list[str]
    ) -> list[tuple[dict[str, Any], list[int]]]:
        """NetworkPolicies selecting a workload's pods that do not admit a port it serves from
        its callers, each with the ports it leaves out (when no other policy admits them)."""
        d = self.deployments.get(workload)
        if d is None:
            return []
        pod_labels = dict((template_of(d).get("metadata") or {}).get("labels") or {})
        served = sorted({n for _, n in self.container_ports(workload)})
        selecting = [
            p
            for p in self.policies
            if "Ingress" in _policy_types(p)
            and _selects(((p.get("spec") or {}).get("podSelector") or {}), pod_labels)
        ]
        if not selecting or not served:
            return []
        sources = [self._pod_labels(c) for c in callers] or [{}]
        blocked = [
            port
            for port in served
            if not any(
                _rule_admits(rule, port, src, self.namespace)
                for p in selecting
                for rule in (p.get("spec") or {}).get("ingress") or []
                for src in sources
            )
        ]
        if not blocked:
            return []
        return [(p, blocked) for p in selecting]

    def _pod_labels(self, workload: str) -> dict[str, str]:
        d = self.deployments.get(workload)
        return dict((template_of(d).get("metadata") or {}).get("labels") or {}) if d else {}

    # ---- flags --------------------------------------------------------------------------
    def flags(self) -> dict[str, dict[str, Any]]:
        """The flags of the flagd configuration, by key."""
        flags = self.flags_doc.get("flags")
        return {str(k): v for k, v in flags.items() if isinstance(v, dict)} if flags else {}


def _flagd_document(text: str) -> dict[str, Any] | None:
    if '"flags"' not in text:
        return None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("flags"), dict) else None


def address_broken(value: str, services: dict[str, dict[str, Any]]) -> str | None:
    """Why a dependency address does not reach a Service of the namespace (None: it does)."""
    text = value.split("://", 1)[-1].split("/", 1)[0].split(",", 1)[0]
    host, _, port = text.rpartition(":")
    if not host:
        host, port = port, ""
    name = host.split(".", 1)[0]
    if not name or name.isdigit():
        return None
    if name not in services:
        return f"{host} is no Service of the namespace"
    if port.isdigit():
        ports = [p.get("port") for p in (services[name].get("spec") or {}).get("ports") or []]
        if int(port) not in ports:
            return f"Service {name} has no port {port}"
    return None


def is_address_variable(name: str) -> bool:
    """Whether an environment variable holds a dependency's address."""
    return name.upper().endswith(ADDRESS_SUFFIXES)


def _env_changes(
    before: dict[str, Any], now: dict[str, Any]
) -> dict[str, tuple[str | None, str | None]]:
    a = {str(e.get("name")): e.get("value") for e in before.get("env") or []}
    b = {str(e.get("name")): e.get("value") for e in now.get("env") or []}
    return {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}


_UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "K": 1e3, "M": 1e6, "G": 1e9, "m": 1e-3}


def quantity(text: object) -> float | None:
    """A Kubernetes quantity as a number (bytes or cores)."""
    s = str(text)
    for suffix, factor in _UNITS.items():
        if s.endswith(suffix):
            try:
                return float(s[: -len(suffix)]) * factor
            except ValueError:
                return None
    try:
        return float(s)
    except ValueError:
        return None


def _lowered(before: dict[str, Any], now: dict[str, Any], resource: str) -> bool:
    for section in ("limits", "requests"):
        a = quantity(((before.get("resources") or {}).get(section) or {}).get(resource, ""))
        b = quantity(((now.get("resources") or {}).get(section) or {}).get(resource, ""))
        if a is not None and b is not None and b < a:
            return True
    return False


def _controller(obj: dict[str, Any]) -> str:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("kind") == "Deployment":
            return str(ref.get("name", ""))
    return ""


def _revision(obj: dict[str, Any]) -> int:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    try:
        return int(annotations.get(REVISION, "0"))
    except ValueError:
        return 0


def _event_object(event: dict[str, Any]) -> tuple[str, str]:
    involved = event.get("involvedObject") or {}
    if involved:
        return str(involved.get("kind", "")), str(involved.get("name", ""))
    obj = str(event.get("object", ""))
    kind, _, name = obj.partition("/")
    return kind.capitalize(), name


def _policy_types(policy: dict[str, Any]) -> list[str]:
    spec = policy.get("spec") or {}
    types = spec.get("policyTypes")
    if types:
        return [str(t) for t in types]
    return ["Ingress", "Egress"] if spec.get("egress") else ["Ingress"]


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    if "matchLabels" not in selector and "matchExpressions" not in selector:
        return all(labels.get(k) == v for k, v in selector.items())
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        present = key in labels
        if (
            (op == "In" and (not present or labels[key] not in values))
            or (op == "NotIn" and present and labels[key] in values)
            or (op == "Exists" and not present)
            or (op == "DoesNotExist" and present)
        ):
            return False
    return True


def _rule_admits(rule: dict[str, Any], port: int, source: dict[str, str], namespace: str) -> bool:
    """Whether an ingress rule admits a port from a pod of the policy's own namespace."""
    allowed = rule.get("ports") or []
    if allowed and not any(_port_matches(p, port) for p in allowed):
        return False
    peers = rule.get("from") or []
    if not peers:
        return True
    own = {"kubernetes.io/metadata.name": namespace}
    for peer in peers:
        if "ipBlock" in peer:
            continue
        in_namespace = "namespaceSelector" not in peer or _selects(
            peer.get("namespaceSelector") or {}, own
        )
        if in_namespace and _selects(peer.get("podSelector") or {}, source):
            return True
    return False


def _port_matches(entry: dict[str, Any], port: int) -> bool:
    value = entry.get("port")
    if value is None:
        return True
    if isinstance(value, str) and not value.isdigit():
        return True  # a named port: assume it names the port served
    low = int(value)
    return low <= port <= int(entry.get("endPort", low))
