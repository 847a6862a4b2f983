"""The checks an SRE runs where an incident starts, each yielding a cause with its remedy.

A flag flagd serves switched on that concerns the incident's services; a workload's pods (waiting
and termination reasons, events, OOM kills, throttling) read against what its latest rollout
changed, which counts only when the change explains the symptom; what stands between callers and
a callee (its Service, replica count, NetworkPolicies, a changed command); a dependency address
or DNS policy a rollout broke; init containers a rollout changed; a ResourceQuota that refuses a
ReplicaSet's pods; pods pinned to a cordoned node; a higher-priority workload outside the call
graph that crowds pods off the node; a Service that is gone while its Deployment runs; a Secret a
rollout started reading whose credentials the peer refuses. A cause backed by an object is
definite and carries the narrowest remedy on that object; one read from the pods' symptoms alone
is a likely cause without a remedy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from agents.heuristic_sre.flags import flag_concerns, flag_is_on, off_variant
from agents.heuristic_sre.graph import Graph
from agents.heuristic_sre.objects import (
    HOSTNAME_LABEL,
    Objects,
    TemplateChange,
    address_broken,
    containers_of,
    is_address_variable,
    quantity,
    template_of,
)
from agents.heuristic_sre.signals import THROTTLED, Failure, Signals
from agents.routines import name_of, ref, value_before_change
from itbench.client import ActionVerb, AgentAction, FaultCategory, ITBenchClient

MEMORY_FULL = 0.9
"""Working set as a share of the memory limit from which a container is about to be killed."""
IMAGE_REASONS = frozenset({"ImagePullBackOff", "ErrImagePull", "InvalidImageName"})
CRASH_REASONS = frozenset({"CrashLoopBackOff", "Error", "RunContainerError"})
CONFIG_REASONS = frozenset({"CreateContainerConfigError", "CreateContainerError"})
UNHEALTHY_REASONS = IMAGE_REASONS | CRASH_REASONS | CONFIG_REASONS | {"Pending", "OOMKilled"}
SCHEDULING_FIELDS = ("nodeSelector", "affinity", "tolerations", "nodeName")
PROBE_FIELDS = ("readinessProbe", "livenessProbe", "startupProbe")


@dataclass
class Finding:
    """A cause: the entity to blame, what is wrong with it, and what undoes it.

    Attributes:
        kind: Kind of the entity.
        name: Name of the entity.
        category: What is wrong there.
        service: The workload it sits on (the propagation chain starts there).
        condition: The evidence, in words.
        remedy: The actions that undo it (empty: no object an agent can change shows it).
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


def likely(workload: str, category: FaultCategory, condition: str) -> Finding:
    """A cause read from a workload's symptoms alone: named, not acted on."""
    return Finding("Deployment", workload, category, workload, condition, definite=False)


def _restore(workload: str, change: TemplateChange) -> tuple[list[AgentAction], str]:
    action = AgentAction(
        verb=ActionVerb.PATCH, kind="Deployment", name=workload, patch=change.patch
    )
    words = (
        f"restore Deployment {workload}'s pod template fields that changed since revision "
        f"{change.previous_revision} ({', '.join(change.fields)})"
    )
    return [action], words


