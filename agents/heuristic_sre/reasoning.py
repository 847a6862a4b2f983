"""From symptoms to causes: where the incident starts, what is wrong there, and how to undo it.

The failing calls are followed down the call graph to where they start: a service that fails on
its own, a call that fails although its callee does not, a slow service whose callees are fast,
unhealthy pods, a lagging consumer, an autoscaler at its ceiling. At each origin the evidence of
its objects is weighed: a flag flagd serves that concerns it, its Service, the NetworkPolicies
in front of it, its replica count, its pods' reasons and events, and what its pod template
changed since the previous revision (only when that change explains the symptom). A cause with
object evidence is definite and gets the narrowest remedy on exactly that object; a cause read
from symptoms alone (a network delay, a partition, pods that stop serving, CPU or memory burnt
inside the pods, requests aborted) is named but not acted on, since no object shows it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from agents.heuristic_sre.objects import (
    Objects,
    address_broken,
    flag_concerns,
    flag_is_on,
    is_address_variable,
    off_variant,
)
from agents.heuristic_sre.signals import THROTTLED, Failure, Signals
from agents.routines import name_of, ref, value_before_change
from itbench.client import ActionVerb, AgentAction, FaultCategory, ITBenchClient

MEMORY_FULL = 0.9
"""Working set as a share of the memory limit from which a container is about to be killed."""
IMAGE_REASONS = frozenset({"ImagePullBackOff", "ErrImagePull", "InvalidImageName"})
CRASH_REASONS = frozenset({"CrashLoopBackOff", "Error", "RunContainerError"})
CONFIG_REASONS = frozenset({"CreateContainerConfigError", "CreateContainerError"})
POD_ALERTS = frozenset(
    {"PodNotReady", "PodCrashLooping", "ContainerOOMKilled", "CPUThrottlingHigh", "MemoryUsageHigh"}
)
SCHEDULING_FIELDS = ("nodeSelector", "affinity", "tolerations", "nodeName")
PROBE_FIELDS = ("readinessProbe", "livenessProbe", "startupProbe")


@dataclass
class Finding:
    """A cause: the entity to blame, what is wrong with it, and what undoes it.

    Attributes:
        kind: Kind of the entity.
        name: Name of the entity.
        category: What is wrong there.
        service: The workload it sits on (the chain starts there).
        condition: The evidence, in words.
        remedy: The actions that undo it (empty: nothing an agent can change shows the cause).
        remedy_words: The remedy in words.
        definite: Object evidence backs it (else it is read from symptoms alone).
        follow_up: Workloads to restart if their symptoms outlast the remedy (a flag's leak).
    """

    kind: str
    name: str
    category: FaultCategory
    service: str
    condition: str
    remedy: list[AgentAction] = field(default_factory=list)
    remedy_words: str = ""
    definite: bool = True
    follow_up: list[str] = field(default_factory=list)

    @property
    def ref(self) -> str:
        """The entity, `Kind/name`."""
        return ref(self.kind, self.name)


@dataclass
class Graph:
    """The service call graph from the topology."""

    callees: dict[str, list[str]] = field(default_factory=dict)
    callers: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def from_topology(cls, edges: list[dict[str, Any]]) -> Graph:
        """Read the `calls` edges."""
        graph = cls()
        for edge in edges:
            if edge.get("type") != "calls":
                continue
            a = str(edge["source"]).split("/", 1)[-1]
            b = str(edge["target"]).split("/", 1)[-1]
            graph.callees.setdefault(a, []).append(b)
            graph.callers.setdefault(b, []).append(a)
        return graph

    def neighbours(self, service: str) -> set[str]:
        """Direct callers and callees."""
        return set(self.callees.get(service, [])) | set(self.callers.get(service, []))


@dataclass
class Investigation:
    """What was read, and the reasoning built on it."""

    client: ITBenchClient
    objects: Objects
    signals: Signals
    graph: Graph
    notes: list[str] = field(default_factory=list)
    findings: dict[str, Finding] = field(default_factory=dict)
    covered: set[str] = field(default_factory=set)
    """Workloads whose symptoms a definite finding already explains."""
    _inspected: set[str] = field(default_factory=set)

    # ---- bookkeeping -----------------------------------------------------------------------
    def add(self, finding: Finding) -> None:
        """Record a finding once per entity (a definite one wins over a symptom reading)."""
        have = self.findings.get(finding.ref)
        if have is not None and (have.definite or not finding.definite):
            for action in finding.remedy:
                if action not in have.remedy:
                    have.remedy.append(action)
            return
        self.findings[finding.ref] = finding
        if finding.definite:
            self.covered.add(finding.service)
        self.notes.append(
            f"{'cause' if finding.definite else 'likely cause'}: {finding.ref} "
            f"[{finding.category.value}]: {finding.condition}"
        )

    def definite_at(self, workload: str) -> bool:
        """Whether a definite finding sits on this workload."""
        return any(f.definite and f.service == workload for f in self.findings.values())

    # ---- flags -----------------------------------------------------------------------------
    def flag_findings(self, symptomatic: set[str]) -> dict[str, set[str]]:
        """Flags flagd serves switched on that concern the incident's services; returns the
        services each flag concerns."""
        workloads = sorted(self.objects.deployments)
        near = set(symptomatic)
        for s in symptomatic:
            near |= self.graph.neighbours(s)
        out: dict[str, set[str]] = {}
        for key, spec in sorted(self.objects.flags().items()):
            if not flag_is_on(spec):
                continue
            concerns = flag_concerns(key, spec, workloads)
            if not concerns & near:
                self.notes.append(
                    f"flag {key} is on but concerns {sorted(concerns)}, not the incident's services"
                )
                continue
            off = off_variant(spec)
            shown = sorted(concerns & symptomatic) or sorted(concerns)
            service = shown[0]
            served = spec.get("defaultVariant")
            self.add(
                Finding(
                    kind="Flag",
                    name=key,
                    category=FaultCategory.FEATURE_FLAG,
                    service=service,
                    condition=f"flagd serves {key}={served} ({spec.get('description', '')}); "
                    f"it concerns {', '.join(sorted(concerns))}",
                    remedy=[
                        AgentAction(
                            verb=ActionVerb.SET_FLAG, kind="Flag", name=key, flag=key, variant=off
                        )
                    ]
                    if off
                    else [],
                    remedy_words=f"switch flag {key} to {off}",
                    follow_up=sorted(concerns & symptomatic & set(self.objects.deployments)),
                )
            )
            out[key] = concerns
        return out

    # ---- workloads -------------------------------------------------------------------------
    def inspect_workload(self, w: str, flags: dict[str, set[str]]) -> None:
        """Pods, events and the latest template change of a workload with symptoms."""
        if w in self._inspected or w not in self.objects.deployments:
            return
        self._inspected.add(w)
        sig, objects = self.signals, self.objects
        state = objects.pod_state(w)
        change = objects.template_change(w)
        lines = " ".join(sig.lines.get(w, []))
        reasons = state.reasons
        alerts = sig.alerts(w)
        image = bool(reasons & IMAGE_REASONS) or any(
            "pull" in e.lower() for e in state.event("Failed", "ErrImagePull")
        )
        exec_format = "exec format error" in lines
        crash = bool(reasons & CRASH_REASONS) or "PodCrashLooping" in alerts
        oom = (
            "OOMKilled" in reasons
            or bool(state.event("OOMKilling"))
            or "ContainerOOMKilled" in alerts
        )
        memory = sig.memory.get(w, 0.0) > MEMORY_FULL or "MemoryUsageHigh" in alerts
        throttled = sig.throttled.get(w, 0.0) > THROTTLED or "CPUThrottlingHigh" in alerts
        pending = "Pending" in reasons or bool(state.event("FailedScheduling"))
        probe = any("probe failed" in e.lower() for e in state.event("Unhealthy"))
        config = bool(reasons & CONFIG_REASONS)
        not_ready = bool(state.pods) and state.ready < len(state.pods)
        symptoms = [
            name
            for name, present in (
                ("image cannot be pulled", image),
                ("binary cannot run (exec format error)", exec_format),
                ("crash looping", crash),
                ("OOM-killed", oom),
                ("close to its memory limit", memory),
                ("CPU throttled", throttled),
                ("pods cannot be scheduled", pending),
                ("readiness probe fails", probe),
                ("container config error", config),
                ("pods not ready", not_ready),
            )
            if present
        ]
        if not symptoms:
            return
        self.notes.append(
            f"{w}: {', '.join(symptoms)}; pods {state.ready}/{len(state.pods)} ready, "
            f"reasons {sorted(reasons)}, restarts {state.restarts}"
            + (
                f", template changed since revision {change.previous_revision}: "
                f"{', '.join(change.fields)}"
                if change
                else ""
            )
        )
        explained: tuple[FaultCategory, str] | None = None
        if change is not None:
            if (image or exec_format or crash) and change.touches("image"):
                explained = (FaultCategory.BAD_IMAGE, "its image changed and cannot run")
            elif pending and change.touches(*SCHEDULING_FIELDS):
                explained = (FaultCategory.UNSCHEDULABLE, "its node placement changed")
            elif probe and change.touches(*PROBE_FIELDS):
                explained = (FaultCategory.BAD_PROBE, "its probe changed and fails")
            elif oom and change.memory_lowered:
                explained = (FaultCategory.RESOURCE_LIMITS, "its memory limit was lowered")
            elif throttled and change.cpu_lowered:
                explained = (FaultCategory.RESOURCE_LIMITS, "its CPU limit was lowered")
            elif (crash or config) and change.touches("args", "command", "env", "volumeMounts"):
                explained = (FaultCategory.BAD_CONFIGURATION, "its command or environment changed")
        if explained is not None and change is not None:
            category, why = explained
            self.add(
                Finding(
                    kind="Deployment",
                    name=w,
                    category=category,
                    service=w,
                    condition=f"{', '.join(symptoms)}: {why} in its latest rollout "
                    f"({', '.join(change.fields)})",
                    remedy=[
                        AgentAction(
                            verb=ActionVerb.PATCH, kind="Deployment", name=w, patch=change.patch
                        )
                    ],
                    remedy_words=f"restore Deployment {w}'s pod template fields that changed "
                    f"since revision {change.previous_revision} ({', '.join(change.fields)})",
                )
            )
            return
        if any(w in concerns for concerns in flags.values()):
            return  # a flag that concerns the workload explains what its pods do
        if oom or memory or throttled:
            self.add(
                Finding(
                    "Deployment",
                    w,
                    FaultCategory.RESOURCE_STRESS,
                    w,
                    f"{', '.join(symptoms)} with limits unchanged since the previous revision: "
                    "something inside the pods burns CPU or memory",
                    definite=False,
                )
            )
        elif image or exec_format:
            self.add(
                Finding(
                    "Deployment", w, FaultCategory.BAD_IMAGE, w, ", ".join(symptoms), definite=False
                )
            )
        elif pending:
            self.add(
                Finding(
                    "Deployment",
                    w,
                    FaultCategory.UNSCHEDULABLE,
                    w,
                    ", ".join(symptoms),
                    definite=False,
                )
            )
        elif probe:
            self.add(
                Finding(
                    "Deployment", w, FaultCategory.BAD_PROBE, w, ", ".join(symptoms), definite=False
                )
            )
        elif not_ready or crash:
            self.add(
                Finding(
                    "Deployment",
                    w,
                    FaultCategory.PODS_DOWN,
                    w,
                    f"{', '.join(symptoms)} without a failing probe, a bad image or a changed "
                    "template: the pods run but do not serve",
                    definite=False,
                )
            )

    def inspect_target(self, caller: str, target: str, failures: list[Failure]) -> None:
        """What stands between callers and a callee they fail to reach: its Service, replica
        count, NetworkPolicies, and a change of its command or environment."""
        objects = self.objects
        if target not in objects.deployments:
            return
        for service in [target] if target in objects.services else []:
            for why, patch in objects.service_problems(service, target):
                self.add(
                    Finding(
                        "Service",
                        service,
                        FaultCategory.SERVICE_MISROUTED,
                        target,
                        why,
                        remedy=[
                            AgentAction(
                                verb=ActionVerb.PATCH, kind="Service", name=service, patch=patch
                            )
                        ],
                        remedy_words=f"fix Service {service} ({why})",
                    )
                )
        replicas = objects.replicas(target)
        if replicas == 0 and not objects.autoscaled(target):
            earlier = value_before_change(
                self.client,
                f'kube_deployment_spec_replicas{{namespace="{objects.namespace}", '
                f'deployment="{target}"}}',
            )
            count = int(earlier[0]) if earlier and earlier[0] >= 1 else 1
            self.add(
                Finding(
                    "Deployment",
                    target,
                    FaultCategory.SCALED_DOWN,
                    target,
                    f"Deployment {target} asks for 0 replicas (it ran {count} before), so calls "
                    f"to it find no endpoints",
                    remedy=[
                        AgentAction(
                            verb=ActionVerb.SCALE, kind="Deployment", name=target, replicas=count
                        )
                    ],
                    remedy_words=f"scale Deployment {target} back to {count}",
                )
            )
        callers = sorted(self.graph.callers.get(target, [])) or [caller]
        blocking = objects.blocking_policies(target, callers)
        if blocking:
            policy, ports = max(
                blocking,
                key=lambda pb: str((pb[0].get("metadata") or {}).get("creationTimestamp", "")),
            )
            name = name_of(policy)
            self.add(
                Finding(
                    "NetworkPolicy",
                    name,
                    FaultCategory.TRAFFIC_BLOCKED,
                    target,
                    f"NetworkPolicy {name} selects {target}'s pods and admits none of the ports "
                    f"they serve ({', '.join(map(str, ports))}) from its callers",
                    remedy=[_admit(policy, ports)],
                    remedy_words=f"let NetworkPolicy {name} admit port(s) "
                    f"{', '.join(map(str, ports))}",
                )
            )
        change = objects.template_change(target)
        if change is not None and not self.definite_at(target):
            broken = self._broken_addresses(change)
            if change.touches("args", "command") or broken:
                what = ", ".join(change.fields)
                self.add(
                    Finding(
                        "Deployment",
                        target,
                        FaultCategory.BAD_CONFIGURATION,
                        target,
                        f"calls to {target} fail ({_texts(failures)}) since its latest rollout "
                        f"changed {what}",
                        remedy=[
                            AgentAction(
                                verb=ActionVerb.PATCH,
                                kind="Deployment",
                                name=target,
                                patch=change.patch,
                            )
                        ],
                        remedy_words=f"restore Deployment {target}'s pod template fields that "
                        f"changed since revision {change.previous_revision} ({what})",
                    )
                )

    def inspect_caller_config(self, caller: str, failures: list[Failure]) -> bool:
        """A dependency address in the caller's environment that its latest rollout broke."""
        change = self.objects.template_change(caller)
        if change is None:
            return False
        broken = self._broken_addresses(change)
        if not broken:
            return False
        self.add(
            Finding(
                "Deployment",
                caller,
                FaultCategory.BAD_CONFIGURATION,
                caller,
                f"its latest rollout set {'; '.join(broken)}, and its calls fail "
                f"({_texts(failures)})",
                remedy=[
                    AgentAction(
                        verb=ActionVerb.PATCH, kind="Deployment", name=caller, patch=change.patch
                    )
                ],
                remedy_words=f"restore Deployment {caller}'s pod template fields that changed "
                f"since revision {change.previous_revision} ({', '.join(change.fields)})",
            )
        )
        return True

    def _broken_addresses(self, change: Any) -> list[str]:
        out = []
        for var, (_before, now) in change.env.items():
            if now is None or not is_address_variable(var):
                continue
            why = address_broken(str(now), self.objects.services)
            if why:
                out.append(f"{var}={now} ({why})")
        return out


def _admit(policy: dict[str, Any], ports: list[int]) -> AgentAction:
    """A patch adding an ingress rule that admits the blocked ports from the same peers."""
    spec = policy.get("spec") or {}
    rules = list(spec.get("ingress") or [])
    rule: dict[str, Any] = {"ports": [{"protocol": "TCP", "port": p} for p in ports]}
    peers = next((r.get("from") for r in rules if r.get("from")), None)
    if peers:
        rule["from"] = peers
    return AgentAction(
        verb=ActionVerb.PATCH,
        kind="NetworkPolicy",
        name=name_of(policy),
        patch={"spec": {"ingress": [*rules, rule]}},
    )


def _texts(failures: list[Failure]) -> str:
    seen = list(dict.fromkeys(f.text[:100] for f in failures))
    return "; ".join(seen[:2]) or "no error message"


@dataclass
class Origins:
    """Where the incident starts."""

    own: set[str] = field(default_factory=set)
    edges: dict[tuple[str, str], list[Failure]] = field(default_factory=dict)
    slow: set[str] = field(default_factory=set)
    guessed: set[tuple[str, str]] = field(default_factory=set)
    """Failing calls whose callee reports no spans: each callee it may be is a suspect."""


def find_origins(sig: Signals, graph: Graph, workloads: set[str]) -> Origins:
    """Follow failing calls down to where they start, and slow services to the slowest."""
    out = Origins()
    edges: dict[str, set[str]] = {}
    for (a, b), share in sig.edges.items():
        if share > 0:
            edges.setdefault(a, set()).add(b)
    by_reporter: dict[str, list[Failure]] = {}
    for f in sig.failures:
        by_reporter.setdefault(f.reporter, []).append(f)
        if f.target and f.target != f.reporter:
            edges.setdefault(f.reporter, set()).add(f.target)
    for a, targets in list(edges.items()):
        if "" in targets:
            named = {f.target for f in by_reporter.get(a, []) if f.target and f.target != a}
            targets.discard("")
            quiet = [
                c for c in graph.callees.get(a, []) if c not in sig.instrumented and c in workloads
            ]
            targets |= named or set(quiet)
            if not named:
                out.guessed |= {(a, c) for c in quiet}
    seen: set[str] = set()
    starts = sorted(s for s in workloads if sig.failing(s))
    queue = deque(starts)
    while queue:
        s = queue.popleft()
        if s in seen:
            continue
        seen.add(s)
        outs = edges.get(s, set())
        if not outs:
            out.own.add(s)
            continue
        for c in sorted(outs):
            if sig.failing(c) and c != s:
                queue.append(c)
            else:
                failures = [
                    f for f in by_reporter.get(s, []) if f.target in (c, None) or not f.target
                ]
                out.edges[(s, c)] = failures
    for s in sorted(workloads):
        if not sig.slow(s) or edges.get(s):
            continue
        slow_callees = [c for c in graph.callees.get(s, []) if sig.slow(c)]
        if not slow_callees:
            out.slow.add(s)
    return out


def investigate(inv: Investigation) -> list[Finding]:
    """Name the causes of the incident (none when nothing fires)."""
    sig, objects, graph = inv.signals, inv.objects, inv.graph
    workloads = set(objects.deployments)
    if not sig.firing:
        inv.notes.append("no alert fires: nothing is wrong that the alerts know of")
        return []
    symptomatic = (sig.symptomatic() | _unhealthy(objects, workloads)) & workloads
    inv.notes.append(f"services with symptoms: {sorted(symptomatic)}")
    flags = inv.flag_findings(symptomatic)
    origins = find_origins(sig, graph, workloads)
    inv.notes.append(
        f"origins: failing on their own {sorted(origins.own)}; failing calls "
        f"{sorted(f'{a}->{b}' for a, b in origins.edges)}; slowest {sorted(origins.slow)}"
    )
    for w in sorted(symptomatic):
        if (
            sig.alerts(w) & POD_ALERTS
            or w in _unhealthy(objects, workloads)
            or (sig.throttled.get(w, 0.0) > THROTTLED)
        ):
            inv.inspect_workload(w, flags)
    for (a, b), failures in sorted(origins.edges.items()):
        inv.inspect_target(a, b, failures)
        inv.inspect_workload(b, flags)
        kinds = {f.kind for f in failures}
        if "unresolvable" in kinds or any(f.host and not f.target for f in failures):
            inv.inspect_caller_config(a, failures)
    for s in sorted(origins.own):
        inv.inspect_workload(s, flags)
        change = objects.template_change(s)
        if change is not None and not inv.definite_at(s):
            inv.inspect_caller_config(s, [f for f in sig.failures if f.reporter == s])
    _read_from_symptoms(inv, origins, flags, symptomatic)
    return list(inv.findings.values())


def _unhealthy(objects: Objects, workloads: set[str]) -> set[str]:
    out = set()
    for w in workloads:
        state = objects.pod_state(w)
        if (state.pods and state.ready < len(state.pods)) or state.reasons & (
            IMAGE_REASONS | CRASH_REASONS | CONFIG_REASONS | {"Pending", "OOMKilled"}
        ):
            out.add(w)
    return out


def _flag_covers(flags: dict[str, set[str]], services: set[str]) -> bool:
    return any(concerns & services for concerns in flags.values())


def _read_from_symptoms(
    inv: Investigation, origins: Origins, flags: dict[str, set[str]], symptomatic: set[str]
) -> None:
    """Causes no object shows, read from the symptoms at origins nothing definite explains."""
    sig, graph = inv.signals, inv.graph
    for (a, b), failures in sorted(origins.edges.items()):
        if inv.definite_at(b) or inv.definite_at(a) or _flag_covers(flags, {a, b}):
            continue
        if (a, b) in origins.guessed:
            continue  # which of the silent callees fails is unknown; name none of them
        kinds = {f.kind for f in failures}
        text = _texts(failures)
        if "timeout" in kinds:
            others = [
                c
                for c in graph.callers.get(b, [])
                if c != a and sig.rate.get(c, 0.0) > 0 and (c, b) not in origins.edges
            ]
            all_fail = sum(1 for (x, y) in origins.edges if y == b) > 1 and not others
            where = b if all_fail else a
            inv.add(
                Finding(
                    "Deployment",
                    where,
                    FaultCategory.NETWORK_DEGRADED,
                    where,
                    f"calls from {a} to {b} time out ({text}) while {b}'s pods are up and no "
                    f"NetworkPolicy blocks them: the network path of {where} drops packets",
                    definite=False,
                )
            )
        elif "unresolvable" in kinds:
            inv.add(
                Finding(
                    "Deployment",
                    a,
                    FaultCategory.BAD_CONFIGURATION,
                    a,
                    f"{a} calls an address that does not resolve ({text})",
                    definite=False,
                )
            )
        elif kinds & {"no-endpoints", "refused"} and not inv.findings.get(ref("Deployment", b)):
            inv.add(
                Finding(
                    "Deployment",
                    b,
                    FaultCategory.PODS_DOWN,
                    b,
                    f"calls from {a} find nothing serving at {b} ({text})",
                    definite=False,
                )
            )
        elif not inv.findings.get(ref("Deployment", b)):
            inv.add(
                Finding(
                    "Deployment",
                    b,
                    FaultCategory.APPLICATION_FAILURE,
                    b,
                    f"{b} serves no errors itself, yet its callers' requests to it fail ({text}):"
                    f" requests to {b} are aborted or corrupted",
                    definite=False,
                )
            )
    for s in sorted(origins.own):
        if inv.definite_at(s) or _flag_covers(flags, {s}) or inv.findings.get(ref("Deployment", s)):
            continue
        text = _texts([f for f in sig.failures if f.reporter == s])
        inv.add(
            Finding(
                "Deployment",
                s,
                FaultCategory.APPLICATION_FAILURE,
                s,
                f"{s} fails {sig.errors.get(s, 0.0):.0%} of what it serves with no failing call "
                f"below it ({text})",
                definite=False,
            )
        )
    for s in sorted(origins.slow):
        near = {s} | set(graph.callees.get(s, []))
        if (
            inv.definite_at(s)
            or _flag_covers(flags, near)
            or inv.findings.get(ref("Deployment", s))
        ):
            continue
        inv.add(
            Finding(
                "Deployment",
                s,
                FaultCategory.NETWORK_DEGRADED,
                s,
                f"{s} is slow (p95 {sig.latency.get(s, 0.0):.0f} ms) while everything it calls is "
                "fast and its CPU is not throttled: its network path adds latency",
                definite=False,
            )
        )
    explained = {f.service for f in inv.findings.values()}
    for s in sorted(symptomatic - explained):
        alerts = sig.alerts(s)
        if "KafkaConsumerLag" in alerts and not _flag_covers(flags, {s} | graph.neighbours(s)):
            inv.add(
                Finding(
                    "Deployment",
                    s,
                    FaultCategory.APPLICATION_FAILURE,
                    s,
                    f"consumer {s} lags behind on its topic with its pods healthy",
                    definite=False,
                )
            )


def propagation(finding: Finding, inv: Investigation, symptomatic: set[str]) -> list[str]:
    """Workloads from a cause's workload up its callers that show symptoms, to the farthest."""
    graph = inv.graph
    start = finding.service
    previous: dict[str, str] = {}
    depth = {start: 0}
    queue = deque([start])
    while queue:
        current = queue.popleft()
        for caller in sorted(graph.callers.get(current, [])):
            if caller in depth or caller not in symptomatic:
                continue
            depth[caller] = depth[current] + 1
            previous[caller] = current
            queue.append(caller)
    end = max(depth, key=lambda s: (depth[s], s == "frontend", s))
    path = [end]
    while path[-1] != start:
        path.append(previous[path[-1]])
    return list(reversed(path))