@dataclass(frozen=True)
class PodSymptoms:
    """What a workload's pods show, each as a yes or no."""

    image: bool
    exec_format: bool
    crash: bool
    oom: bool
    memory: bool
    throttled: bool
    pending: bool
    probe: bool
    config: bool
    not_ready: bool
    init: bool = False
    quota: bool = False

    def named(self) -> list[str]:
        """The symptoms present, in words."""
        words = (
            ("image cannot be pulled", self.image),
            ("binary cannot run (exec format error)", self.exec_format),
            ("crash looping", self.crash),
            ("OOM-killed", self.oom),
            ("close to its memory limit", self.memory),
            ("CPU throttled", self.throttled),
            ("pods cannot be scheduled", self.pending),
            ("readiness probe fails", self.probe),
            ("container config error", self.config),
            ("an init container does not complete", self.init),
            ("pods refused by a ResourceQuota", self.quota),
            ("pods not ready", self.not_ready),
        )
        return [w for w, present in words if present]

    def explained_by(self, change: TemplateChange) -> tuple[FaultCategory, str] | None:
        """What a template change explains of these symptoms (None: nothing)."""
        crash_alone = self.crash and not self.oom  # an OOM kill explains its own crash loop
        if (self.image or self.exec_format or crash_alone) and change.touches("image"):
            return FaultCategory.BAD_IMAGE, "its image changed and cannot run"
        if self.init and change.touches("initContainers"):
            return (
                FaultCategory.BAD_CONFIGURATION,
                "its init containers changed and do not complete",
            )
        if self.pending and change.touches(*SCHEDULING_FIELDS):
            return FaultCategory.UNSCHEDULABLE, "its node placement changed"
        if self.pending and change.touches("volumes"):
            return FaultCategory.UNSCHEDULABLE, "its volumes changed and cannot be bound"
        if self.probe and change.touches(*PROBE_FIELDS):
            return FaultCategory.BAD_PROBE, "its probe changed and fails"
        if self.oom and change.memory_lowered:
            return FaultCategory.RESOURCE_LIMITS, "its memory limit was lowered"
        if self.throttled and change.cpu_lowered:
            return FaultCategory.RESOURCE_LIMITS, "its CPU limit was lowered"
        if (crash_alone or self.config) and (
            change.touches("args", "command", "volumeMounts") or change.behaviour_env()
        ):
            return FaultCategory.BAD_CONFIGURATION, "its command or environment changed"
        return None

    def read_alone(self) -> tuple[FaultCategory, str] | None:
        """The likely cause when nothing the agent can see explains the symptoms."""
        if self.oom or self.memory or self.throttled:
            return FaultCategory.RESOURCE_STRESS, (
                "limits unchanged since the previous revision: something inside the pods burns "
                "CPU or memory"
            )
        if self.image or self.exec_format:
            return FaultCategory.BAD_IMAGE, "the image cannot run"
        if self.pending:
            return FaultCategory.UNSCHEDULABLE, "no node takes the pods"
        if self.probe:
            return FaultCategory.BAD_PROBE, "the probe fails"
        if self.not_ready or self.crash:
            return FaultCategory.PODS_DOWN, (
                "no failing probe, bad image or changed template: the pods run but do not serve"
            )
        return None


@dataclass
class Investigation:
    """What was read of the trial, and the causes found in it."""

    client: ITBenchClient
    objects: Objects
    signals: Signals
    graph: Graph
    notes: list[str] = field(default_factory=list)
    findings: dict[str, Finding] = field(default_factory=dict)
    flags: dict[str, set[str]] = field(default_factory=dict)
    """Flags switched on that concern the incident, with the services each concerns."""
    crowded: set[str] = field(default_factory=set)
    """Workloads whose pods a definite cause elsewhere keeps off the node."""
    _inspected: set[str] = field(default_factory=set)

    def add(self, finding: Finding) -> None:
        """Record a finding once per entity (a definite one wins over a symptom reading)."""
        have = self.findings.get(finding.ref)
        if have is not None and (have.definite or not finding.definite):
            have.remedy += [a for a in finding.remedy if a not in have.remedy]
            return
        self.findings[finding.ref] = finding
        kind = "cause" if finding.definite else "likely cause"
        self.notes.append(f"{kind}: {finding.ref} [{finding.category.value}]: {finding.condition}")

    def definite_at(self, workload: str) -> bool:
        """Whether a definite finding sits on (or explains) this workload."""
        return workload in self.crowded or any(
            f.definite and f.service == workload for f in self.findings.values()
        )

    def named(self, workload: str) -> bool:
        """Whether any finding names this workload's Deployment."""
        return ref("Deployment", workload) in self.findings

    def flag_covers(self, services: set[str]) -> bool:
        """Whether a flag switched on concerns one of these services."""
        return any(concerns & services for concerns in self.flags.values())

    # ---- flags -----------------------------------------------------------------------------
    def inspect_flags(self, symptomatic: set[str]) -> None:
        """Flags flagd serves switched on that concern the services with symptoms or their
        direct neighbours."""
        workloads = sorted(self.objects.deployments)
        near = set(symptomatic)
        for s in symptomatic:
            near |= self.graph.neighbours(s)
        for key, spec in sorted(self.objects.flags().items()):
            if not flag_is_on(spec):
                continue
            concerns = flag_concerns(key, spec, workloads)
            if not concerns & near:
                self.notes.append(
                    f"flag {key} is on but concerns {sorted(concerns)}, not the incident's"
                )
                continue
            off = off_variant(spec)
            service = (sorted(concerns & symptomatic) or sorted(concerns))[0]
            action = AgentAction(
                verb=ActionVerb.SET_FLAG, kind="Flag", name=key, flag=key, variant=off
            )
            self.add(
                Finding(
                    kind="Flag",
                    name=key,
                    category=FaultCategory.FEATURE_FLAG,
                    service=service,
                    condition=f"flagd serves {key}={spec.get('defaultVariant')} "
                    f"({spec.get('description', '')}); it concerns {', '.join(sorted(concerns))}",
                    remedy=[action] if off else [],
                    remedy_words=f"switch flag {key} to {off}",
                    follow_up=sorted(concerns & symptomatic),
                )
            )
            self.flags[key] = concerns

    # ---- workloads -------------------------------------------------------------------------
    def pod_symptoms(self, w: str) -> tuple[PodSymptoms, str]:
        """What a workload's pods show, and a line describing them."""
        sig, state = self.signals, self.objects.pod_state(w)
        reasons, alerts = state.reasons, sig.alerts(w)
        symptoms = PodSymptoms(
            image=bool(reasons & IMAGE_REASONS)
            or any("pull" in e.lower() for e in state.event("Failed", "ErrImagePull")),
            exec_format="exec format error" in " ".join(sig.lines.get(w, [])),
            crash=bool(reasons & CRASH_REASONS) or "PodCrashLooping" in alerts,
            oom="OOMKilled" in reasons
            or bool(state.event("OOMKilling"))
            or "ContainerOOMKilled" in alerts,
            memory=sig.memory.get(w, 0.0) > MEMORY_FULL or "MemoryUsageHigh" in alerts,
            throttled=sig.throttled.get(w, 0.0) > THROTTLED or "CPUThrottlingHigh" in alerts,
            pending="Pending" in reasons or bool(state.event("FailedScheduling")),
            probe=any("probe failed" in e.lower() for e in state.event("Unhealthy")),
            config=bool(reasons & CONFIG_REASONS),
            not_ready=bool(state.pods) and state.ready < len(state.pods),
            init=bool(state.init),
            quota=bool(_quota_refusals(state.event("FailedCreate"))),
        )
        line = (
            f"{w}: {', '.join(symptoms.named())}; pods {state.ready}/{len(state.pods)} ready, "
            f"reasons {sorted(reasons)}, restarts {state.restarts}"
        )
        return symptoms, line

    def inspect_workload(self, w: str) -> None:
        """A workload's pods, read against what its latest rollout changed."""
        if w in self._inspected or w not in self.objects.deployments:
            return
        self._inspected.add(w)
        symptoms, line = self.pod_symptoms(w)
        if not symptoms.named():
            return
        if self._inspect_quota(w) or self._inspect_cordoned(w):
            self.notes.append(line)
            return
        change = self.objects.template_change(w)
        if change is not None:
            line += f"; template changed since revision {change.previous_revision}: "
            line += ", ".join(change.fields)
        self.notes.append(line)
        explained = symptoms.explained_by(change) if change is not None else None
        if explained is not None and change is not None:
            category, why = explained
            remedy, words = _restore(w, change)
            if symptoms.init:
                self._name_init_config(w, change, why)
            self.add(
                Finding(
                    "Deployment",
                    w,
                    category,
                    w,
                    f"{', '.join(symptoms.named())}: {why} in its latest rollout "
                    f"({', '.join(change.fields)})",
                    remedy=remedy,
                    remedy_words=words,
                )
            )
            return
        if self.flag_covers({w}):
            return  # the flag that concerns the workload explains what its pods do
        alone = symptoms.read_alone()
        if alone is not None:
            category, why = alone
            self.add(likely(w, category, f"{', '.join(symptoms.named())}: {why}"))

    def _name_init_config(self, w: str, change: TemplateChange, why: str) -> None:
        """The ConfigMaps that a failing init container reads through volumes the latest
        rollout added."""
        state = self.objects.pod_state(w)
        if not any(("CrashLoopBackOff" in i or "Error" in i) for i in state.init):
            return  # a hanging init container is its own command, not what it reads
        previous = self.objects.previous_replicaset(w)
        before = {str(v.get("name")) for v in _spec(previous or {}).get("volumes") or []}
        for v in _spec(self.objects.deployments[w]).get("volumes") or []:
            name = (v.get("configMap") or {}).get("name")
            if name and v.get("name") not in before:
                self.add(
                    Finding(
                        "ConfigMap",
                        str(name),
                        FaultCategory.BAD_CONFIGURATION,
                        w,
                        f"{w}'s init container fails on the ConfigMap {name} its latest rollout "
                        f"mounts: {why}",
                    )
                )

    def _inspect_quota(self, w: str) -> bool:
        """A ResourceQuota that refuses the pods of the workload's ReplicaSet."""
        refusals = _quota_refusals(self.objects.pod_state(w).event("FailedCreate"))
        quotas = {name_of(q) for q in self.objects.quotas}
        named = sorted(n for n in refusals if n in quotas)
        if not named:
            return False
        for name in named:
            self.add(
                Finding(
                    "ResourceQuota",
                    name,
                    FaultCategory.UNSCHEDULABLE,
                    w,
                    f"{w}'s ReplicaSet cannot create pods: {refusals[name]}",
                    remedy=[AgentAction(verb=ActionVerb.DELETE, kind="ResourceQuota", name=name)],
                    remedy_words=f"delete ResourceQuota {name}, which refuses {w}'s pods",
                )
            )
        return True

    def _inspect_cordoned(self, w: str) -> bool:
        """Pods pinned to one node the scheduler reports unschedulable (cordoned)."""
        state = self.objects.pod_state(w)
        cordoned = [e for e in state.event("FailedScheduling") if "were unschedulable" in e]
        selector = (template_of(self.objects.deployments[w]).get("spec") or {}).get(
            "nodeSelector"
        ) or {}
        if not cordoned or len(state.pinned) != 1 or HOSTNAME_LABEL not in selector:
            return False
        (node,) = state.pinned
        patch = {"spec": {"template": {"spec": {"nodeSelector": None}}}}
        self.add(
            Finding(
                "Node",
                node,
                FaultCategory.UNSCHEDULABLE,
                w,
                f"{w}'s new pods are pinned to node {node} ({HOSTNAME_LABEL}), which the "
                f"scheduler reports unschedulable (cordoned): {cordoned[0].split(': ', 1)[-1]}",
                remedy=[AgentAction(verb=ActionVerb.PATCH, kind="Deployment", name=w, patch=patch)],
                remedy_words=f"drop Deployment {w}'s pin to node {node} (Nodes are beyond the "
                "namespace)",
            )
        )
        return True

    def inspect_crowding(self, unhealthy: set[str]) -> None:
        """Pods left Pending for lack of CPU or memory while a workload outside the call graph
        holds the node with pods of a higher priority class: the crowding workload is the cause,
        and the pending ones are its symptoms."""
        objects = self.objects
        starved = sorted(
            w
            for w in unhealthy
            if any("Insufficient" in e for e in objects.pod_state(w).event("FailedScheduling"))
        )
        if not starved:
            return
        in_graph = set(self.graph.callers) | set(self.graph.callees)
        starved_classes = {_spec(objects.deployments[w]).get("priorityClassName") for w in starved}
        best: tuple[float, str] | None = None
        for name, d in objects.deployments.items():
            priority = _spec(d).get("priorityClassName")
            if name in in_graph or not priority or priority in starved_classes:
                continue
            held = (objects.replicas(name) or 0) * sum(
                (
                    quantity(((c.get("resources") or {}).get("requests") or {}).get("cpu", 0))
                    or 0.0
                    for c in containers_of(template_of(d))
                ),
                0.0,
            )
            if held > 0 and (best is None or held > best[0]):
                best = (held, name)
        if best is None:
            return
        held, crowd = best
        priority = _spec(objects.deployments[crowd])["priorityClassName"]
        self.add(
            Finding(
                "Deployment",
                crowd,
                FaultCategory.UNSCHEDULABLE,
                starved[0],
                f"{crowd} (priority class {priority}, "
                f"outside the application's call graph) requests {held:g} CPU on the node, and "
                f"the pods of {', '.join(starved)} are left Pending for lack of CPU or memory",
                remedy=[AgentAction(verb=ActionVerb.DELETE, kind="Deployment", name=crowd)],
                remedy_words=f"delete Deployment {crowd}, which crowds the application out",
            )
        )
        for w in starved:
            self._inspected.add(w)
            self.crowded.add(w)
            self.notes.append(
                f"{w}: pods Pending for lack of CPU or memory, crowded out by {crowd}"
            )

    def inspect_credentials(self, w: str, failures: list[Failure]) -> None:
        """Authentication failures of a workload whose latest rollout took a variable from a
        Secret: the Secret holds credentials its peer refuses."""
        change = self.objects.template_change(w)
        if change is None or self.definite_at(w) or w not in self.objects.deployments:
            return
        secrets = sorted(
            {
                str(ref.get("name"))
                for c in containers_of(template_of(self.objects.deployments[w]))
                for e in c.get("env") or []
                if e.get("name") in change.env
                for ref in [((e.get("valueFrom") or {}).get("secretKeyRef") or {})]
                if ref.get("name")
            }
        )
        if not secrets:
            return
        remedy, words = _restore(w, change)
        why = (
            f"{w}'s latest rollout takes {', '.join(sorted(change.env))} from Secret(s) "
            f"{', '.join(secrets)}, and its peer refuses the credentials ({texts(failures)})"
        )
        self.add(
            Finding(
                "Deployment",
                w,
                FaultCategory.BAD_CONFIGURATION,
                w,
                why,
                remedy=remedy,
                remedy_words=words,
            )
        )
        for name in secrets:
            self.add(Finding("Secret", name, FaultCategory.BAD_CONFIGURATION, w, why))

    def inspect_missing_services(self, failures: list[Failure]) -> None:
        """Names callers fail to resolve that are workloads of the namespace without a Service:
        the Service in front of them is gone. The remedy creates it again from what the
        Deployment declares (its selector and container ports)."""
        objects = self.objects
        callers: dict[str, set[str]] = {}
        for f in failures:
            name = (f.host or "").split(".", 1)[0]
            if (
                f.kind == "unresolvable"
                and name in objects.deployments
                and name not in objects.services
            ):
                callers.setdefault(name, set()).add(f.reporter)
        for name, who in sorted(callers.items()):
            manifest = self._service_manifest(name)
            if manifest is None:
                continue
            shown = ", ".join(str(p["port"]) for p in manifest["spec"]["ports"])
            self.add(
                Finding(
                    "Service",
                    name,
                    FaultCategory.SERVICE_MISROUTED,
                    name,
                    f"{', '.join(sorted(who))} cannot resolve {name}: Deployment {name} runs, "
                    f"but no Service {name} stands in front of it",
                    remedy=[
                        AgentAction(
                            verb=ActionVerb.APPLY, kind="Service", name=name, manifest=manifest
                        )
                    ],
                    remedy_words=f"create Service {name} again (port(s) {shown})",
                )
            )

    def _service_manifest(self, name: str) -> dict[str, Any] | None:
        d = self.objects.deployments[name]
        selector = dict(((d.get("spec") or {}).get("selector") or {}).get("matchLabels") or {})
        ports = [
            {"name": port_name or f"tcp-{number}", "port": number, "targetPort": number}
            for port_name, number in self.objects.container_ports(name)
        ]
        if not selector or not ports:
            return None
        labels = dict((template_of(d).get("metadata") or {}).get("labels") or {})
        return {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": self.objects.namespace, "labels": labels},
            "spec": {"type": "ClusterIP", "selector": selector, "ports": ports},
        }

    def inspect_target(self, caller: str, target: str, failures: list[Failure]) -> None:
        """What stands between callers and a callee they fail to reach: its Service, replica
        count, NetworkPolicies, and a change of its command or dependency addresses."""
        objects = self.objects
        if target not in objects.deployments:
            return
        if target in objects.services:
            for why, patch in objects.service_problems(target, target):
                action = AgentAction(
                    verb=ActionVerb.PATCH, kind="Service", name=target, patch=patch
                )
                self.add(
                    Finding(
                        "Service",
                        target,
                        FaultCategory.SERVICE_MISROUTED,
                        target,
                        why,
                        remedy=[action],
                        remedy_words=f"fix Service {target}",
                    )
                )
        self.inspect_replicas(target)
        self._inspect_policies(caller, target)
        change = objects.template_change(target)
        if change is None or self.definite_at(target):
            return
        if change.touches("args", "command") or self._broken_addresses(change):
            remedy, words = _restore(target, change)
            self.add(
                Finding(
                    "Deployment",
                    target,
                    FaultCategory.BAD_CONFIGURATION,
                    target,
                    f"calls to {target} fail ({texts(failures)}) since its latest rollout "
                    f"changed {', '.join(change.fields)}",
                    remedy=remedy,
                    remedy_words=words,
                )
            )

    def inspect_replicas(self, target: str) -> None:
        """A Deployment asking for no replicas: scale it back to what it ran."""
        objects = self.objects
        if objects.replicas(target) != 0 or objects.autoscaled(target):
            return
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
                f"Deployment {target} asks for 0 replicas (it ran {count} before), so calls to "
                "it find no endpoints",
                remedy=[
                    AgentAction(
                        verb=ActionVerb.SCALE, kind="Deployment", name=target, replicas=count
                    )
                ],
                remedy_words=f"scale Deployment {target} back to {count}",
            )
        )

    def _inspect_policies(self, caller: str, target: str) -> None:
        callers = sorted(self.graph.callers.get(target, [])) or [caller]
        blocking = self.objects.blocking_policies(target, callers)
        if not blocking:
            return
        # Together they leave the port out; admitting it in one of them is enough.
        policy, ports = min(blocking, key=lambda pb: name_of(pb[0]))
        name, shown = name_of(policy), ", ".join(map(str, ports))
        self.add(
            Finding(
                "NetworkPolicy",
                name,
                FaultCategory.TRAFFIC_BLOCKED,
                target,
                f"NetworkPolicy {name} selects {target}'s pods and admits none of the ports they "
                f"serve ({shown}) from its callers",
                remedy=[admit(policy, ports)],
                remedy_words=f"let NetworkPolicy {name} admit port(s) {shown}",
            )
        )

    def inspect_caller_config(self, caller: str, failures: list[Failure]) -> None:
        """A dependency address in the caller's environment that its latest rollout broke."""
        change = self.objects.template_change(caller)
        broken = self._broken_addresses(change) if change is not None else []
        if (
            change is not None
            and change.touches("dnsPolicy")
            and any(f.kind == "unresolvable" for f in failures)
        ):
            broken.append("a dnsPolicy under which the namespace's Service names do not resolve")
        if change is None or not broken:
            return
        remedy, words = _restore(caller, change)
        self.add(
            Finding(
                "Deployment",
                caller,
                FaultCategory.BAD_CONFIGURATION,
                caller,
                f"its latest rollout set {'; '.join(broken)}, and its calls fail "
                f"({texts(failures)})",
                remedy=remedy,
                remedy_words=words,
            )
        )

    def _broken_addresses(self, change: TemplateChange) -> list[str]:
        out = []
        for var, (_before, now) in change.behaviour_env().items():
            if now is None or not is_address_variable(var):
                continue
            why = address_broken(str(now), self.objects.services)
            if why:
                out.append(f"{var}={now} ({why})")
        return out


def admit(policy: dict[str, Any], ports: list[int]) -> AgentAction:
    """A patch adding an ingress rule that admits the blocked ports from the same peers."""
    rules = list((policy.get("spec") or {}).get("ingress") or [])
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


def _spec(d: dict[str, Any]) -> dict[str, Any]:
    return dict(template_of(d).get("spec") or {})


_QUOTA = re.compile(r"exceeded quota: ([a-z0-9][a-z0-9.-]*)")


def _quota_refusals(events: list[str]) -> dict[str, str]:
    """Quota name -> the refusal, from FailedCreate events."""
    out: dict[str, str] = {}
    for e in events:
        m = _QUOTA.search(e)
        if m:
            out.setdefault(m.group(1), e.split(": ", 1)[-1][:200])
    return out


def texts(failures: list[Failure]) -> str:
    """The first distinct messages of some failures, for a condition."""
    seen = list(dict.fromkeys(f.text[:100] for f in failures))
    return "; ".join(seen[:2]) or "no error message"
